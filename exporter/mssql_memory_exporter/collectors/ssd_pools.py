"""SSD endurance pools: what has been written to the drives of each pool the config describes.

`source="sqlserver"` sums SQL Server's file writes on the pool's volumes (from the volumes collector,
which runs earlier in the same scrape); `source="host"` sums the kernel's counters of the pool's
physical disks, when the exporter runs on the SQL Server host. Rated endurance, planned life and
in-service date come from the config, so recording rules can project wear without a second source.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import endurance
from . import file_stats, volumes
from .base import FamilyBuilder, MissingData, ScrapeContext, SectionResult

name = "ssd_pools"
sections = (file_stats.TAG,)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    pools = getattr(ctx.target, "ssd_pools", None) or {}
    if not pools:
        return
    totals = ctx.memo.get(volumes.TOTALS_KEY)
    if not isinstance(totals, dict):
        raise MissingData("no volume totals this scrape")
    by_volume: dict[str, float] = {}
    for (volume, _file_type), written in totals.items():
        by_volume[volume] = by_volume.get(volume, 0.0) + written
    host_written = ctx.host.written_bytes_by_disk() if ctx.host is not None else None
    for pool_name, pool in sorted(pools.items()):
        sqlserver = sum(by_volume.get(v, 0.0) for v in pool.volumes) if pool.volumes else None
        host = None
        if pool.host_disks and host_written is not None:
            host = sum(host_written.get(disk, 0.0) for disk in pool.host_disks)
        endurance.pool_metrics(pool_name, pool, sqlserver, host, out)
        endurance.counting_metrics(pool_name, pool, sqlserver, host, ctx, out)
