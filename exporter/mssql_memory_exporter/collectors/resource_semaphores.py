"""sys.dm_exec_query_resource_semaphores: workspace memory for query grants (sorts, hashes), per resource
pool and semaphore. Are queries starved of workspace memory, waiting for it or timing out?

Each resource pool has two semaphores: resource_semaphore_id 0 (the regular one) and 1 (small queries,
whose timeout_error_count and forced_grant_count are NULL). The id repeats per pool, so both are labels.
A NULL column is left out rather than exported as 0. Series are bounded by the pools SQL Server allows
(64 user pools plus internal and default), two semaphores each.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

TAG = "resource_semaphores"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'resource_semaphores' AS section, rs.pool_id, rs.resource_semaphore_id,"
    " rs.target_memory_kb, rs.available_memory_kb, rs.granted_memory_kb, rs.used_memory_kb,"
    " rs.grantee_count, rs.waiter_count, rs.timeout_error_count, rs.forced_grant_count\n"
    "FROM sys.dm_exec_query_resource_semaphores AS rs;",
    requires=("sys.dm_exec_query_resource_semaphores",),
)

SEMAPHORE = (
    Label("pool_id", "the resource pool (`1` internal, `2` default, then user pools)"),
    Label("resource_semaphore_id", "`0` the regular semaphore, `1` the small-query one"),
)
TARGET_BYTES = MetricSpec(
    name="mssql_resource_semaphore_target_bytes",
    type="gauge",
    help="Workspace memory this semaphore aims to hand out (its grant limit now).",
    unit="bytes",
    source="`sys.dm_exec_query_resource_semaphores` `target_memory_kb` \u00d7 1024",
    question="How much workspace memory may this semaphore grant now?",
    labels=SEMAPHORE,
)
AVAILABLE_BYTES = MetricSpec(
    name="mssql_resource_semaphore_available_bytes",
    type="gauge",
    help="Workspace memory this semaphore can still grant.",
    unit="bytes",
    source="`sys.dm_exec_query_resource_semaphores` `available_memory_kb` \u00d7 1024",
    question="How much can it still grant? Near 0 with waiters: starved.",
    labels=SEMAPHORE,
)
GRANTED_BYTES = MetricSpec(
    name="mssql_resource_semaphore_granted_bytes",
    type="gauge",
    help="Workspace memory granted to running queries.",
    unit="bytes",
    source="`sys.dm_exec_query_resource_semaphores` `granted_memory_kb` \u00d7 1024",
    question="How much is granted to running queries?",
    labels=SEMAPHORE,
)
USED_BYTES = MetricSpec(
    name="mssql_resource_semaphore_used_bytes",
    type="gauge",
    help="Granted workspace memory the queries actually use.",
    unit="bytes",
    source="`sys.dm_exec_query_resource_semaphores` `used_memory_kb` \u00d7 1024",
    question="How much of the grants is used? (granted far above used: over-estimated grants)",
    labels=SEMAPHORE,
)
GRANTEES = MetricSpec(
    name="mssql_resource_semaphore_grantees",
    type="gauge",
    help="Queries holding a grant.",
    unit="queries",
    source="`sys.dm_exec_query_resource_semaphores` `grantee_count`",
    question="How many queries hold a grant?",
    labels=SEMAPHORE,
)
WAITERS = MetricSpec(
    name="mssql_resource_semaphore_waiters",
    type="gauge",
    help="Queries waiting for a grant.",
    unit="queries",
    source="`sys.dm_exec_query_resource_semaphores` `waiter_count`",
    question="How many wait for one (RESOURCE_SEMAPHORE waits)?",
    labels=SEMAPHORE,
)
TIMEOUT_ERRORS = MetricSpec(
    name="mssql_resource_semaphore_timeout_errors_total",
    type="counter",
    help="Queries that gave up waiting for a grant (error 8645), since the instance started. Absent for "
    "the small-query semaphore.",
    unit="queries",
    source="`sys.dm_exec_query_resource_semaphores` `timeout_error_count` (since start; NULL for semaphore "
    "1)",
    question="Did queries fail waiting for memory (error 8645)? Any increase is bad.",
    labels=SEMAPHORE,
)
FORCED_GRANTS = MetricSpec(
    name="mssql_resource_semaphore_forced_grants_total",
    type="counter",
    help="Grants given less memory than asked for (the query may spill to tempdb), since the instance "
    "started. Absent for the small-query semaphore.",
    unit="grants",
    source="`sys.dm_exec_query_resource_semaphores` `forced_grant_count` (since start; NULL for semaphore 1)",
    question="Were queries given less than they asked for (and may spill to tempdb)?",
    labels=SEMAPHORE,
)
# (column, metric, scale)
COLUMNS = (
    ("target_memory_kb", TARGET_BYTES, KIB),
    ("available_memory_kb", AVAILABLE_BYTES, KIB),
    ("granted_memory_kb", GRANTED_BYTES, KIB),
    ("used_memory_kb", USED_BYTES, KIB),
    ("grantee_count", GRANTEES, 1.0),
    ("waiter_count", WAITERS, 1.0),
    ("timeout_error_count", TIMEOUT_ERRORS, 1.0),
    ("forced_grant_count", FORCED_GRANTS, 1.0),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    for row in rows_of(results, TAG):
        labels = {
            "pool_id": str(row.get("pool_id")),
            "resource_semaphore_id": str(row.get("resource_semaphore_id")),
        }
        for column, spec, scale in COLUMNS:
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value * scale, labels)


COLLECTOR = CollectorRecord(
    name="resource_semaphores",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=tuple(spec for _, spec, _ in COLUMNS),
)
