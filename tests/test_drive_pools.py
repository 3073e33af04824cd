"""Pools that know their drives: which drives count for `source="drive"`, and when the pool has none."""

from __future__ import annotations

import json
import logging

import pytest
from mssql_memory_exporter.collectors import ssd_pools
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.collectors.endurance import counting_metrics, pool_metrics
from mssql_memory_exporter.config import DriveHealthConfig, SsdPool
from mssql_memory_exporter.host import smartctl
from mssql_memory_exporter.host.collector import HostCollector
from mssql_memory_exporter.host.drive_health import DriveMonitor
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, samples_of, value
from tests.fake_smartctl import fixture

# Two real NVMe drives: data_units_written 184,919,244 and 3,861,802.
DOCS = {
    "/dev/nvme0n1": fixture("INTEL_SSDPE2KX080T8_1.json"),
    "/dev/nvme1n1": fixture("KXG60ZNV512G_TOSHIBA_2.json"),
}
BOTH = (184_919_244 + 3_861_802) * 512_000


def host_with(*names: str) -> HostCollector:
    """A host whose drive_health reads `names`, fed the fixtures above by device path."""

    def run(argv, timeout):
        return smartctl.interpret(0, json.dumps(DOCS[argv[-1]]).encode())

    config = DriveHealthConfig.model_validate({"drives": [{"name": name} for name in names]})
    monitor = DriveMonitor(config, run=run)
    monitor.read_all()
    return HostCollector(drives=monitor)


def pool(count: int, **links: list[str]) -> SsdPool:
    return SsdPool.model_validate(
        {
            "drives": {"count": count, "tbw_per_drive_tb": 1000},
            "planned_lifetime_years": 5,
            "in_service_date": "2024-03-01",
            **links,
        }
    )


def ctx_for(host: HostCollector) -> ScrapeContext:
    return ScrapeContext(now=1_750_000_000.0, workload="oltp", memo={}, host=host)


def drive_written(data: SsdPool, ctx: ScrapeContext) -> float | None:
    return ssd_pools._drive_written("data", data, ssd_pools._linked_drives(data, ctx), ctx)


def test_host_disks_read_by_drive_health_link_the_pool():
    data = pool(2, host_disks=["nvme0n1", "nvme1n1"])
    assert drive_written(data, ctx_for(host_with("nvme0n1", "nvme1n1"))) == BOTH


def test_smart_drives_link_the_pool():
    data = pool(2, smart_drives=["nvme0n1", "nvme1n1"])
    assert drive_written(data, ctx_for(host_with("nvme0n1", "nvme1n1"))) == BOTH


def test_a_pool_with_a_drive_not_read_has_no_drive_source_and_says_so_once(caplog):
    # Two drives in the pool, only one of them read: half the pool's bytes would pass for all of them.
    ctx = ctx_for(host_with("nvme0n1"))
    data = pool(2, host_disks=["nvme0n1", "nvme1n1"])
    with caplog.at_level(logging.WARNING):
        assert drive_written(data, ctx) is None
        assert drive_written(data, ctx) is None
    lines = [r for r in caplog.records if "source=drive is not exported" in r.getMessage()]
    assert len(lines) == 1 and lines[0].linked == 1 and lines[0].count == 2  # type: ignore[attr-defined]


def test_no_drive_health_no_drive_source():
    data = pool(2, host_disks=["nvme0n1", "nvme1n1"])
    assert drive_written(data, ctx_for(HostCollector())) is None


def test_drive_source_metrics_count_from_the_in_service_date():
    data = pool(2, host_disks=["nvme0n1", "nvme1n1"])
    ctx = ctx_for(host_with("nvme0n1", "nvme1n1"))
    out = FamilyBuilder({})
    written = drive_written(data, ctx)
    pool_metrics("data", data, None, None, out, written)
    counting_metrics("data", data, None, None, ctx, out, written)
    got = samples_of(exposition(out.families()))
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="data", source="drive") == BOTH
    # 2024-03-01 00:00 UTC, and nothing before it unobserved.
    start = value(got, "mssql_ssd_pool_counting_start_timestamp_seconds", pool="data", source="drive")
    assert start == 1_709_251_200
    assert value(got, "mssql_ssd_pool_counting_start_written_bytes", pool="data", source="drive") == 0
    assert ("mssql_ssd_pool_written_bytes_total", (("pool", "data"), ("source", "host"))) not in got


@pytest.mark.parametrize("field", ["host_disks", "smart_drives"])
def test_a_drive_in_two_pools_is_refused_naming_the_field(field):
    from mssql_memory_exporter.config import ConfigError, parse_config

    body = {
        "auth_modules": {"m": {"username": "u", "password_env": "PATH"}},
        "targets": {
            "t": {
                "host": "h",
                "auth_module": "m",
                "colocated": True,
                "ssd_pools": {
                    "a": pool(1, smart_drives=["nvme0n1"]).model_dump(mode="json", exclude_defaults=True),
                    "b": pool(1, **{field: ["nvme0n1"]}).model_dump(mode="json", exclude_defaults=True),
                },
            }
        },
        "drive_health": {"drives": [{"name": "nvme0n1"}]},
    }
    with pytest.raises(ConfigError) as info:
        parse_config(body)
    assert f"targets.t.ssd_pools.b.{field}.0: drive nvme0n1 is already in pool targets.t.ssd_pools.a" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("drive", "device"),
    [
        ({"name": "nvme0n1"}, "/dev/nvme0n1"),
        ({"name": "PhysicalDrive2"}, "/dev/pd2"),  # smartctl for Windows' name for \\.\PhysicalDrive2
        ({"name": "slot0", "device": "/dev/sda"}, "/dev/sda"),
    ],
)
def test_default_device_nodes(drive, device):
    config = DriveHealthConfig.model_validate({"drives": [drive]})
    assert DriveMonitor(config).argv(config.drives[0])[-1] == device


def test_a_pools_drives_report_their_wear_under_the_target():
    """The rating a drive implies needs its life used and its own bytes beside the pool's series: the
    Intel drive says 0% used after 184,919,244 units, the Toshiba 1% after 3,861,802 units."""
    data = pool(2, smart_drives=["nvme0n1", "nvme1n1"])
    ctx = ctx_for(host_with("nvme0n1", "nvme1n1"))
    out = FamilyBuilder({})
    ssd_pools._drive_wear("data", ssd_pools._linked_drives(data, ctx), ctx, out)
    got = samples_of(exposition(out.families()))
    used, written = "mssql_ssd_pool_drive_life_used_ratio", "mssql_ssd_pool_drive_host_written_bytes"
    assert value(got, used, pool="data", device="nvme0n1") == 0.0
    assert value(got, used, pool="data", device="nvme1n1") == 0.01
    assert value(got, written, pool="data", device="nvme0n1") == 184_919_244 * 512_000
    assert value(got, written, pool="data", device="nvme1n1") == 3_861_802 * 512_000
    assert len(got) == 4


def test_a_drive_not_read_yet_reports_no_wear():
    data = pool(1, smart_drives=["nvme0n1"])
    config = DriveHealthConfig.model_validate({"drives": [{"name": "nvme0n1"}]})
    ctx = ctx_for(HostCollector(drives=DriveMonitor(config, run=lambda argv, timeout: None)))
    out = FamilyBuilder({})
    ssd_pools._drive_wear("data", ssd_pools._linked_drives(data, ctx), ctx, out)
    assert out.families() == []

