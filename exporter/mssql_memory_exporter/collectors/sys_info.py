"""sys.dm_os_sys_info: when the instance started, so rules can tell a restart from a counter glitch, and
how many logical CPUs it sees (tempdb's advised data file count is min(CPUs, 8)).

The same SELECT also brings committed_kb and committed_target_kb, which memory_config exports: one read
of the view, and this collector keeps its one job.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import MetricSpec
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

TAG = "sys_info"

# Uptime comes from two readings of the same millisecond tick counter, and "now" from the server's
# own UTC clock in the same statement, so network latency and time zones (sqlserver_start_time is
# local time) play no part.
SECTION = Section(
    tag=TAG,
    sql="SELECT N'sys_info' AS section,"
    " DATEDIFF_BIG(MILLISECOND, '19700101', SYSUTCDATETIME()) AS now_unix_ms,"
    " si.ms_ticks, si.sqlserver_start_time_ms_ticks, si.cpu_count, si.committed_kb, si.committed_target_kb\n"
    "FROM sys.dm_os_sys_info AS si;",
    requires=("sys.dm_os_sys_info",),
)

# The tick counter and the wall clock drift apart (crystal error, NTP slewing the wall clock only), so
# the computed start wobbles, and over weeks of uptime it wanders by more than seconds. A start time
# that moved would look like a restart to changes()/resets-based rules, so moves within the tolerance
# keep the earlier value. The tolerance grows with uptime at 100 ppm (8.6 s per day up), beyond what
# clocks drift; a real restart moves the start by about the previous uptime and resets the uptime,
# so it always shows.
JITTER_FLOOR_SECONDS = 5.0
JITTER_PER_SECOND_UP = 1e-4
MEMO_KEY = "start_time_seconds"

LOGICAL_CPUS = MetricSpec(
    name="mssql_logical_cpus",
    type="gauge",
    help="Logical CPUs of the server (sys.dm_os_sys_info.cpu_count).",
    unit="CPUs",
    source="`sys.dm_os_sys_info` `cpu_count`, read every scrape with the start time (no extra cost)",
    question="How many logical CPUs? tempdb's usual advice is min(this, 8) data files; see "
    "[tempdb layout](#tempdb-layout-facts).",
)
START_TIME = MetricSpec(
    name="mssql_start_time_seconds",
    type="gauge",
    help="Unix time the SQL Server instance started.",
    unit="seconds (Unix time)",
    source="`sys.dm_os_sys_info` `ms_ticks`, `sqlserver_start_time_ms_ticks` and `SYSUTCDATETIME()`, one "
    "statement; see [Start time](#start-time)",
    question="When did the instance (re)start? A change is a restart, which resets every counter.",
)


def jitter_tolerance(uptime_seconds: float) -> float:
    """How far the computed start time may move, at this uptime, before it counts as a new start."""
    return max(JITTER_FLOOR_SECONDS, JITTER_PER_SECOND_UP * uptime_seconds)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    for row in rows_of(results, TAG):
        cpus = number(row.get("cpu_count"), "cpu_count")
        if cpus is not None:
            out.emit(LOGICAL_CPUS, cpus)
        now_ms, ticks, start_ticks = (
            row.get("now_unix_ms"),
            row.get("ms_ticks"),
            row.get("sqlserver_start_time_ms_ticks"),
        )
        if now_ms is None or ticks is None or start_ticks is None:
            return
        uptime_ms = int(ticks) - int(start_ticks)  # type: ignore[call-overload]
        start = round((int(now_ms) - uptime_ms) / 1000.0)  # type: ignore[call-overload]
        previous = ctx.memo.get(MEMO_KEY)
        if isinstance(previous, float) and abs(previous - start) < jitter_tolerance(uptime_ms / 1000.0):
            start = previous
        ctx.memo[MEMO_KEY] = float(start)
        out.emit(START_TIME, float(start))
        return


COLLECTOR = CollectorRecord(
    name="sys_info",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(LOGICAL_CPUS, START_TIME),
)
