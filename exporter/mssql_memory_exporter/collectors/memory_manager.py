"""SQL Server:Memory Manager — grants, the memory targets and who holds the memory (workspace, locks,
caches, connections), in bytes (the counters are in KB). Every one of them exists since SQL Server 2012,
so all are required.

Free Memory (KB) replaces Buffer Manager "Free pages", which left in SQL Server 2012; Dell's floor of
640 free pages is 640 x 8 KiB = 5 MiB.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from . import perf
from .base import KIB, CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind, PerfIndex

G = CounterKind.GAUGE
METRICS = (
    perf.PerfMetric(
        "Memory Grants Pending",
        "mssql_memory_grants_pending",
        "Queries waiting for a workspace memory grant.",
        G,
        unit="queries",
        question="Not in Table 4; see below.",
    ),
    perf.PerfMetric(
        "Memory Grants Outstanding",
        "mssql_memory_grants_outstanding",
        "Queries holding a workspace memory grant.",
        G,
        unit="queries",
    ),
    perf.PerfMetric(
        "Target Server Memory (KB)",
        "mssql_memory_target_bytes",
        "Memory SQL Server is willing to use.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Total Server Memory (KB)",
        "mssql_memory_total_bytes",
        "Memory the memory manager has committed.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Free Memory (KB)", "mssql_memory_free_bytes", "Committed memory not in use by SQL Server.", G, KIB,
        question="Dell row: Free pages > 640 (= 5 MiB).",
    ),
    perf.PerfMetric(
        "Stolen Server Memory (KB)",
        "mssql_memory_stolen_bytes",
        "Memory used for purposes other than database pages (plans, grants, locks).",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Database Cache Memory (KB)",
        "mssql_memory_database_cache_bytes",
        "Memory used for the database page cache.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Granted Workspace Memory (KB)",
        "mssql_memory_workspace_granted_bytes",
        "Workspace memory (sorts, hashes) granted to running queries.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Maximum Workspace Memory (KB)",
        "mssql_memory_workspace_maximum_bytes",
        "The most workspace memory SQL Server would grant to all queries together.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Reserved Server Memory (KB)",
        "mssql_memory_reserved_bytes",
        "Memory reserved for grants not yet used by their queries.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "SQL Cache Memory (KB)",
        "mssql_memory_sql_cache_bytes",
        "Memory used by the dynamic SQL cache.",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Lock Memory (KB)", "mssql_memory_lock_bytes", "Memory used by locks.", G, KIB,
    ),
    perf.PerfMetric(
        "Log Pool Memory (KB)",
        "mssql_memory_log_pool_bytes",
        "Memory used by the log pool (log cache).",
        G,
        KIB,
    ),
    perf.PerfMetric(
        "Optimizer Memory (KB)", "mssql_memory_optimizer_bytes", "Memory used by query optimization.", G, KIB,
    ),
    perf.PerfMetric(
        "Connection Memory (KB)",
        "mssql_memory_connection_bytes",
        "Memory used to maintain connections.",
        G,
        KIB,
    ),
)
# By name, for the rule and dashboard generators (the order of METRICS).
(
    GRANTS_PENDING,
    GRANTS_OUTSTANDING,
    TARGET,
    TOTAL,
    FREE,
    STOLEN,
    DATABASE_CACHE,
    WORKSPACE_GRANTED,
    WORKSPACE_MAXIMUM,
    RESERVED,
    SQL_CACHE,
    LOCK,
    LOG_POOL,
    OPTIMIZER,
    CONNECTION,
) = METRICS
OBJECT = perf.perf_object("Memory Manager", tuple(m.counter for m in METRICS))


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    perf.export(out, ctx, PerfIndex(perf.perf_rows(results, OBJECT.name)), METRICS)


COLLECTOR = CollectorRecord(
    name="memory_manager",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    metrics=perf.declare(OBJECT.name, METRICS),
)
