"""sys.dm_exec_query_resource_semaphores: workspace memory for query grants (sorts, hashes), per resource
pool and semaphore. Are queries starved of workspace memory, waiting for it or timing out?

Each resource pool has two semaphores: resource_semaphore_id 0 (the regular one) and 1 (small queries,
whose timeout_error_count and forced_grant_count are NULL). The id repeats per pool, so both are labels.
A NULL column is left out rather than exported as 0. Series are bounded by the pools SQL Server allows
(64 user pools plus internal and default), two semaphores each.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import KIB, CollectorRecord, FamilyBuilder, ScrapeContext, Section, SectionResult, number, rows_of

TAG = "resource_semaphores"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'resource_semaphores' AS section, rs.pool_id, rs.resource_semaphore_id,"
    " rs.target_memory_kb, rs.available_memory_kb, rs.granted_memory_kb, rs.used_memory_kb,"
    " rs.grantee_count, rs.waiter_count, rs.timeout_error_count, rs.forced_grant_count\n"
    "FROM sys.dm_exec_query_resource_semaphores AS rs;",
    requires=("sys.dm_exec_query_resource_semaphores",),
)

# (column, metric, help, scale, is_counter)
COLUMNS = (
    (
        "target_memory_kb",
        "mssql_resource_semaphore_target_bytes",
        "Workspace memory this semaphore aims to hand out (its grant limit now).",
        KIB,
        False,
    ),
    (
        "available_memory_kb",
        "mssql_resource_semaphore_available_bytes",
        "Workspace memory this semaphore can still grant.",
        KIB,
        False,
    ),
    (
        "granted_memory_kb",
        "mssql_resource_semaphore_granted_bytes",
        "Workspace memory granted to running queries.",
        KIB,
        False,
    ),
    (
        "used_memory_kb",
        "mssql_resource_semaphore_used_bytes",
        "Granted workspace memory the queries actually use.",
        KIB,
        False,
    ),
    ("grantee_count", "mssql_resource_semaphore_grantees", "Queries holding a grant.", 1.0, False),
    ("waiter_count", "mssql_resource_semaphore_waiters", "Queries waiting for a grant.", 1.0, False),
    (
        "timeout_error_count",
        "mssql_resource_semaphore_timeout_errors_total",
        "Queries that gave up waiting for a grant (error 8645), since the instance started. Absent for"
        " the small-query semaphore.",
        1.0,
        True,
    ),
    (
        "forced_grant_count",
        "mssql_resource_semaphore_forced_grants_total",
        "Grants given less memory than asked for (the query may spill to tempdb), since the instance"
        " started. Absent for the small-query semaphore.",
        1.0,
        True,
    ),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    for row in rows_of(results, TAG):
        labels = {
            "pool_id": str(row.get("pool_id")),
            "resource_semaphore_id": str(row.get("resource_semaphore_id")),
        }
        for column, metric, doc, scale, is_counter in COLUMNS:
            value = number(row.get(column), column)
            if value is None:
                continue
            if is_counter:
                out.counter(metric, doc, value * scale, labels)
            else:
                out.gauge(metric, doc, value * scale, labels)


COLLECTOR = CollectorRecord(
    name="resource_semaphores",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
)
