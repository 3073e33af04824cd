"""sys.dm_os_memory_clerks: who holds SQL Server's memory (buffer pool, plan caches, query workspace, locks,
In-Memory OLTP...), in bytes per clerk type.

A server has hundreds of clerks (one per type and memory node, more for some types) and some 150 types.
The sum per type is taken in SQL (GROUP BY), over a fixed list of the major types; every other type is
summed into one clerk="other". So the series are the same fixed set on every server, whatever its
workload: a top-N by size would change its members from scrape to scrape and break graphs and rates.

The type names are the ones in the "Memory clerk types" table of Microsoft's sys.dm_os_memory_clerks page;
the label is the type name as SQL Server spells it, so a DBA can look it up there or in the DMV itself.
pages_kb arrived with SQL Server 2012 (before, single_pages_kb and multi_pages_kb); every supported
version has it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, ImpossibleValue, MissingData
from ..metrics.declare import Label, MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of, sql_literal

TAG = "memory_clerks"
OTHER = "other"

# The major clerk types, each exported as its own series (docs/metrics.md says what each one holds).
CLERKS = (
    "MEMORYCLERK_SQLBUFFERPOOL",  # the buffer pool: data and index pages
    "CACHESTORE_SQLCP",  # plan cache: ad hoc and prepared statements
    "CACHESTORE_OBJCP",  # plan cache: stored procedures, functions, triggers
    "CACHESTORE_PHDR",  # parse trees (algebrizer) of views, constraints, defaults during compilation
    "MEMORYCLERK_SQLQERESERVATIONS",  # query workspace: memory grants for sorts and hashes
    "MEMORYCLERK_SQLQUERYEXEC",  # query execution: batch mode, parallelism, execution contexts
    "MEMORYCLERK_SQLQUERYCOMPILE",  # the optimizer while compiling
    "OBJECTSTORE_LOCK_MANAGER",  # locks
    "MEMORYCLERK_SQLLOGPOOL",  # log pool (log reads: Always On, recovery, replication, backup)
    "MEMORYCLERK_XTP",  # In-Memory OLTP (memory-optimized tables)
    "MEMORYCLERK_SQLGENERAL",  # many small consumers
    "MEMORYCLERK_SQLCONNECTIONPOOL",  # per-connection state, e.g. prepared handles
    "USERSTORE_TOKENPERM",  # security tokens and permission checks
    "MEMORYCLERK_SOSNODE",  # SQLOS scheduling, memory and I/O structures
    "CACHESTORE_COLUMNSTOREOBJECTPOOL",  # columnstore segments and dictionaries
)
LABELS = (*CLERKS, OTHER)


def _case() -> str:
    names = ", ".join(sql_literal(c) for c in CLERKS)
    return f"CASE WHEN mc.type IN ({names}) THEN mc.type ELSE {sql_literal(OTHER)} END"


SECTION = Section(
    tag=TAG,
    sql=f"SELECT {sql_literal(TAG)} AS section, {_case()} AS clerk, SUM(mc.pages_kb) AS pages_kb\n"
    "FROM sys.dm_os_memory_clerks AS mc\n"
    f"GROUP BY {_case()};",
    requires=("sys.dm_os_memory_clerks",),
)

CLERK_BYTES = MetricSpec(
    name="mssql_memory_clerk_bytes",
    type="gauge",
    help="Memory held by SQL Server's memory clerks of this type (sys.dm_os_memory_clerks.pages_kb summed per"
    ' type), in bytes; clerk="other" sums every type not listed.',
    unit="bytes",
    source="`sys.dm_os_memory_clerks` `SUM(pages_kb)` \u00d7 1024 per clerk type",
    question="Who holds the memory: buffer pool, plan cache, query workspace, locks, In-Memory OLTP? "
    "Stacked, the series add up to about `mssql_memory_total_bytes` (Total Server Memory).",
    labels=(Label("clerk", "a type in the table below, or `other`"),),
    columns=("pages_kb",),
)
_BY_NAME = {c.casefold(): c for c in CLERKS}


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    held = dict.fromkeys(LABELS, 0.0)
    seen = False
    for row in rows_of(results, TAG):
        seen = True
        clerk = str(row.get("clerk") or "").strip()
        value = number(row.get("pages_kb"), f"pages_kb of {clerk!r}")
        if value is None:
            continue  # SUM over no non-NULL pages_kb: nothing held
        if value < 0:  # summed with the others it could hide in a plausible total
            raise ImpossibleValue(f"pages_kb of {clerk!r} is {value!r}: memory held is never negative")
        # The SQL already folds unknown types into "other"; a name it did not fold (a server answering
        # in another case) still lands on its own series or on "other", never on a new one.
        held[_BY_NAME.get(clerk.casefold(), OTHER)] += value * KIB
    if not seen:
        raise MissingData("sys.dm_os_memory_clerks sent no clerks")
    for clerk in LABELS:
        # A listed type with no clerk on this server holds nothing: 0, so the set of series never changes.
        out.emit(CLERK_BYTES, held[clerk], {"clerk": clerk})


COLLECTOR = CollectorRecord(
    name="memory_clerks",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(CLERK_BYTES,),
)
