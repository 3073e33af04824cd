"""Hybrid Buffer Pool (SQL Server 2019+): clean pages of HBP-enabled databases read straight from PMEM.

SQL Server reports whether HBP is configured and enabled, and which databases have it on, but no counter
of how many pages it serves from PMEM. The most honest figure we can give is the size of the data files
of HBP-enabled databases that sit on PMEM (DAX) volumes: what HBP *may* serve, not what it does.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from . import files
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, rows_of

CONFIG_TAG = "hbp"
DATABASES_TAG = "hbp_databases"
HBP_VIEW = "sys.server_memory_optimized_hybrid_buffer_pool_configuration"

SECTIONS = (
    Section(
        tag=CONFIG_TAG,
        # The view's columns are sql_variant; cast them so every driver reads plain integers.
        sql="SELECT N'hbp' AS section, CAST(hbp.is_configured AS int) AS is_configured,"
        " CAST(hbp.is_enabled AS int) AS is_enabled\n"
        f"FROM {HBP_VIEW} AS hbp;",
        requires=(HBP_VIEW,),
        optional=True,
        may_be_empty=True,
    ),
    Section(
        tag=DATABASES_TAG,
        # is_memory_optimized_enabled arrived with HBP in 2019, so the same object check guards it.
        sql="SELECT N'hbp_databases' AS section, d.database_id\n"
        "FROM sys.databases AS d\nWHERE d.is_memory_optimized_enabled = 1;",
        requires=(HBP_VIEW,),
        optional=True,
        may_be_empty=True,
        # The switch is on by default, so this is a row per database: read it with the file list, on the
        # slow cadence, not with every scrape (5,000 databases were 5,000 more rows per scrape).
        slow=True,
    ),
)
ENABLED_KEY = "hbp_enabled_databases"  # ctx.memo: database ids of the last refresh

CONFIGURED = MetricSpec(
    name="mssql_hybrid_buffer_pool_configured",
    type="gauge",
    help="1 if the Hybrid Buffer Pool is configured at server level (takes effect after a restart).",
    unit="0/1",
    source=f"`{HBP_VIEW}` `is_configured`: the server-level setting (`ALTER SERVER CONFIGURATION SET "
    "MEMORY_OPTIMIZED HYBRID_BUFFER_POOL = ON`), which takes effect at the next restart",
    question="Is the Hybrid Buffer Pool set to be on after the next restart? 0 on servers before 2019.",
)
ENABLED = MetricSpec(
    name="mssql_hybrid_buffer_pool_enabled",
    type="gauge",
    help="1 if the Hybrid Buffer Pool is enabled now.",
    unit="0/1",
    source=f"`{HBP_VIEW}` `is_enabled`",
    question="Is the Hybrid Buffer Pool in effect now? 0 on servers before 2019.",
)
DATABASES = MetricSpec(
    name="mssql_hybrid_buffer_pool_databases",
    type="gauge",
    help="Databases whose database-level Hybrid Buffer Pool switch is on (the default since 2019), as of"
    " the last refresh of the file list; they use it only while it is enabled at server level.",
    unit="databases",
    source="Count of rows of `sys.databases` with `is_memory_optimized_enabled = 1` (the database-level "
    "setting, `ALTER DATABASE … SET MEMORY_OPTIMIZED`), read with the file list every "
    "`volume_refresh_seconds`, so a changed setting shows at the next refresh",
    question="How many databases have not opted out? The setting is **on by default** for every database "
    "since 2019, system databases included, so this is usually nearly every database, whether or not the "
    "server-level Hybrid Buffer Pool is on. 0 on servers before 2019.",
)
ELIGIBLE_BYTES = MetricSpec(
    name="mssql_hybrid_buffer_pool_eligible_bytes",
    type="gauge",
    help="Size of data files of HBP-enabled databases on this PMEM volume: what HBP may serve from PMEM.",
    unit="bytes",
    source="`sys.master_files.size` \u00d7 8192, summed over the data files of the databases counted above "
    "that sit on that PMEM volume, while the Hybrid Buffer Pool is enabled at server level "
    "(`mssql_hybrid_buffer_pool_enabled` 1); 0 while it is not",
    question="How much could the Hybrid Buffer Pool serve from PMEM? An upper bound, **not** a measure of "
    "use.",
    labels=(Label("volume", "a PMEM volume"),),
    conditional="on a server with no PMEM volume, and until the file list has been read",
)


def _pmem_volumes(ctx: ScrapeContext) -> set[str]:
    volumes = {files.canonical_volume(v) for v in ctx.target.pmem_volumes}
    if ctx.host is not None:
        volumes |= {files.canonical_volume(v) for v in ctx.host.dax_mount_points()}
    return volumes


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    config = next(iter(rows_of(results, CONFIG_TAG)), {})
    # A server without the view (before 2019) cannot have HBP: 0 is the true answer there.
    out.emit(
        CONFIGURED,
        float(int(config.get("is_configured") or 0)),  # type: ignore[call-overload]
    )
    out.emit(
        ENABLED,
        float(int(config.get("is_enabled") or 0)),  # type: ignore[call-overload]
    )
    if DATABASES_TAG in results:
        ctx.memo[ENABLED_KEY] = frozenset(
            int(r["database_id"])  # type: ignore[call-overload]
            for r in rows_of(results, DATABASES_TAG)
        )
    enabled_dbs: frozenset[int] = ctx.memo.get(ENABLED_KEY, frozenset())  # type: ignore[assignment]
    out.emit(DATABASES, len(enabled_dbs))
    cat = files.update(results, ctx)
    if not cat.refreshed:
        return
    pmem = _pmem_volumes(ctx)
    eligible: dict[str, float] = {v: 0.0 for v in pmem}
    # The database switch defaults to ON in 2019+, so it means something only while the server-level
    # Hybrid Buffer Pool is enabled: otherwise nothing is served from PMEM and eligible is 0.
    server_enabled = int(config.get("is_enabled") or 0) == 1  # type: ignore[call-overload]
    for f in cat.files.values() if server_enabled else ():
        if f.database_id in enabled_dbs and f.file_type == "data":
            label = cat.volume_of(f, ctx)
            volume = cat.holder_of(label, pmem) if label is not None else None
            if volume is not None:
                eligible[volume] += f.size_bytes
    for volume, size in sorted(eligible.items()):
        out.emit(ELIGIBLE_BYTES, size, {"volume": volume})


COLLECTOR = CollectorRecord(
    name="hybrid_buffer_pool",
    sections=(CONFIG_TAG, DATABASES_TAG),
    collect=collect,
    # The shared file list says which data files sit on PMEM volumes (eligible bytes).
    defines=(*SECTIONS, files.FILES_SECTION),
    metrics=(CONFIGURED, ENABLED, DATABASES, ELIGIBLE_BYTES),
)
