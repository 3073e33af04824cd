"""Drive health as users run it: the exporter's own process, real HTTP, the stand-in SQL Server, and a
smartctl (the fake executable) that reads two drives of a pool and fails on a third."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, samples_of, value
from tests.e2e.test_http_e2e import get
from tests.e2e_stack import Stack
from tests.failure_checks import eventually
from tests.fake_smartctl import FakeSmartctl

FIRST = "nvme-null-Micron_7400_MTFDKCB1T9TDZ-nvme10.json"  # data_units_written 725,355,323; 5 % used
SECOND = "nvme-null-Micron_7300_MTFDHBE1T6TDG-nvme0.json"  # data_units_written 338,104; 0 % used


def test_drive_source_through_the_exporter(standin, tmp_path):
    fake = FakeSmartctl(tmp_path / "smartctl")
    fake.replay("nvme0", FIRST)
    fake.replay("nvme1", SECOND)
    fake.set("sdz", mode="vanished")
    healthy = standin("healthy-oltp", manual_clock=False)
    pool = {
        "drives": {"count": 2, "tbw_per_drive_tb": 5000},
        "planned_lifetime_years": 5,
        "in_service_date": "2023-01-01",
        "smart_drives": ["nvme0", "nvme1"],
    }
    config = {
        "default_target": "healthy",
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"healthy": healthy.target_yaml(colocated=True, ssd_pools={"data": pool})},
        "drive_health": {
            "smartctl": str(fake.path),
            "interval_seconds": 600,
            "timeout_seconds": 5,
            "drives": [{"name": "nvme0"}, {"name": "nvme1"}, {"name": "sdz"}],
        },
    }
    with Stack(tmp_path / "stack") as stack:
        base = stack.start_exporter(config, env={PASSWORD_ENV: TEST_PASSWORD}, args=("--collector.host",))
        process = stack.process("exporter")

        def metrics() -> dict:
            status, body = get(f"{base}/metrics")
            assert status == 200
            return samples_of(body)

        # The first round runs in the background; /metrics answers at once meanwhile.
        def first_round_done() -> bool:
            got = metrics()
            return got.get(("mssql_drive_read_success", (("device", "sdz"),))) == 0 and (
                "mssql_drive_reading_age_seconds", (("device", "nvme1"), ("pool", "data"))
            ) in got

        assert eventually(first_round_done, seconds=10)
        got = metrics()
        # The broken drive fails the drive source, and only it.
        assert value(got, "mssql_exporter_collector_success", collector="drive_health") == 0
        assert value(got, "mssql_drive_read_success", device="sdz") == 0
        assert value(got, "mssql_up") == 1
        assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
        assert value(got, "mssql_page_life_expectancy_seconds") > 0
        assert value(got, "mssql_exporter_collector_success", collector="host") == 1
        # The host, drive-health and default-target families share names: one family per name.
        names = [family.name for family in text_string_to_metric_families(get(f"{base}/metrics")[1])]
        assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
        # The good drives, labelled with their pool.
        assert value(got, "mssql_drive_read_success", device="nvme0", pool="data") == 1
        model = "Micron_7400_MTFDKCB1T9TDZ"
        first = {"device": "nvme0", "model": model, "serial": "REDACTED", "pool": "data"}
        assert value(got, "mssql_drive_host_written_bytes_total", **first) == 725_355_323 * 512_000
        assert value(got, "mssql_drive_life_used_ratio", **first) == 0.05
        # The pool's lifetime bytes from its drives: (725,355,323 + 338,104) x 512,000.
        status, body = get(f"{base}/probe?target=healthy")
        assert status == 200
        probe = samples_of(body)
        pool_bytes = value(probe, "mssql_ssd_pool_written_bytes_total", pool="data", source="drive")
        assert pool_bytes == (725_355_323 + 338_104) * 512_000 == 371_555_034_624_000
        # The drives count from the day they were new: counting starts at the in-service date, from 0.
        start = value(probe, "mssql_ssd_pool_counting_start_timestamp_seconds", pool="data", source="drive")
        assert start == 1_672_531_200  # 2023-01-01 00:00 UTC
        assert value(probe, "mssql_ssd_pool_counting_start_written_bytes", pool="data", source="drive") == 0
        assert value(probe, "mssql_up") == 1
        # The failure is one clear line in the log, naming the drive and smartctl's reason.
        deadline = time.monotonic() + 5
        while "No such device" not in process.tail(200) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [line for line in process.tail(200).splitlines() if "drive health: no reading" in line]
        assert len(lines) == 1 and "device=sdz" in lines[0] and "No such device" in lines[0], process.tail()
        assert TEST_PASSWORD not in process.tail(1000)
        process.popen.terminate()
        process.popen.wait(10)
        assert process.popen.returncode == 0, process.tail()
