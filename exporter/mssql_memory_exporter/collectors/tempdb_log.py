"""tempdb's transaction log, every scrape: how full it is and why it cannot be truncated.

tempdb's log is truncated at every checkpoint, up to the oldest transaction still open in tempdb. A
transaction that never ends holds it there: the log fills, autogrows, and once it can grow no further
every change in tempdb fails with error 9002, which stops the instance as surely as full data files.

tempdb.sys.dm_db_log_space_usage (SQL Server 2012 on) answers for tempdb from any database and combines
all its log files into one row. sys.databases.log_reuse_wait_desc of tempdb (database_id 2) says what
keeps the log from being reused (NOTHING, CHECKPOINT, ACTIVE_TRANSACTION, ...). The stand-in cannot
join the two, and neither needs the other: they are two small sections of the same batch.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, ImpossibleValue
from ..metrics.declare import Label, MetricSpec
from . import tempdb_files
from .base import CollectorRecord, Row, ScrapeContext, Section, SectionResult, number, rows_of

SPACE_TAG = "tempdb_log_space"
REUSE_TAG = "tempdb_log_reuse"

SPACE = Section(
    tag=SPACE_TAG,
    sql="SELECT N'tempdb_log_space' AS section, ls.total_log_size_in_bytes, ls.used_log_space_in_bytes\n"
    "FROM tempdb.sys.dm_db_log_space_usage AS ls;",
    requires=("tempdb.sys.dm_db_log_space_usage",),
)
REUSE = Section(
    tag=REUSE_TAG,
    sql="SELECT N'tempdb_log_reuse' AS section, d.log_reuse_wait_desc\n"
    f"FROM sys.databases AS d\nWHERE d.database_id = {tempdb_files.TEMPDB_ID};",
    requires=("sys.databases",),
)

SIZE_BYTES = MetricSpec(
    name="mssql_tempdb_log_size_bytes",
    type="gauge",
    help="Size of tempdb's transaction log, all its log files together"
    " (tempdb.sys.dm_db_log_space_usage.total_log_size_in_bytes).",
    unit="bytes",
    source="`tempdb.sys.dm_db_log_space_usage` `total_log_size_in_bytes`: all of tempdb's log files together",
    question="How large is tempdb's log now? It grows with autogrowth and shrinks only at a restart (or a "
    "manual shrink).",
    columns=("total_log_size_in_bytes",),
)
USED_BYTES = MetricSpec(
    name="mssql_tempdb_log_used_bytes",
    type="gauge",
    help="Bytes of tempdb's transaction log in use, which a checkpoint cannot truncate while the oldest"
    " open transaction holds them (tempdb.sys.dm_db_log_space_usage.used_log_space_in_bytes).",
    unit="bytes",
    source="`tempdb.sys.dm_db_log_space_usage` `used_log_space_in_bytes`",
    question="How much of it is in use? Used near size means the log must grow at the next change; used "
    "that keeps rising means something holds the truncation point.",
    columns=("used_log_space_in_bytes",),
)
REUSE_WAIT = MetricSpec(
    name="mssql_tempdb_log_reuse_wait",
    type="gauge",
    help="1, labelled with what tempdb's log waits on before its space can be reused"
    " (sys.databases.log_reuse_wait_desc: NOTHING, CHECKPOINT, ACTIVE_TRANSACTION, ...).",
    unit="always 1",
    source="`sys.databases` `log_reuse_wait_desc` of tempdb (`database_id` 2)",
    question="Why can the log not be reused? `ACTIVE_TRANSACTION` with a rising used figure is the "
    "transaction that will fill it; `NOTHING` and `CHECKPOINT` are the normal states. One series; it "
    "changes label when the reason changes.",
    labels=(
        Label(
            "reason",
            "as the server spells it: `NOTHING`, `CHECKPOINT`, `ACTIVE_TRANSACTION`, "
            "`AVAILABILITY_REPLICA`, `OLDEST_PAGE`, \u2026",
        ),
    ),
)


def _one_row(results: Mapping[str, SectionResult], tag: str, what: str) -> Row:
    """The single row a section about tempdb alone sends (none is already a section failure)."""
    rows = list(rows_of(results, tag))
    if len(rows) != 1:
        raise ImpossibleValue(f"{what} sent {len(rows)} rows for tempdb; it has one")
    return rows[0]


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    space = _one_row(results, SPACE_TAG, "tempdb.sys.dm_db_log_space_usage")
    reuse = _one_row(results, REUSE_TAG, "sys.databases")
    total = number(space.get("total_log_size_in_bytes"), "total_log_size_in_bytes of tempdb")
    used = number(space.get("used_log_space_in_bytes"), "used_log_space_in_bytes of tempdb")
    reason = reuse.get("log_reuse_wait_desc")
    if reason is not None and not isinstance(reason, str):
        raise ImpossibleValue(f"log_reuse_wait_desc of tempdb is {reason!r}, not text")
    # NULL: not known, so absent rather than 0.
    if total is not None:
        out.emit(SIZE_BYTES, total)
    if used is not None:
        out.emit(USED_BYTES, used)
    if reason is not None and reason.strip():
        out.emit(REUSE_WAIT, 1.0, {"reason": reason.strip()})


COLLECTOR = CollectorRecord(
    name="tempdb_log",
    sections=(SPACE_TAG, REUSE_TAG),
    collect=collect,
    defines=(SPACE, REUSE),
    metrics=(SIZE_BYTES, USED_BYTES, REUSE_WAIT),
)
