"""The public names of the bundle's alerts and recording rules, written once.

alerts/generate.py records and fires under these names; dashboards/generate.py and the docs read them.
Recording-rule names carry the spec's windows as the spec writes them (`rate5m`, `rate1d`, `rate7d`),
also when a test overrides the windows themselves: a name is a public interface, not a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import group_names
from .spec import Spec

# Alerts (each has docs/runbooks/<name>.md).
TARGET_DOWN = "MSSQLTargetDown"
COLLECTOR_FAILING = "MSSQLCollectorFailing"
MEMORY_PRESSURE = "MSSQLMemoryPressure"
PLE_LOW = "MSSQLPageLifeExpectancyLow"
FREE_LIST_STALLS = "MSSQLFreeListStalls"
LAZY_WRITES = "MSSQLLazyWritesHigh"
LOOKUPS_PER_BATCH = "MSSQLPageLookupsPerBatchHigh"
GRANTS_PENDING = "MSSQLMemoryGrantsPending"
FREE_MEMORY_LOW = "MSSQLFreeMemoryLow"
HIT_RATIO_LOW = "MSSQLBufferCacheHitRatioLow"
ENDURANCE_EXHAUSTION = "MSSQLSSDEnduranceExhaustionProjected"
ENDURANCE_BUDGET = "MSSQLSSDEnduranceBudgetHigh"
ENDURANCE_REMAINING = "MSSQLSSDEnduranceRemainingLow"
EXTERNAL_PRESSURE = "MSSQLMemoryExternalPressure"
TARGET_PULLED_DOWN = "MSSQLTargetMemoryPulledDown"
GRANT_TIMEOUTS = "MSSQLMemoryGrantTimeouts"
GRANT_WAITS = "MSSQLMemoryGrantWaits"
MAX_MEMORY_DEFAULT = "MSSQLMaxServerMemoryDefault"
TEMPDB_HEADROOM_LOW = "MSSQLTempdbHeadroomLow"
TEMPDB_LOG_HEADROOM_LOW = "MSSQLTempdbLogHeadroomLow"
TEMPDB_PROJECTED_FULL = "MSSQLTempdbProjectedFull"
TEMPDB_VERSION_STORE = "MSSQLTempdbVersionStoreGrowing"
TEMPDB_LAYOUT = "MSSQLTempdbLayout"
TEMPDB_GROUP_LIMIT_HIT = "MSSQLTempdbWorkloadGroupLimitHit"
TEMPDB_GROUP_NEAR_LIMIT = "MSSQLTempdbWorkloadGroupNearLimit"
LOG_WRITE_LATENCY = "MSSQLLogWriteLatencyHigh"
DATA_READ_LATENCY = "MSSQLDataReadLatencyHigh"
DRIVE_WEAR_HIGH = "MSSQLDriveWearHigh"
DRIVE_SPARE_LOW = "MSSQLDriveSpareLow"
DRIVE_CRITICAL_WARNING = "MSSQLDriveCriticalWarning"
DRIVE_HEALTH_UNREAD = "MSSQLDriveHealthUnread"
DRIVE_WEAR_DISAGREES = "MSSQLSSDDriveWearDisagrees"
AG_REPLICA_UNHEALTHY = "MSSQLAvailabilityReplicaUnhealthy"
AG_REDO_QUEUE_GROWING = "MSSQLAvailabilityRedoQueueGrowing"
AG_SEND_QUEUE_GROWING = "MSSQLAvailabilitySendQueueGrowing"
MEMORY_HEALTH_HIGH = "MSSQLMemoryHealthHigh"
MEMORY_HEALTH_DEGRADED = "MSSQLMemoryHealthDegraded"
# The optional watch on Thanos Ruler (alerts/thanos_ruler.py), evaluated by a shard that scrapes the ruler.
FLEET_RULES_FAILING = "MSSQLFleetRulesFailing"
THANOS_RULER_DOWN = "MSSQLThanosRulerDown"
# The optional alerts on the shipped collector files (alerts/shipped_collectors.py).
AGENT_JOB_FAILED = "MSSQLAgentJobFailed"
AGENT_JOB_LONG_RUNNING = "MSSQLAgentJobLongRunning"
BACKUP_FULL_OLD = "MSSQLBackupFullOld"
BACKUP_LOG_OLD = "MSSQLBackupLogOld"
BLOCKED_WAIT_LONG = "MSSQLBlockedWaitLong"

# Recording rules without a window in their name.
PLE_MIN = "instance:mssql_buffer_node_page_life_expectancy:min"
PLE_FLOOR = "node:mssql_page_life_expectancy_floor:seconds"
UPTIME = "instance:mssql_uptime:seconds"
SHARE = "pool:mssql_ssd_endurance_projected_used:ratio"
REMAINING = "pool:mssql_ssd_endurance_remaining_seconds"
SINCE_IN_SERVICE = "pool:mssql_ssd_written_bytes_since_in_service:estimate"
COUNTED = "pool:mssql_ssd_written_bytes_counted:since_counting_start"
UNOBSERVED = "pool:mssql_ssd_written_bytes_unobserved:estimate"
# Where memory pressure comes from (0/1 per instance), and the memory figures the diagnosis reads.
PRESSURE_EXTERNAL_SIGNALS = "instance:mssql_memory_pressure_external_signals:count"
PRESSURE_EXTERNAL = "instance:mssql_memory_pressure_external:bool"
PRESSURE_INTERNAL = "instance:mssql_memory_pressure_internal:bool"
WORKSPACE_GRANTED = "instance:mssql_memory_workspace_granted:ratio"
OTHER_PROCESSES = "instance:mssql_os_memory_other_processes:ratio"
# tempdb's room: free inside its data files, what autogrowth can still add, and what that comes to.
TEMPDB_FREE_IN_FILES = "volume:mssql_tempdb_free_in_files_bytes:sum"
TEMPDB_GROWTH_EVENT = "volume:mssql_tempdb_growth_event_bytes:sum"
TEMPDB_GROWTH_ROOM = "volume:mssql_tempdb_growth_room_bytes:sum"
TEMPDB_LOG_GROWTH_EVENT = "volume:mssql_tempdb_log_growth_event_bytes:min"
TEMPDB_LOG_GROWTH_ROOM = "volume:mssql_tempdb_log_growth_room_bytes:sum"
TEMPDB_LOG_HEADROOM = "instance:mssql_tempdb_log_headroom_bytes:sum"
TEMPDB_LOG_HEADROOM_RATIO = "instance:mssql_tempdb_log_headroom:ratio"
TEMPDB_HEADROOM = "instance:mssql_tempdb_headroom_bytes:sum"
TEMPDB_HEADROOM_RATIO = "instance:mssql_tempdb_headroom:ratio"
TEMPDB_VERSION_STORE_BYTES = "instance:mssql_tempdb_version_store_bytes:sum"
TEMPDB_LAYOUT_PROBLEMS = "instance:mssql_tempdb_layout_problems:count"
# A workload group's tempdb use as a share of its limit (SQL Server 2025 tempdb space governance).
TEMPDB_GROUP_LIMIT_USED = "workload_group:mssql_tempdb_limit_used:ratio"
# The endurance the pool's drives imply (host bytes / life used), and what follows from it.
DRIVE_IMPLIED = "pool:mssql_ssd_drive_implied_endurance_bytes:sum"
DRIVE_TO_RATED = "pool:mssql_ssd_drive_implied_to_rated_endurance:ratio"
DRIVE_REMAINING = "pool:mssql_ssd_drive_endurance_remaining:seconds"
DRIVE_SHARE = "pool:mssql_ssd_drive_endurance_projected_used:ratio"
# The fleet group (alerts/fleet.py, evaluated by Thanos Ruler across every shard). Per shard (label of
# the spec's fleet.shard_label): targets scraped, answering, down. Fleet-wide: SSD pools with a projection,
# those projected past their rating (endurance.exhaustion_share) or budget (endurance.budget_high_share),
# and instances under memory pressure (external or internal, as the diagnosis rules tell them).
SHARD_TARGETS = "shard:mssql_targets:count"
SHARD_TARGETS_UP = "shard:mssql_targets_up:count"
SHARD_TARGETS_DOWN = "shard:mssql_targets_down:count"
FLEET_POOLS = "fleet:mssql_ssd_pools:count"
FLEET_POOLS_OVER_RATING = "fleet:mssql_ssd_pools_over_rating:count"
FLEET_POOLS_OVER_BUDGET = "fleet:mssql_ssd_pools_over_budget:count"
FLEET_MEMORY_PRESSURE = "fleet:mssql_instances_memory_pressure:count"
COVERAGE_SUFFIX = "_coverage_seconds"  # seconds of data the same-named rate rests on
# The optional group translating prometheus-community/smartctl_exporter series (alerts/smartctl_exporter.py):
# a promtool test evaluates it before the bundle's groups.
SMARTCTL_EXPORTER_GROUP = group_names.SMARTCTL_EXPORTER


@dataclass(frozen=True)
class RuleNames:
    """The recording-rule names that carry one of the spec's windows."""

    rate: str  # rate_window, e.g. "5m"
    tempdb_short: str
    tempdb_long: str
    pool_short: str
    pool_long: str
    tempdb_projection: str

    @classmethod
    def from_spec(cls, spec: Spec) -> RuleNames:
        return cls(
            rate=spec.rate_window,
            tempdb_short=spec.tempdb.short_rate_window,
            tempdb_long=spec.tempdb.long_rate_window,
            pool_short=spec.endurance.short_rate_window,
            pool_long=spec.endurance.projection_rate_window,
            tempdb_projection=spec.tempdb.projection_window,
        )

    def instance_rate(self, counter: str) -> str:
        """A per-instance rate of a counter named `mssql_<counter>_total`, e.g. lazy_writes."""
        return f"instance:mssql_{counter}:rate{self.rate}"

    @property
    def lookups_ratio(self) -> str:
        return f"instance:mssql_page_lookups_per_batch_request:ratio_rate{self.rate}"

    @property
    def grant_waits(self) -> str:
        """RESOURCE_SEMAPHORE wait seconds per second: queries waiting for a grant at once, on average."""
        return f"instance:mssql_grant_wait_seconds:rate{self.rate}"

    @property
    def grant_wait_share(self) -> str:
        """Grant waits' share of the wait time of the wait types the exporter reads."""
        return f"instance:mssql_grant_wait:ratio_rate{self.rate}"

    @property
    def compilations_per_batch(self) -> str:
        return f"instance:mssql_sql_compilations_per_batch_request:ratio_rate{self.rate}"

    @property
    def page_io(self) -> str:
        return f"instance:mssql_page_io:rate{self.rate}"

    @property
    def volume(self) -> str:
        return f"volume:mssql_written_bytes:rate{self.rate}"

    @property
    def memory_sizing_change(self) -> str:
        """Bytes by which max server memory, physical or target memory changed (label `memory`)."""
        return f"instance:mssql_memory_sizing_change_bytes:delta{self.rate}"

    @property
    def buffer_pool_long(self) -> str:
        """The buffer pool's size (Database Cache Memory) averaged like tempdb's long write rate."""
        return f"instance:mssql_memory_database_cache_bytes:avg{self.tempdb_long}"

    @property
    def tempdb_predicted(self) -> str:
        """tempdb's headroom the trend over the projection window predicts at the horizon."""
        return f"instance:mssql_tempdb_headroom_bytes:predict_linear{self.tempdb_projection}"

    @property
    def tempdb_exhausted_in(self) -> str:
        return f"instance:mssql_tempdb_headroom_exhausted_in_seconds:deriv{self.tempdb_projection}"

    def volume_io(self, what: str) -> str:
        """Per volume and file type: read_latency_seconds, write_latency_seconds, reads, writes,
        read_size_bytes, write_size_bytes."""
        return f"volume:mssql_{what}:rate{self.rate}"

    def tempdb(self, window: str) -> str:
        return f"instance:mssql_tempdb_written_bytes:rate{window}"

    @property
    def fleet_tempdb(self) -> str:
        """tempdb's write rate summed over every instance of the fleet (its short window's rate)."""
        return f"fleet:mssql_tempdb_written_bytes:rate{self.tempdb_short}"

    def pool(self, window: str) -> str:
        return f"pool:mssql_ssd_written_bytes:rate{window}"
