"""SSD endurance pools: what has been written to the drives of each pool the config describes.

`source="sqlserver"` sums SQL Server's file writes on the pool's volumes (from the volumes collector,
which runs earlier in the same scrape); `source="host"` sums the kernel's counters of the pool's
physical disks, when the exporter runs on the SQL Server host; `source="drive"` sums the lifetime
host-write counters the pool's drives report to smartctl (drive_health), when every one of them
does. Rated endurance, planned life and
in-service date come from the config, so recording rules can project wear without a second source.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from . import endurance, file_stats, files, volumes
from .base import CollectorRecord, ScrapeContext, SectionResult
from .view import PoolView

log = logging.getLogger(__name__)

CHECKED_KEY = "ssd_pools_checked_generation"
PER_DRIVE = (
    *endurance.POOL,
    Label("device", "the linked drive's name (a `smart_drives` or `host_disks` entry)"),
)
ONLY_DRIVE = 'unless the pool has `source="drive"` (every drive it counts linked and reporting its bytes)'
DRIVE_LIFE_USED = MetricSpec(
    "mssql_ssd_pool_drive_life_used_ratio",
    "gauge",
    "Share of its rated life the pool's drive says it has used (NVMe percentage used / 100, or the "
    "family's wear attribute); can pass 1. Same reading as mssql_drive_life_used_ratio on /metrics.",
    "ratio",
    "drive health: each linked drive's `mssql_drive_life_used_ratio`, repeated under the target (the drives' "
    "own series are on the exporter's `/metrics`, which no label ties to a target)",
    "How much of its rated life has each of the pool's drives used, by its own account?",
    PER_DRIVE,
    conditional=ONLY_DRIVE,
)
DRIVE_HOST_WRITTEN = MetricSpec(
    "mssql_ssd_pool_drive_host_written_bytes",
    "gauge",
    "Lifetime host bytes the drive now in this slot reports (its own, not those of a drive it replaced). "
    "Divided by its life used: the endurance the drive implies.",
    "bytes",
    "drive health: the lifetime host bytes of the drive now in the slot (its own, not a replaced drive's)",
    "What endurance does the drive imply? Bytes / life used; the rules compare it with the rating "
    "([endurance.md](endurance.md)).",
    PER_DRIVE,
    conditional=ONLY_DRIVE,
)
DRIVE_COUNT_KEY = "ssd_pools_drive_count_warned"


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    pools = ctx.target.ssd_pools
    if not pools:
        return
    totals = volumes.totals_of_this_scrape(ctx)
    if totals is None:
        raise MissingData("no volume totals this scrape (the volumes collector failed)")
    cat = files.update(results, ctx)
    configured = {v for pool in pools.values() for v in pool.volumes}
    by_volume: dict[str, float] = {}
    for (label, _file_type), written in totals.items():
        volume = cat.holder_of(label, configured)
        if volume is not None:
            by_volume[volume] = by_volume.get(volume, 0.0) + written
    _warn_unmatched(pools, configured, cat, ctx)
    host_written = ctx.host.written_bytes_by_disk() if ctx.host is not None else None
    for pool_name, pool in sorted(pools.items()):
        sqlserver = sum(by_volume.get(v, 0.0) for v in pool.volumes) if pool.volumes else None
        host = None
        if pool.host_disks and host_written is not None:
            host = sum(host_written.get(disk, 0.0) for disk in pool.host_disks)
        linked = _linked_drives(pool, ctx)
        drive = _drive_written(pool_name, pool, linked, ctx)
        endurance.pool_metrics(pool_name, pool, sqlserver, host, out, drive)
        endurance.counting_metrics(pool_name, pool, sqlserver, host, ctx, out, drive)
        if drive is not None:
            _drive_wear(pool_name, linked, ctx, out)


def _linked_drives(pool: PoolView, ctx: ScrapeContext) -> list[str]:
    """The pool's drives (smart_drives, then host_disks) that drive_health reads."""
    if ctx.host is None:
        return []
    read = ctx.host.drive_names()
    return [name for name in [*pool.smart_drives, *pool.host_disks] if name in read]


def _drive_wear(pool_name: str, linked: list[str], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    """Each linked drive's life used and its own lifetime host bytes, under the target like the pool's
    other figures, so rules can set the rating the drives imply beside the rated one (the drives'
    own series are on the exporter's /metrics, which no label ties to this target)."""
    assert ctx.host is not None  # _drive_written gave a figure
    for name, (used, written) in sorted(ctx.host.drive_wear(linked).items()):
        labels = {"pool": pool_name, "device": name}
        if used is not None:
            out.emit(DRIVE_LIFE_USED, used, labels)
        if written is not None:
            out.emit(DRIVE_HOST_WRITTEN, written, labels)


def _drive_written(pool_name: str, pool: PoolView, linked: list[str], ctx: ScrapeContext) -> float | None:
    """The pool's lifetime host bytes from its drives' own counters; None unless every drive the pool
    counts (drives.count) is linked and has reported its bytes: a partial sum would pass for the whole."""
    if ctx.host is None or not linked:
        return None
    total = ctx.host.drive_written_bytes(linked)
    if total is None:
        return None
    if len(linked) != pool.drives.count:
        # Some of the pool's drives are not linked (behind a RAID controller, not under drive_health):
        # the known_written reading stays the pool's only lifetime figure. Said once per pool.
        warned = ctx.memo.setdefault(DRIVE_COUNT_KEY, set())
        assert isinstance(warned, set)
        if pool_name not in warned:
            warned.add(pool_name)
            log.warning(
                "ssd pool: its drives report their bytes, but it links a different number of drives than "
                "drives.count; source=drive is not exported",
                extra={
                    "target": ctx.target.name,
                    "pool": pool_name,
                    "linked": len(linked),
                    "count": pool.drives.count,
                },
            )
        return None
    return total


def _warn_unmatched(pools: Mapping, configured: set[str], cat: files.FileCatalog, ctx: ScrapeContext) -> None:
    """A pool volume that holds no file adds 0 to its pool: say so once per file-list refresh, since a
    typo (or a label the files never get) would otherwise read as a pool nobody writes to."""
    if ctx.memo.get(CHECKED_KEY) == cat.generation or cat.lookups_inflight:
        return  # checked already, or files wait for their volume lookups (asked with the next scrape)
    ctx.memo[CHECKED_KEY] = cat.generation
    unmatched = cat.unmatched(configured, ctx)
    for pool_name, pool in sorted(pools.items()):
        for volume in pool.volumes:
            if volume in unmatched:
                log.warning(
                    "ssd pool volume holds no database file; it adds 0 to the pool",
                    extra={"target": ctx.target.name, "pool": pool_name, "volume": volume},
                )


COLLECTOR = CollectorRecord(
    name="ssd_pools",
    sections=(file_stats.TAG,),
    collect=collect,
    needs=("volumes",),  # the written bytes totals volumes computed this scrape, and its file catalog
    metrics=(*endurance.POOL_METRICS, DRIVE_LIFE_USED, DRIVE_HOST_WRITTEN),
)
