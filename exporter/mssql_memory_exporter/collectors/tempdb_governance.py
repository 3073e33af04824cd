"""SQL Server 2025's tempdb space resource governance, and the persistent version store ADR keeps in tempdb.

Facts (Microsoft's pages "Tempdb space resource governance", sys.dm_resource_governor_workload_groups,
sys.resource_governor_workload_groups, sys.dm_tran_persistent_version_store_stats):
- Per workload group, `tempdb_data_space_kb` (now) and `peak_tempdb_data_space_kb` (since start-up or
  `ALTER RESOURCE GOVERNOR RESET STATISTICS`) count the 8 KB pages the group holds in tempdb's data files;
  kept even where no limit is set. `total_tempdb_data_limit_violation_count` counts the requests aborted
  with error 1138 for going over the group's limit (reset by RESET STATISTICS too: a counter reset).
  The three columns are SQL Server 2025 (17.x) and later, nullable.
- The limit is stored in sys.resource_governor_workload_groups: `group_max_tempdb_data_mb` (fixed) or
  `group_max_tempdb_data_percent` (of tempdb's maximum size); both NULL means no limit, and the fixed one
  wins when both are set. A percent limit is in effect only when every tempdb data file either may grow
  (growth > 0) up to a set maximum (100 % = the sum of the maximums) or is pregrown and fixed (unlimited
  maximum, growth 0: 100 % = the sum of the sizes); otherwise SQL Server stores it and warns (10989) but
  does not enforce it, so no limit is exported. SQL Server takes tempdb's size at the last
  `ALTER RESOURCE GOVERNOR RECONFIGURE`; the exporter works it out from the files as they are now.
- The catalog view is the stored configuration: until RECONFIGURE it may differ from what is enforced.
  Limits are enforced only while resource governor is enabled (sys.resource_governor_configuration
  `is_enabled`; off by default): while it is off no limit is exported.
- With ADR on in tempdb (SQL Server 2025; takes effect at the next restart) the persistent version store
  is in tempdb: sys.dm_tran_persistent_version_store_stats has a row for database 2 (Microsoft's own
  diagnostic query reads it so); `persistent_version_store_size_kb` is its off-row size. Its space is
  not governed per workload group.

Before SQL Server 2025 the columns are missing: the sections answer "unavailable" (COL_LENGTH checks in
the batch), the collector exports nothing, succeeds, and logs that once per target.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

log = logging.getLogger(__name__)

USE_VIEW = "sys.dm_resource_governor_workload_groups"
LIMIT_VIEW = "sys.resource_governor_workload_groups"
CONFIG_VIEW = "sys.resource_governor_configuration"
PVS_VIEW = "sys.dm_tran_persistent_version_store_stats"
USE_TAG = "tempdb_rg_use"
LIMITS_TAG = "tempdb_rg_limits"
FILES_TAG = "tempdb_rg_files"
ENABLED_TAG = "tempdb_rg_enabled"
PVS_TAG = "tempdb_pvs"
TEMPDB_ID = 2
PAGE_BYTES = 8192
MIB = 1024.0 * 1024.0
UNLIMITED = -1  # tempdb.sys.database_files.max_size
# Workload groups are few (internal, default and the site's own, usually a handful). Past this many only
# the ones holding the most tempdb are exported, so a runaway configuration cannot flood Prometheus.
MAX_GROUPS = 64
LOGGED_KEY = "tempdb_governance_logged"

USE_COLUMNS = ("tempdb_data_space_kb", "peak_tempdb_data_space_kb", "total_tempdb_data_limit_violation_count")
LIMIT_COLUMNS = ("group_max_tempdb_data_mb", "group_max_tempdb_data_percent")

SECTIONS = (
    Section(
        tag=USE_TAG,
        sql="SELECT N'tempdb_rg_use' AS section, g.group_id, g.name, "
        + ", ".join(f"g.{c}" for c in USE_COLUMNS)
        + f"\nFROM {USE_VIEW} AS g;",
        requires=(USE_VIEW,),
        requires_columns=tuple((USE_VIEW, c) for c in USE_COLUMNS),
        optional=True,  # before SQL Server 2025: "not on this server", not a failure
    ),
    Section(
        tag=LIMITS_TAG,
        sql="SELECT N'tempdb_rg_limits' AS section, wg.group_id, "
        + ", ".join(f"wg.{c}" for c in LIMIT_COLUMNS)
        + f"\nFROM {LIMIT_VIEW} AS wg;",
        requires=(LIMIT_VIEW,),
        requires_columns=tuple((LIMIT_VIEW, c) for c in LIMIT_COLUMNS),
        optional=True,  # also absent on Azure SQL Database (the catalog view is SQL Server and MI only)
    ),
    # Limits are enforced only while resource governor is enabled (it is off by default).
    Section(
        tag=ENABLED_TAG,
        sql=f"SELECT N'tempdb_rg_enabled' AS section, rc.is_enabled\nFROM {CONFIG_VIEW} AS rc;",
        requires=(CONFIG_VIEW,),
        requires_columns=((LIMIT_VIEW, "group_max_tempdb_data_mb"),),  # only where the limits exist
        optional=True,
    ),
    # tempdb's data files, for what a percent limit comes to: read only where percent limits exist.
    Section(
        tag=FILES_TAG,
        sql="SELECT N'tempdb_rg_files' AS section, df.size, df.max_size, df.growth\n"
        "FROM tempdb.sys.database_files AS df\nWHERE df.type = 0;",
        requires=("tempdb.sys.database_files",),
        requires_columns=((LIMIT_VIEW, "group_max_tempdb_data_percent"),),
        optional=True,
    ),
    Section(
        tag=PVS_TAG,
        sql="SELECT N'tempdb_pvs' AS section, pvs.persistent_version_store_size_kb\n"
        f"FROM {PVS_VIEW} AS pvs\nWHERE pvs.database_id = {TEMPDB_ID};",
        requires=(PVS_VIEW,),
        # No row for tempdb is a true answer: ADR is not on there (SQL Server 2019 and 2022 cannot put
        # it there at all).
        may_be_empty=True,
        optional=True,
    ),
)

GROUP = Label(
    "workload_group",
    "`sys.dm_resource_governor_workload_groups.name`: `internal`, `default` or the site's own",
)
BEFORE_2025 = "before SQL Server 2025 (no such columns)"
SPACE_BYTES = MetricSpec(
    name="mssql_tempdb_workload_group_space_bytes",
    type="gauge",
    help="tempdb data-file space this resource governor workload group holds now (SQL Server 2025+).",
    unit="bytes",
    source=f"`{USE_VIEW}` `tempdb_data_space_kb` \u00d7 1024",
    question="Which workload group fills tempdb? Kept even where no limit is set, so it shows what a limit "
    "would have to allow.",
    labels=(GROUP,),
    conditional=BEFORE_2025 + ", and where SQL Server reports NULL",
)
PEAK_SPACE_BYTES = MetricSpec(
    name="mssql_tempdb_workload_group_peak_space_bytes",
    type="gauge",
    help="Most tempdb data-file space this workload group held since start-up or the last"
    " ALTER RESOURCE GOVERNOR RESET STATISTICS.",
    unit="bytes",
    source=f"`{USE_VIEW}` `peak_tempdb_data_space_kb` \u00d7 1024",
    question="How close has the group come to its limit, including between scrapes?",
    labels=(GROUP,),
    conditional=BEFORE_2025 + ", and where SQL Server reports NULL",
)
LIMIT_BYTES = MetricSpec(
    name="mssql_tempdb_workload_group_limit_bytes",
    type="gauge",
    help="The workload group's tempdb data-space limit: group_max_tempdb_data_mb, else"
    " group_max_tempdb_data_percent of tempdb's maximum size where that is in effect.",
    unit="bytes",
    source=f"`{LIMIT_VIEW}` `group_max_tempdb_data_mb` \u00d7 1048576; else `group_max_tempdb_data_percent`"
    " / 100 \u00d7 tempdb's maximum (the sum of its data files' `max_size` when all may grow to a maximum, "
    "of their `size` when all are pregrown with growth 0, `tempdb.sys.database_files`, \u00d7 8192)",
    question="What may the group hold before its requests fail with error 1138? Divide the space by it for "
    "the share used.",
    labels=(GROUP,),
    conditional=BEFORE_2025 + "; where the group has no limit; where a percent limit is not in effect "
    "(tempdb's files neither all capped nor all pregrown); while resource governor is disabled; on Azure "
    "SQL Database",
)
VIOLATIONS = MetricSpec(
    name="mssql_tempdb_workload_group_limit_violations_total",
    type="counter",
    help="Requests of this workload group aborted with error 1138 for going over its tempdb limit"
    " (reset by ALTER RESOURCE GOVERNOR RESET STATISTICS).",
    unit="requests",
    source=f"`{USE_VIEW}` `total_tempdb_data_limit_violation_count`",
    question="Did the limit stop queries? Any increase is a query that failed with error 1138.",
    labels=(GROUP,),
    conditional=BEFORE_2025 + ", and where SQL Server reports NULL",
)
PVS_BYTES = MetricSpec(
    name="mssql_tempdb_persistent_version_store_bytes",
    type="gauge",
    help="Size of the persistent version store accelerated database recovery keeps in tempdb (off-row"
    " versions; SQL Server 2025 with ADR on in tempdb).",
    unit="bytes",
    source=f"`{PVS_VIEW}` `persistent_version_store_size_kb` \u00d7 1024, row of `database_id` 2",
    question="How much of tempdb do row versions take when ADR is on in tempdb? Shown beside the classic "
    'version store (`mssql_tempdb_file_space_bytes{usage="version_store"}`), not added to it.',
    conditional="where the view has no row for tempdb (ADR off in tempdb, always before SQL Server 2025) and "
    "before SQL Server 2019 (no such view)",
)
METRICS = (SPACE_BYTES, PEAK_SPACE_BYTES, LIMIT_BYTES, VIOLATIONS, PVS_BYTES)


def tempdb_max_pages(files: Sequence[Mapping[str, object]]) -> float | None:
    """What 100 % of a percent limit is, in pages, from tempdb's data files (size, max_size, growth), by
    Microsoft's rule; None where percent limits are not in effect."""
    rows = []
    for f in files:
        size, max_size, growth = (number(f.get(c), c) for c in ("size", "max_size", "growth"))
        if size is None or max_size is None or growth is None:
            return None
        rows.append((size, max_size, growth))
    if not rows:
        return None
    if all(m != UNLIMITED and g > 0 for _, m, g in rows):
        return sum(m for _, m, _ in rows)  # autogrow up to their maximums
    if all(m == UNLIMITED and g == 0 for _, m, g in rows):
        return sum(s for s, _, _ in rows)  # pregrown and fixed
    return None


def limit_bytes(row: Mapping[str, object], max_pages: float | None) -> float | None:
    """A group's limit in bytes: the fixed one if set, else the percent one where it is in effect."""
    mb = number(row.get("group_max_tempdb_data_mb"), "group_max_tempdb_data_mb")
    if mb is not None:
        return mb * MIB
    percent = number(row.get("group_max_tempdb_data_percent"), "group_max_tempdb_data_percent")
    if percent is None or max_pages is None:
        return None
    return percent / 100.0 * max_pages * PAGE_BYTES


def _log_once(ctx: ScrapeContext, key: str, message: str, *args: object) -> None:
    logged = ctx.memo.setdefault(LOGGED_KEY, set())
    assert isinstance(logged, set)
    if key not in logged:
        logged.add(key)
        log.info(message, *args)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    use = results.get(USE_TAG)
    if use is None or use.unavailable:
        _log_once(
            ctx,
            "unavailable",
            "target %s: no tempdb space resource governance figures (SQL Server 2025 and later; %s lacks"
            " them here)",
            ctx.target.name,
            USE_VIEW,
        )
    pvs = results.get(PVS_TAG)
    for row in rows_of(results, PVS_TAG) if pvs is not None and not pvs.unavailable else ():
        size = number(row.get("persistent_version_store_size_kb"), "persistent_version_store_size_kb")
        if size is not None:
            out.emit(PVS_BYTES, size * KIB)
        break
    groups = list(rows_of(results, USE_TAG))
    if not groups:
        return
    if len(groups) > MAX_GROUPS:
        _log_once(
            ctx,
            "capped",
            "target %s has %d workload groups: exporting the %d holding the most tempdb",
            ctx.target.name,
            len(groups),
            MAX_GROUPS,
        )
        groups.sort(
            key=lambda r: number(r.get("tempdb_data_space_kb"), "tempdb_data_space_kb") or 0.0, reverse=True
        )
        groups = groups[:MAX_GROUPS]
    limits = {str(r.get("group_id")): r for r in rows_of(results, LIMITS_TAG)}
    enabled = [number(r.get("is_enabled"), "is_enabled") for r in rows_of(results, ENABLED_TAG)]
    if enabled and not enabled[0]:
        _log_once(
            ctx,
            "disabled",
            "target %s: resource governor is disabled, so no tempdb limit is enforced or exported",
            ctx.target.name,
        )
        limits = {}
    max_pages = tempdb_max_pages(list(rows_of(results, FILES_TAG)))
    for row in groups:
        labels = {"workload_group": str(row.get("name") or row.get("group_id") or "").strip()}
        for column, spec in (
            ("tempdb_data_space_kb", SPACE_BYTES),
            ("peak_tempdb_data_space_kb", PEAK_SPACE_BYTES),
        ):
            kb = number(row.get(column), column)
            if kb is not None:
                out.emit(spec, kb * KIB, labels)
        count = number(
            row.get("total_tempdb_data_limit_violation_count"), "total_tempdb_data_limit_violation_count"
        )
        if count is not None:
            out.emit(VIOLATIONS, count, labels)
        stored = limits.get(str(row.get("group_id")))
        limit = limit_bytes(stored, max_pages) if stored is not None else None
        if limit is not None:
            out.emit(LIMIT_BYTES, limit, labels)


COLLECTOR = CollectorRecord(
    name="tempdb_governance",
    sections=(USE_TAG, LIMITS_TAG, ENABLED_TAG, FILES_TAG, PVS_TAG),
    collect=collect,
    defines=SECTIONS,
    metrics=METRICS,
    summary="SQL Server 2025: tempdb space per resource governor workload group against its limit, the "
    "requests its limit stopped (error 1138), and the persistent version store ADR keeps in tempdb.",
)
