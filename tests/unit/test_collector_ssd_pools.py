"""The ssd_pools collector (SQL Server's writes per configured pool of volumes): its facts from the
stand-in's rows in process."""

from __future__ import annotations

import pytest

from tests.conftest import scrape, value
from tests.file_figures import DATA_VOLUME, MB, TEMPDB_VOLUME, series, total


def test_ssd_pool_endurance_metrics_from_sql_server_writes(offline_standin, scraper_for):
    s = offline_standin("micron-960gb-8stream")
    pool = {
        "drives": {"count": 4, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-01-01",
        "volumes": [TEMPDB_VOLUME],
    }
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME}, ssd_pools={"tempdb-ssd": pool})
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    s.clock.advance(100)
    second = scrape(scraper, config)
    assert value(second, "mssql_exporter_collector_success", collector="ssd_pools") == 1
    assert value(second, "mssql_ssd_pool_rated_endurance_bytes", pool="tempdb-ssd") == 4 * 7000 * 10**12
    assert value(second, "mssql_ssd_pool_planned_lifetime_seconds", pool="tempdb-ssd") == 5 * 365.25 * 86400
    assert value(second, "mssql_ssd_pool_in_service_timestamp_seconds", pool="tempdb-ssd") == 1735689600
    key = {"pool": "tempdb-ssd", "source": "sqlserver"}
    rate = (
        value(second, "mssql_ssd_pool_written_bytes_total", **key)
        - value(first, "mssql_ssd_pool_written_bytes_total", **key)
    ) / 100
    assert rate == pytest.approx(235.8 * MB, rel=1e-4)
    # The projection the recording rules make, from first principles: 235.8e6 B/s for 5 x 365.25 days
    # against 28e15 B is 1.329 of the rated endurance: these drives wear out before the planned life ends.
    share = rate * 5 * 365.25 * 86400 / (4 * 7000 * 10**12)
    assert share == pytest.approx(1.329, abs=0.001)
    assert not [
        k for k in second if k[0] == "mssql_ssd_pool_written_bytes_total" and ("source", "host") in k[1]
    ]


def _pool(*volumes: str) -> dict:
    return {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-01-01",
        "volumes": list(volumes),
    }


def test_pool_volumes_hold_the_directories_below_them(offline_standin, scraper_for, caplog):
    s = offline_standin("tempdb-separate-volume")
    # Linux, not co-located, no volume_map: the files' volumes are their directories.
    pools = {
        "mssql": _pool("/var/opt/mssql"),  # the mount point that holds .../data (and .../tempdb)
        "tempdb": _pool(TEMPDB_VOLUME),  # the longer prefix wins: tempdb counts here only
        "typo": _pool("/var/opt/mss"),  # not a path boundary: holds nothing
    }
    config = s.config(ssd_pools=pools)
    scraper = scraper_for(config)
    for _ in range(3):
        got = scrape(scraper, config)
        s.clock.advance(10)
    assert value(got, "mssql_exporter_collector_success", collector="ssd_pools") == 1
    data = total(got, "mssql_volume_written_bytes_total", volume=DATA_VOLUME)
    tempdb = total(got, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME)
    assert data > 0 and tempdb > 0
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="mssql", source="sqlserver") == data
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="tempdb", source="sqlserver") == tempdb
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="typo", source="sqlserver") == 0
    # The pool volume that holds nothing is named, once for the one refresh these scrapes made.
    warned = [
        r for r in caplog.records if r.getMessage().startswith("ssd pool volume holds no database file")
    ]
    assert [(r.target, r.pool, r.volume) for r in warned] == [("standin", "typo", "/var/opt/mss")]


def test_windows_pool_volumes_ignore_case_but_not_mount_folders_below_them(
    offline_standin, scraper_for, caplog
):
    s = offline_standin("windows-mount-folders")
    pools = {"ssd": _pool("D:\\MNT\\SSD\\"), "d-drive": _pool("D:\\")}
    config = s.config(ssd_pools=pools)
    scraper = scraper_for(config)
    for _ in range(3):
        got = scrape(scraper, config)
        s.clock.advance(10)
    mount = total(got, "mssql_volume_written_bytes_total", volume="D:\\mnt\\ssd\\")
    assert mount > 0
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="ssd", source="sqlserver") == mount
    # D:\mnt\ssd\ is a volume of its own, mounted in a folder of D:; its writes are not D:'s.
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="d-drive", source="sqlserver") == 0
    warned = {r.pool for r in caplog.records if r.getMessage().startswith("ssd pool volume holds no")}
    assert warned == {"d-drive"}


def test_pmem_volume_holds_the_data_directory_below_it(offline_standin, scraper_for):
    s = offline_standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"])  # files in /mnt/pmem0/data, no volume_map
    got = scrape(scraper_for(config), config)
    assert {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")} >= {
        "/mnt/pmem0/data"
    }
    page = 8192
    expected = 2 * (204800 * MB // page) * page
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == expected


def test_ssd_pools_fail_with_volumes_instead_of_repeating_the_last_totals(offline_standin, scraper_for):
    s = offline_standin("tempdb-separate-volume")
    config = s.config(
        volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME}, ssd_pools={"tempdb-ssd": _pool(TEMPDB_VOLUME)}
    )
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    assert value(first, "mssql_exporter_collector_success", collector="ssd_pools") == 1
    # The next refresh of the file list no longer shows database 5 (VIEW ANY DEFINITION revoked), so the
    # volume totals cannot be complete this scrape.
    s.instance.scenario.files.hidden_from_master_files = {5}
    scraper._states["standin"].next_slow_at = 0.0
    s.clock.advance(10)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="volumes") == 0
    assert value(got, "mssql_exporter_collector_success", collector="ssd_pools") == 0
    assert not series(got, "mssql_ssd_pool_written_bytes_total")
    assert not series(got, "mssql_ssd_pool_rated_endurance_bytes")
