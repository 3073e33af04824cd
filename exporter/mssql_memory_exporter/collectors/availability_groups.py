"""Always On availability groups: this replica's role and health, and its databases' queues.

Which rows: only the local ones (`is_local = 1`). A primary also returns a row for every secondary replica
and secondary database it knows of; when both replicas are targets (as they should be, so the alerts can
follow the primary), exporting those rows under these names too would count each secondary twice, once
from itself and once from the primary, with two different views of the same queue. Each target therefore
speaks for itself here: a secondary reports its own send and redo queues, and a secondary that cannot be
scraped shows as `mssql_up 0` on its own target rather than as a stale copy on the primary's. The
primary's view of its partners (is_local 0: a DR replica nobody scrapes, the estimated data loss only the
primary can work out) is exported by the availability_recovery collector under series of its own
(`mssql_ag_partner_*`), so no sum over one metric name mixes the two views. The sections read every row
(that collector shares them) and this one keeps the local rows.

Facts (Microsoft's pages for sys.dm_hadr_availability_replica_states and
sys.dm_hadr_database_replica_states, both SQL Server 2012 and later):
- role: 0 resolving, 1 primary, 2 secondary; synchronization_health: 0 not healthy, 1 partially healthy,
  2 healthy; connected_state: 0 disconnected, 1 connected.
- log_send_queue_size and redo_queue_size are KB; log_send_rate and redo_rate are KB per second, an
  average SQL Server works out itself (a gauge, not a counter to rate()). NULL (e.g. on a primary's own
  database row) leaves the series out.
- role is defined for a local or a connected replica; a partner that has left shows NULL there (only in
  the primary's is_local 0 rows, which are not read). A NULL or undocumented role is exported as
  `unknown` and gives no is_primary series: the alert rules treat such a target as no secondary.
- The catalog views answer a login without VIEW ANY DEFINITION with no rows, not an error (metadata
  visibility): the state rows then have ids and no names, which is logged once per target.

The GUIDs are cast to text so every driver reads them the same way; the names come from the catalog
views sys.availability_groups and sys.availability_replicas in sections of their own (a few rows each).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

REPLICA_STATES = "sys.dm_hadr_availability_replica_states"
DATABASE_STATES = "sys.dm_hadr_database_replica_states"
GROUPS = "sys.availability_groups"
REPLICAS = "sys.availability_replicas"

log = logging.getLogger(__name__)

REPLICA_TAG = "ag_replica"
DATABASES_TAG = "ag_databases"
GROUPS_TAG = "ag_groups"
REPLICAS_TAG = "ag_replica_names"

ROLES = {0: "resolving", 1: "primary", 2: "secondary"}
UNKNOWN_ROLE = "unknown"  # role NULL: the page gives a role only to a local or a connected replica
# ctx.memo key (per target, kept between scrapes): the ids last logged as having no catalog name.
UNNAMED_LOGGED_KEY = "ag_unnamed_logged"

NO_GROUP = "on a server in no availability group"
NULL_TOO = NO_GROUP + ", and where SQL Server reports NULL"
GROUP = Label("availability_group", "`sys.availability_groups.name` (the group id if the name is gone)")
REPLICA = Label("replica", "`sys.availability_replicas.replica_server_name` (the replica id if gone)")
DATABASE = Label("database", "`DB_NAME(database_id)` (the database id if the database is gone)")
REPLICA_INFO = MetricSpec(
    name="mssql_ag_replica_info",
    type="gauge",
    help="This target's replica of an availability group and its current role; always 1. Join other"
    " series on it (by instance) to tell the primary from a secondary.",
    unit="1",
    source=f"`{REPLICA_STATES}` `role` 1, 2, 0 as `primary`, `secondary`, `resolving`",
    question="Which availability groups is this target a replica of, and in which role? One per group; its "
    "`role` label changes at a failover.",
    labels=(
        GROUP,
        REPLICA,
        Label("role", "`primary`, `secondary`, `resolving`, or `unknown` where `role` is NULL"),
    ),
    conditional=NO_GROUP,
)
REPLICA_IS_PRIMARY = MetricSpec(
    name="mssql_ag_replica_is_primary",
    type="gauge",
    help="1 while this replica is the primary of its availability group, else 0; changes mark failovers.",
    unit="0/1",
    source=f"`{REPLICA_STATES}` `role` = 1 (left out where `role` is NULL)",
    question="Is this replica the primary? The series the alert rules join on "
    "(alerts/availability_groups.py) and the dashboards mark failovers with: it keeps one series through "
    "a failover.",
    labels=(GROUP, REPLICA),
    conditional=NO_GROUP,
)
REPLICA_HEALTH = MetricSpec(
    name="mssql_ag_replica_synchronization_health",
    type="gauge",
    help="Rollup of this replica's databases: 0 not healthy, 1 partially healthy, 2 healthy.",
    unit="0/1/2",
    source=f"`{REPLICA_STATES}` `synchronization_health`",
    question="Are this replica's databases synchronizing? 0 not healthy, 1 partially healthy, 2 healthy "
    "(the rollup of this replica's databases).",
    labels=(GROUP, REPLICA),
    conditional=NO_GROUP,
)
REPLICA_CONNECTED = MetricSpec(
    name="mssql_ag_replica_connected",
    type="gauge",
    help="1 if this replica is connected to its partner(s) in the availability group, else 0.",
    unit="0/1",
    source=f"`{REPLICA_STATES}` `connected_state`",
    question="Is this replica connected to its partner(s)?",
    labels=(GROUP, REPLICA),
    conditional=NO_GROUP,
)
DATABASE_HEALTH = MetricSpec(
    name="mssql_ag_database_synchronization_health",
    type="gauge",
    help="This replica's copy of the database: 0 not healthy, 1 partially healthy, 2 healthy.",
    unit="0/1/2",
    source=f"`{DATABASE_STATES}` `synchronization_health` of this replica's copy",
    question="Is this copy of the database synchronizing? 0 not healthy, 1 partially healthy, 2 healthy.",
    labels=(GROUP, DATABASE),
    conditional=NULL_TOO,
)
LOG_SEND_QUEUE_BYTES = MetricSpec(
    name="mssql_ag_database_log_send_queue_bytes",
    type="gauge",
    help="Log of the primary database not yet sent to this secondary copy.",
    unit="bytes",
    source=f"`{DATABASE_STATES}` `log_send_queue_size` (KB) \u00d7 1024",
    question="How much of the primary database's log has this copy not received?",
    labels=(GROUP, DATABASE),
    conditional=NULL_TOO,
)
LOG_SEND_RATE = MetricSpec(
    name="mssql_ag_database_log_send_rate_bytes_per_second",
    type="gauge",
    help="Average rate the primary sent log at in its last active period (SQL Server's own average).",
    unit="bytes/s",
    source=f"`{DATABASE_STATES}` `log_send_rate` (KB/s) \u00d7 1024",
    question="How fast is log sent to this copy? SQL Server's own average over its last active period, not "
    "a counter.",
    labels=(GROUP, DATABASE),
    conditional=NULL_TOO,
)
REDO_QUEUE_BYTES = MetricSpec(
    name="mssql_ag_database_redo_queue_bytes",
    type="gauge",
    help="Log hardened on this secondary copy but not yet redone.",
    unit="bytes",
    source=f"`{DATABASE_STATES}` `redo_queue_size` (KB) \u00d7 1024",
    question="How much log hardened on this copy is not yet redone?",
    labels=(GROUP, DATABASE),
    conditional=NULL_TOO,
)
REDO_RATE = MetricSpec(
    name="mssql_ag_database_redo_rate_bytes_per_second",
    type="gauge",
    help="Average rate log is being redone at on this secondary copy (SQL Server's own average).",
    unit="bytes/s",
    source=f"`{DATABASE_STATES}` `redo_rate` (KB/s) \u00d7 1024",
    question="How fast is log redone on this copy? SQL Server's own average redo rate.",
    labels=(GROUP, DATABASE),
    conditional=NULL_TOO,
)


def _section(tag: str, columns: str, source: str, requires: str, where: str = "") -> Section:
    return Section(
        tag=tag,
        sql=f"SELECT N'{tag}' AS section, {columns}\nFROM {source}{where};",
        requires=(requires,),
        # A server in no availability group has no rows: a true answer, not a failure. A platform without
        # the views (Azure SQL Database) answers "unavailable", which is no failure either.
        may_be_empty=True,
        optional=True,
    )


SECTIONS = (
    _section(
        REPLICA_TAG,
        "CAST(rs.group_id AS nvarchar(36)) AS group_id, CAST(rs.replica_id AS nvarchar(36)) AS replica_id,"
        " rs.is_local, rs.role, rs.synchronization_health, rs.connected_state",
        f"{REPLICA_STATES} AS rs",
        REPLICA_STATES,
    ),
    _section(
        DATABASES_TAG,
        "CAST(drs.group_id AS nvarchar(36)) AS group_id, CAST(drs.replica_id AS nvarchar(36)) AS replica_id,"
        " CAST(drs.group_database_id AS nvarchar(36)) AS group_database_id, drs.is_local,"
        " drs.is_primary_replica, drs.database_id,"
        " DB_NAME(drs.database_id) AS database_name, drs.synchronization_health, drs.log_send_queue_size,"
        " drs.log_send_rate, drs.redo_queue_size, drs.redo_rate, drs.synchronization_state,"
        " drs.is_suspended, drs.suspend_reason_desc, drs.secondary_lag_seconds,"
        # The driver never reads the datetime itself (FreeTDS and Driver 18 differ on it), and only the
        # difference between two rows' commit times is used: milliseconds since a fixed day.
        " DATEDIFF_BIG(millisecond, '20000101', drs.last_commit_time) AS last_commit_ms",
        f"{DATABASE_STATES} AS drs",
        DATABASE_STATES,
    ),
    _section(GROUPS_TAG, "CAST(ag.group_id AS nvarchar(36)) AS group_id, ag.name", f"{GROUPS} AS ag", GROUPS),
    _section(
        REPLICAS_TAG,
        "CAST(ar.replica_id AS nvarchar(36)) AS replica_id, ar.replica_server_name, ar.availability_mode",
        f"{REPLICAS} AS ar",
        REPLICAS,
    ),
)


def key_of(value: object) -> str:
    return str(value or "").strip().lower()


def is_local(row: Mapping[str, object]) -> bool:
    """`is_local` is a bit: the driver gives True/1 for this instance's own replica or database copy."""
    return row.get("is_local") in (1, True)


def names_of(results: Mapping[str, SectionResult], tag: str, key: str, name: str) -> dict[str, str]:
    return {key_of(r.get(key)): str(r.get(name) or "").strip() for r in rows_of(results, tag)}


def _say_once_what_has_no_name(ctx: ScrapeContext, unnamed: list[str]) -> None:
    """One line per target while the same ids have no name, again only when the set changes (a group that
    finished leaving, a grant of VIEW ANY DEFINITION): never once per scrape."""
    said = ctx.memo.get(UNNAMED_LOGGED_KEY, ())
    ctx.memo[UNNAMED_LOGGED_KEY] = tuple(unnamed)
    if not unnamed or tuple(unnamed) == said:
        return
    log.warning(
        "target %s: availability group/replica %s has a state row but no row in %s or %s, so its series"
        " carry the id instead of the name: the login lacks VIEW ANY DEFINITION (SQL Server then leaves"
        " the catalog rows out without an error), or the group is being removed",
        ctx.target.name,
        ", ".join(unnamed),
        GROUPS,
        REPLICAS,
    )


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    groups = names_of(results, GROUPS_TAG, "group_id", "name")
    replicas = names_of(results, REPLICAS_TAG, "replica_id", "replica_server_name")
    unnamed: dict[str, None] = {}
    for row in filter(is_local, rows_of(results, REPLICA_TAG)):
        group_id, replica_id = key_of(row.get("group_id")), key_of(row.get("replica_id"))
        # A group or replica that is being removed may lose its name before its state row, and a login
        # without VIEW ANY DEFINITION sees no catalog row at all: fall back to the id, and say so once.
        unnamed.update(
            {i: None for i, names in ((group_id, groups), (replica_id, replicas)) if i not in names}
        )
        labels = {
            "availability_group": groups.get(group_id) or group_id,
            "replica": replicas.get(replica_id) or replica_id,
        }
        role = number(row.get("role"), "role")
        role_name = ROLES.get(int(role), UNKNOWN_ROLE) if role is not None else UNKNOWN_ROLE
        out.emit(REPLICA_INFO, 1.0, {**labels, "role": role_name})
        # Not knowing the role is not knowing it is not the primary: no 0 made up for the alert join.
        if role_name != UNKNOWN_ROLE:
            out.emit(REPLICA_IS_PRIMARY, 1.0 if role_name == "primary" else 0.0, labels)
        for column, spec in (
            ("synchronization_health", REPLICA_HEALTH),
            ("connected_state", REPLICA_CONNECTED),
        ):
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value, labels)
    _say_once_what_has_no_name(ctx, list(unnamed))
    for row in filter(is_local, rows_of(results, DATABASES_TAG)):
        group_id = key_of(row.get("group_id"))
        # DB_NAME is NULL for a database already dropped while its replica row lingers; two of them would
        # give two series with one label set (database=""), and Prometheus drops all but the first.
        name = str(row.get("database_name") or "").strip()
        database_id = number(row.get("database_id"), "database_id")
        labels = {
            "availability_group": groups.get(group_id) or group_id,
            "database": name or (str(int(database_id)) if database_id is not None else ""),
        }
        health = number(row.get("synchronization_health"), "synchronization_health")
        if health is not None:
            out.emit(DATABASE_HEALTH, health, labels)
        for column, spec in (
            ("log_send_queue_size", LOG_SEND_QUEUE_BYTES),
            ("log_send_rate", LOG_SEND_RATE),
            ("redo_queue_size", REDO_QUEUE_BYTES),
            ("redo_rate", REDO_RATE),
        ):
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value * KIB, labels)


COLLECTOR = CollectorRecord(
    name="availability_groups",
    sections=(REPLICA_TAG, DATABASES_TAG, GROUPS_TAG, REPLICAS_TAG),
    collect=collect,
    defines=SECTIONS,
    metrics=(
        REPLICA_INFO,
        REPLICA_IS_PRIMARY,
        REPLICA_HEALTH,
        REPLICA_CONNECTED,
        DATABASE_HEALTH,
        LOG_SEND_QUEUE_BYTES,
        LOG_SEND_RATE,
        REDO_QUEUE_BYTES,
        REDO_RATE,
    ),
)
