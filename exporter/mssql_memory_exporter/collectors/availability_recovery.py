"""Availability groups by recovery objectives: how far behind in time, how long a failover would redo, what
state each copy is in, and the primary's view of every partner replica.

The availability_groups collector exports what each replica says of itself (one view per series, so a
queue is never counted twice). This one adds:
- per database copy of this target (`is_local` 1): `synchronization_state`, `is_suspended` with
  `suspend_reason_desc`, and `is_failover_ready` (sys.dm_hadr_database_replica_cluster_states);
- per replica of this target: whether it commits synchronously (`sys.availability_replicas`
  `availability_mode`; the send-queue alert treats synchronous and asynchronous replicas differently);
- per group: `synchronization_health` from sys.dm_hadr_availability_group_states (the rollup of every
  replica, as this instance sees it);
- the primary's view of its partners (`is_local` 0 rows, exported only while this target is the group's
  primary: a secondary lists no partner): their queues, `secondary_lag_seconds`, states and the
  estimated data loss, under `mssql_ag_partner_*` names with a `replica` label. A partner that is a target
  of its own also exports its own view under the availability_groups names, so no sum over one name mixes
  the two; a partner nobody scrapes (a DR site, a distributed group's forwarder) is visible here only.

Facts (Microsoft's pages; "Monitor performance for Always On availability groups" for RPO and RTO):
- RPO: the primary database's `last_commit_time` minus the secondary copy's (the primary's row for the
  secondary), 0 when the copy `is_failover_ready`; not available when negative or NULL. Read as
  milliseconds since a fixed day (DATEDIFF_BIG), so the driver never reads a datetime and only the
  difference counts (both rows come from the same clock).
- RTO: redo_queue_size / redo_rate on the secondary (Microsoft's policy adds 60 s of failover overhead):
  worked out by the alert rules from the availability_groups series, not here.
- `secondary_lag_seconds` (SQL Server 2016 and later): seconds the secondary is behind, on the primary's
  rows for its secondaries.
- synchronization_state: 0 not synchronizing, 1 synchronizing, 2 synchronized, 3 reverting,
  4 initializing. availability_mode: 0 asynchronous commit, 1 synchronous commit, 4 configuration only.
- sys.dm_hadr_database_replica_cluster_states applies to SQL Server only: on Managed Instance its section
  answers "unavailable" and the failover-ready series are left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, ImpossibleValue
from ..metrics.declare import Label, MetricSpec
from .availability_groups import (
    DATABASE,
    DATABASE_STATES,
    DATABASES_TAG,
    GROUP,
    GROUPS_TAG,
    REPLICA,
    REPLICA_TAG,
    REPLICAS_TAG,
    is_local,
    key_of,
    names_of,
)
from .base import (
    KIB,
    CollectorRecord,
    Row,
    ScrapeContext,
    Section,
    SectionResult,
    number,
    rows_of,
)

GROUP_STATES = "sys.dm_hadr_availability_group_states"
CLUSTER_STATES = "sys.dm_hadr_database_replica_cluster_states"
GROUP_STATES_TAG = "ag_group_states"
CLUSTER_STATES_TAG = "ag_cluster_states"
REPLICAS = "sys.availability_replicas"

NO_GROUP = "on a server in no availability group"
PRIMARY_ONLY = "except on the primary of a group that has partner replicas, and where SQL Server reports NULL"
REASON = Label(
    "reason", "`suspend_reason_desc` in lower case (`suspend_from_user`, ...), `none` when not suspended"
)
SYNC_STATES = "0 not synchronizing, 1 synchronizing, 2 synchronized, 3 reverting, 4 initializing"
PARTNER_DB = (GROUP, REPLICA, DATABASE)
PARTNER_REPLICA = (GROUP, REPLICA)
SELF_DB = (GROUP, DATABASE)
PRIMARY_VIEW = "The primary's row for a partner replica (`is_local` 0), exported by the primary only. "


def _spec(
    name: str,
    help_: str,
    unit: str,
    source: str,
    labels: tuple[Label, ...],
    conditional: str,
) -> MetricSpec:
    return MetricSpec(
        name=name,
        type="gauge",
        help=help_,
        unit=unit,
        source=source,
        question=help_,
        labels=labels,
        conditional=conditional,
    )


DATABASE_SYNC_STATE = _spec(
    "mssql_ag_database_synchronization_state",
    f"Data movement state of this replica's copy of the database: {SYNC_STATES}.",
    "state",
    f"`{DATABASE_STATES}` `synchronization_state` (`is_local` 1)",
    SELF_DB,
    NO_GROUP,
)
DATABASE_SUSPENDED = _spec(
    "mssql_ag_database_suspended",
    "1 while data movement to or from this copy of the database is suspended, with the reason; else 0.",
    "0/1",
    f"`{DATABASE_STATES}` `is_suspended`, `suspend_reason_desc` (`is_local` 1)",
    (*SELF_DB, REASON),
    NO_GROUP + ", and where `is_suspended` is NULL",
)
DATABASE_FAILOVER_READY = _spec(
    "mssql_ag_database_failover_ready",
    "1 if this copy is marked synchronized in the cluster (a failover to it loses nothing), else 0.",
    "0/1",
    f"`{CLUSTER_STATES}` `is_failover_ready` of this replica's copy",
    SELF_DB,
    NO_GROUP + "; on Managed Instance (the view is SQL Server's only)",
)
REPLICA_SYNCHRONOUS = _spec(
    "mssql_ag_replica_synchronous_commit",
    "1 if this target's replica is in synchronous-commit mode, 0 if asynchronous.",
    "0/1",
    f"`{REPLICAS}` `availability_mode` 1 or 0 (a configuration-only replica, 4, is left out)",
    (GROUP, REPLICA),
    NO_GROUP + ", for a configuration-only replica, and without VIEW ANY DEFINITION",
)
GROUP_HEALTH = _spec(
    "mssql_ag_group_synchronization_health",
    "Rollup of every replica of the group as this instance sees it: 0 not healthy, 1 partially, 2 healthy.",
    "0/1/2",
    f"`{GROUP_STATES}` `synchronization_health`",
    (GROUP,),
    NO_GROUP + ", and on Azure SQL Database",
)
PARTNER_SEND_QUEUE = _spec(
    "mssql_ag_partner_database_log_send_queue_bytes",
    PRIMARY_VIEW + "Log of the primary database not yet sent to that partner's copy.",
    "bytes",
    f"`{DATABASE_STATES}` `log_send_queue_size` (KB) \u00d7 1024, `is_local` 0",
    PARTNER_DB,
    PRIMARY_ONLY,
)
PARTNER_REDO_QUEUE = _spec(
    "mssql_ag_partner_database_redo_queue_bytes",
    PRIMARY_VIEW + "Log hardened on that partner's copy and not yet redone, as the primary last heard.",
    "bytes",
    f"`{DATABASE_STATES}` `redo_queue_size` (KB) \u00d7 1024, `is_local` 0",
    PARTNER_DB,
    PRIMARY_ONLY,
)
PARTNER_REDO_RATE = _spec(
    "mssql_ag_partner_database_redo_rate_bytes_per_second",
    PRIMARY_VIEW + "The partner copy's average redo rate, as the primary last heard.",
    "bytes/s",
    f"`{DATABASE_STATES}` `redo_rate` (KB/s) \u00d7 1024, `is_local` 0",
    PARTNER_DB,
    PRIMARY_ONLY,
)
PARTNER_LAG = _spec(
    "mssql_ag_partner_database_secondary_lag_seconds",
    PRIMARY_VIEW + "Seconds that partner's copy is behind the primary during synchronization.",
    "seconds",
    f"`{DATABASE_STATES}` `secondary_lag_seconds` (SQL Server 2016 and later), `is_local` 0",
    PARTNER_DB,
    PRIMARY_ONLY,
)
PARTNER_DATA_LOSS = _spec(
    "mssql_ag_partner_database_estimated_data_loss_seconds",
    PRIMARY_VIEW + "Microsoft's RPO estimate: the primary database's last commit time minus the last one"
    " hardened on that partner's copy (0 while it is failover ready).",
    "seconds",
    f"`{DATABASE_STATES}` `last_commit_time` of the primary copy minus the partner's; `{CLUSTER_STATES}`"
    " `is_failover_ready` 1 gives 0",
    PARTNER_DB,
    PRIMARY_ONLY + " or the difference is negative (Microsoft: not available)",
)
PARTNER_SYNC_STATE = _spec(
    "mssql_ag_partner_database_synchronization_state",
    PRIMARY_VIEW + f"Data movement state of that partner's copy: {SYNC_STATES}.",
    "state",
    f"`{DATABASE_STATES}` `synchronization_state`, `is_local` 0",
    PARTNER_DB,
    PRIMARY_ONLY,
)
PARTNER_SUSPENDED = _spec(
    "mssql_ag_partner_database_suspended",
    PRIMARY_VIEW + "1 while data movement to that partner's copy is suspended, with the reason; else 0.",
    "0/1",
    f"`{DATABASE_STATES}` `is_suspended`, `suspend_reason_desc`, `is_local` 0",
    (*PARTNER_DB, REASON),
    PRIMARY_ONLY,
)
PARTNER_FAILOVER_READY = _spec(
    "mssql_ag_partner_database_failover_ready",
    PRIMARY_VIEW + "1 if that partner's copy is marked synchronized in the cluster, else 0.",
    "0/1",
    f"`{CLUSTER_STATES}` `is_failover_ready` of the partner's copy",
    PARTNER_DB,
    PRIMARY_ONLY + "; on Managed Instance",
)
PARTNER_HEALTH = _spec(
    "mssql_ag_partner_replica_synchronization_health",
    PRIMARY_VIEW + "That partner replica's health: 0 not healthy, 1 partially healthy, 2 healthy.",
    "0/1/2",
    "`sys.dm_hadr_availability_replica_states` `synchronization_health`, `is_local` 0",
    PARTNER_REPLICA,
    PRIMARY_ONLY,
)
PARTNER_CONNECTED = _spec(
    "mssql_ag_partner_replica_connected",
    PRIMARY_VIEW + "1 if that partner replica is connected to the primary, else 0.",
    "0/1",
    "`sys.dm_hadr_availability_replica_states` `connected_state`, `is_local` 0",
    PARTNER_REPLICA,
    PRIMARY_ONLY,
)
PARTNER_SYNCHRONOUS = _spec(
    "mssql_ag_partner_replica_synchronous_commit",
    PRIMARY_VIEW + "1 if that partner replica commits synchronously, 0 if asynchronously.",
    "0/1",
    f"`{REPLICAS}` `availability_mode` of the partner",
    PARTNER_REPLICA,
    PRIMARY_ONLY + ", for a configuration-only replica",
)


def _section(tag: str, columns: str, source: str) -> Section:
    return Section(
        tag=tag,
        sql=f"SELECT N'{tag}' AS section, {columns}\nFROM {source};",
        requires=(source.split(" AS ")[0],),
        may_be_empty=True,  # no group on this server: no rows, a true answer
        optional=True,  # Azure SQL Database (both), Managed Instance (cluster states): not there
    )


SECTIONS = (
    _section(
        GROUP_STATES_TAG,
        "CAST(gs.group_id AS nvarchar(36)) AS group_id, gs.synchronization_health",
        f"{GROUP_STATES} AS gs",
    ),
    _section(
        CLUSTER_STATES_TAG,
        "CAST(cs.replica_id AS nvarchar(36)) AS replica_id,"
        " CAST(cs.group_database_id AS nvarchar(36)) AS group_database_id, cs.is_failover_ready",
        f"{CLUSTER_STATES} AS cs",
    ),
)


def _flag(value: object, what: str) -> float | None:
    got = number(value, what)
    if got is not None and got not in (0.0, 1.0):
        raise ImpossibleValue(f"{what} is {value!r}: a bit is 0 or 1")
    return got


def _suspended(row: Row) -> tuple[float, str] | None:
    flag = _flag(row.get("is_suspended"), "is_suspended")
    if flag is None:
        return None
    reason = str(row.get("suspend_reason_desc") or "").strip().lower() if flag else ""
    return flag, reason or ("unknown" if flag else "none")


def _mode(value: object) -> float | None:
    mode = number(value, "availability_mode")
    return {0.0: 0.0, 1.0: 1.0}.get(mode) if mode is not None else None


def _nonnegative(value: object, what: str) -> float | None:
    got = number(value, what)
    if got is not None and got < 0:
        raise ImpossibleValue(f"{what} is {value!r}: never negative")
    return got


class _Names:
    def __init__(self, results: Mapping[str, SectionResult]) -> None:
        self.groups = names_of(results, GROUPS_TAG, "group_id", "name")
        self.replicas = names_of(results, REPLICAS_TAG, "replica_id", "replica_server_name")

    def group(self, row: Row) -> str:
        group_id = key_of(row.get("group_id"))
        return self.groups.get(group_id) or group_id

    def replica(self, row: Row) -> str:
        replica_id = key_of(row.get("replica_id"))
        return self.replicas.get(replica_id) or replica_id


def _database(row: Row) -> str:
    name = str(row.get("database_name") or "").strip()
    database_id = number(row.get("database_id"), "database_id")
    return name or (str(int(database_id)) if database_id is not None else "")


def _copy_states(
    out: FamilyBuilder, row: Row, labels: dict[str, str], specs: tuple[MetricSpec, ...], ready: float | None
) -> None:
    state_spec, suspended_spec, ready_spec = specs
    state = number(row.get("synchronization_state"), "synchronization_state")
    if state is not None:
        out.emit(state_spec, state, labels)
    suspended = _suspended(row)
    if suspended is not None:
        out.emit(suspended_spec, suspended[0], {**labels, "reason": suspended[1]})
    if ready is not None:
        out.emit(ready_spec, ready, labels)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    names = _Names(results)
    replicas = rows_of(results, REPLICAS_TAG)
    modes = {key_of(r.get("replica_id")): _mode(r.get("availability_mode")) for r in replicas}
    ready = {
        (key_of(r.get("replica_id")), key_of(r.get("group_database_id"))): _flag(
            r.get("is_failover_ready"), "is_failover_ready"
        )
        for r in rows_of(results, CLUSTER_STATES_TAG)
    }
    primary_of: set[str] = set()  # group ids this target is the primary of
    for row in rows_of(results, REPLICA_TAG):
        labels = {"availability_group": names.group(row), "replica": names.replica(row)}
        if is_local(row):
            if number(row.get("role"), "role") == 1:
                primary_of.add(key_of(row.get("group_id")))
            mode = modes.get(key_of(row.get("replica_id")))
            if mode is not None:
                out.emit(REPLICA_SYNCHRONOUS, mode, labels)
    for row in rows_of(results, REPLICA_TAG):
        if is_local(row) or key_of(row.get("group_id")) not in primary_of:
            continue
        labels = {"availability_group": names.group(row), "replica": names.replica(row)}
        for column, spec in (
            ("synchronization_health", PARTNER_HEALTH),
            ("connected_state", PARTNER_CONNECTED),
        ):
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value, labels)
        mode = modes.get(key_of(row.get("replica_id")))
        if mode is not None:
            out.emit(PARTNER_SYNCHRONOUS, mode, labels)
    for row in rows_of(results, GROUP_STATES_TAG):
        health = number(row.get("synchronization_health"), "synchronization_health")
        if health is not None:
            out.emit(GROUP_HEALTH, health, {"availability_group": names.group(row)})
    databases = list(rows_of(results, DATABASES_TAG))
    # The primary copy's last commit, per group database: what each partner's is measured against.
    primary_commit = {
        key_of(r.get("group_database_id")): number(r.get("last_commit_ms"), "last_commit_ms")
        for r in databases
        if is_local(r) and number(r.get("is_primary_replica"), "is_primary_replica") == 1
    }
    for row in databases:
        copy = (key_of(row.get("replica_id")), key_of(row.get("group_database_id")))
        if is_local(row):
            labels = {"availability_group": names.group(row), "database": _database(row)}
            specs = (DATABASE_SYNC_STATE, DATABASE_SUSPENDED, DATABASE_FAILOVER_READY)
            _copy_states(out, row, labels, specs, ready.get(copy))
            continue
        if key_of(row.get("group_id")) not in primary_of:
            continue  # the view of a primary only; a secondary has no partner rows to speak of
        labels = {
            "availability_group": names.group(row),
            "replica": names.replica(row),
            "database": _database(row),
        }
        _copy_states(
            out, row, labels, (PARTNER_SYNC_STATE, PARTNER_SUSPENDED, PARTNER_FAILOVER_READY), ready.get(copy)
        )
        for column, spec in (
            ("log_send_queue_size", PARTNER_SEND_QUEUE),
            ("redo_queue_size", PARTNER_REDO_QUEUE),
            ("redo_rate", PARTNER_REDO_RATE),
        ):
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value * KIB, labels)
        lag = _nonnegative(row.get("secondary_lag_seconds"), "secondary_lag_seconds")
        if lag is not None:
            out.emit(PARTNER_LAG, lag, labels)
        loss = _data_loss(primary_commit.get(copy[1]), row, ready.get(copy))
        if loss is not None:
            out.emit(PARTNER_DATA_LOSS, loss, labels)


def _data_loss(primary_ms: float | None, row: Row, ready: float | None) -> float | None:
    """Microsoft's estimate: 0 for a failover-ready copy, else the commit-time gap; None where the page
    says "not available" (a NULL time, or a partner ahead of the primary)."""
    if ready == 1:
        return 0.0
    partner_ms = number(row.get("last_commit_ms"), "last_commit_ms")
    if primary_ms is None or partner_ms is None or partner_ms > primary_ms:
        return None
    return (primary_ms - partner_ms) / 1000.0


COLLECTOR = CollectorRecord(
    name="availability_recovery",
    sections=(REPLICA_TAG, DATABASES_TAG, GROUPS_TAG, REPLICAS_TAG, GROUP_STATES_TAG, CLUSTER_STATES_TAG),
    collect=collect,
    defines=SECTIONS,
    needs=("availability_groups",),
    summary="Availability groups by recovery objectives: data movement states, failover readiness, the"
    " group's health, and the primary's view of every partner replica (estimated data loss, lag, queues).",
    metrics=(
        DATABASE_SYNC_STATE,
        DATABASE_SUSPENDED,
        DATABASE_FAILOVER_READY,
        REPLICA_SYNCHRONOUS,
        GROUP_HEALTH,
        PARTNER_SEND_QUEUE,
        PARTNER_REDO_QUEUE,
        PARTNER_REDO_RATE,
        PARTNER_LAG,
        PARTNER_DATA_LOSS,
        PARTNER_SYNC_STATE,
        PARTNER_SUSPENDED,
        PARTNER_FAILOVER_READY,
        PARTNER_HEALTH,
        PARTNER_CONNECTED,
        PARTNER_SYNCHRONOUS,
    ),
)
