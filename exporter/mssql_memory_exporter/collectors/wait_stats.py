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

from .base import (
    CollectorRecord,
    FamilyBuilder,
    ScrapeContext,
    Section,
    SectionResult,
    number,
    rows_of,
    sql_literal,
)

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

# (column, metric, help, divisor): milliseconds become seconds
COLUMNS = (
    (
        "waiting_tasks_count",
        "mssql_wait_tasks_total",
        "Waits of this type that started (sys.dm_os_wait_stats.waiting_tasks_count), since the instance"
        " started or the wait statistics were cleared.",
        1.0,
    ),
    (
        "wait_time_ms",
        "mssql_wait_seconds_total",
        "Time tasks spent waiting on this wait type, signal wait included (wait_time_ms / 1000), since the"
        " instance started or the wait statistics were cleared.",
        MS,
    ),
    (
        "signal_wait_time_ms",
        "mssql_wait_signal_seconds_total",
        "Part of the wait time spent between being signalled and running again: waiting for a CPU"
        " (signal_wait_time_ms / 1000).",
        MS,
    ),
)
_BY_NAME = {w.casefold(): w for w in WAIT_TYPES}


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    seen: set[str] = set()
    for row in rows_of(results, TAG):
        wait_type = _BY_NAME.get(str(row.get("wait_type") or "").strip().casefold())
        if wait_type is None or wait_type in seen:
            continue  # not one we asked for, or a repeat: never a new or a duplicate series
        seen.add(wait_type)
        for column, metric, doc, divisor in COLUMNS:
            value = number(row.get(column), f"{column} of {wait_type}")
            if value is not None:
                out.counter(metric, doc, value / divisor, {"wait_type": wait_type})


COLLECTOR = CollectorRecord(
    name="wait_stats",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
)
