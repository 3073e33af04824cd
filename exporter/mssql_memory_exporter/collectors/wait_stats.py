"""sys.dm_os_wait_stats for a fixed list of wait types: what the workers waited for, and how long.

The list covers memory (workspace grants, compile memory, memory-object contention, virtual memory low),
the buffer pool's reads and latches, and the log and worker-thread waits that memory pressure turns into.
It is filtered in SQL (WHERE wait_type IN (...)): a server lists about a thousand wait types.

The columns are cumulative since the instance started; `DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR)`
sets them back to 0, which Prometheus' rate() treats as a counter reset, like a restart. A wait type the
server does not list (none of these on a supported version: SQL Server lists every type it knows, waited
on or not) is absent, not 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of, sql_literal

TAG = "wait_stats"
MS = 1000.0

WAIT_TYPES = (
    "RESOURCE_SEMAPHORE",  # queries waiting for a workspace memory grant
    "RESOURCE_SEMAPHORE_QUERY_COMPILE",  # compilations waiting for compile memory
    "PAGEIOLATCH_SH",  # reading a page from disk into the buffer pool
    "PAGEIOLATCH_EX",
    "PAGEIOLATCH_UP",
    "PAGELATCH_UP",  # in-memory page contention (allocation pages, e.g. tempdb)
    "PAGELATCH_EX",
    "CMEMTHREAD",  # contention on a shared memory object
    "SOS_VIRTUALMEMORY_LOW",  # a memory allocation waiting for virtual memory
    "WRITELOG",  # log flushes
    "IO_COMPLETION",  # other I/O (sort and hash spills to tempdb among them)
    "THREADPOOL",  # a task waiting for a worker thread
)

SECTION = Section(
    tag=TAG,
    sql=f"SELECT {sql_literal(TAG)} AS section, ws.wait_type, ws.waiting_tasks_count, ws.wait_time_ms,"
    " ws.signal_wait_time_ms\n"
    "FROM sys.dm_os_wait_stats AS ws\n"
    f"WHERE ws.wait_type IN ({', '.join(sql_literal(w) for w in WAIT_TYPES)});",
    requires=("sys.dm_os_wait_stats",),
)

WAIT_TYPE = Label("wait_type", "one of the twelve in the table below")
TASKS = MetricSpec(
    name="mssql_wait_tasks_total",
    type="counter",
    help="Waits of this type that started (sys.dm_os_wait_stats.waiting_tasks_count), since the instance"
    " started or the wait statistics were cleared.",
    unit="waits",
    source="`sys.dm_os_wait_stats` `waiting_tasks_count`",
    question="How often did tasks start waiting on this?",
    labels=(WAIT_TYPE,),
    columns=("waiting_tasks_count",),
)
SECONDS = MetricSpec(
    name="mssql_wait_seconds_total",
    type="counter",
    help="Time tasks spent waiting on this wait type, signal wait included (wait_time_ms / 1000), since the"
    " instance started or the wait statistics were cleared.",
    unit="seconds",
    source="`sys.dm_os_wait_stats` `wait_time_ms` / 1000 (signal wait included)",
    question="How much time went into waiting on it? `rate()` is seconds of waiting per second: on "
    "average that many tasks waiting at once.",
    labels=(WAIT_TYPE,),
    columns=("wait_time_ms",),
)
SIGNAL_SECONDS = MetricSpec(
    name="mssql_wait_signal_seconds_total",
    type="counter",
    help="Part of the wait time spent between being signalled and running again: waiting for a CPU"
    " (signal_wait_time_ms / 1000).",
    unit="seconds",
    source="`sys.dm_os_wait_stats` `signal_wait_time_ms` / 1000",
    question="How much of that was waiting for a CPU after the resource was free? High share: CPU "
    "pressure, not the resource.",
    labels=(WAIT_TYPE,),
    columns=("signal_wait_time_ms",),
)
# (column, metric, divisor): milliseconds become seconds
COLUMNS = (
    ("waiting_tasks_count", TASKS, 1.0),
    ("wait_time_ms", SECONDS, MS),
    ("signal_wait_time_ms", SIGNAL_SECONDS, MS),
)
_BY_NAME = {w.casefold(): w for w in WAIT_TYPES}


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    seen: set[str] = set()
    for row in rows_of(results, TAG):
        wait_type = _BY_NAME.get(str(row.get("wait_type") or "").strip().casefold())
        if wait_type is None or wait_type in seen:
            continue  # not one we asked for, or a repeat: never a new or a duplicate series
        seen.add(wait_type)
        for column, spec, divisor in COLUMNS:
            value = number(row.get(column), f"{column} of {wait_type}")
            if value is not None:
                out.emit(spec, value / divisor, {"wait_type": wait_type})


COLLECTOR = CollectorRecord(
    name="wait_stats",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(TASKS, SECONDS, SIGNAL_SECONDS),
)
