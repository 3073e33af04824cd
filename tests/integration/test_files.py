"""The database file list the file collectors share (collectors/files.py: names on the slow cadence,
volume lookups, host mounts when colocated) and what a missing permission or an odd file does to all of
them, through the stand-in over TDS. Each file collector's own facts are in
tests/unit/test_collector_<name>.py (tempdb, volumes, ssd_pools, hybrid_buffer_pool,
buffer_pool_extension)."""

from __future__ import annotations

from tests.conftest import scrape, value
from tests.file_figures import LOOKUP, TEMPDB_VOLUME, series


def test_file_names_travel_on_the_slow_cadence_only(standin, scraper_for):
    s = standin("scale-5000-databases")
    config = s.config(volume_refresh_seconds=3600)
    scraper = scraper_for(config)
    for _ in range(4):
        assert value(scrape(scraper, config), "mssql_up") == 1
    with_names = [sql for sql in s.handler.sql_seen if "sys.master_files" in sql]
    assert len(with_names) == 1 and len(s.handler.sql_seen) == 4
    got = scrape(scraper, config)
    # 10,000 files, but the volume series stay bounded by volumes x file types (2 x 2 here).
    got_series = series(got, "mssql_volume_written_bytes_total")
    assert {dict(labels)["volume"] for labels in got_series} == {"/var/opt/mssql/data", TEMPDB_VOLUME}
    assert len(got_series) == 4


def test_windows_mount_folder_found_through_dm_os_volume_stats(standin, scraper_for):
    s = standin("windows-mount-folders")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.clock.advance(10)
    got = scrape(scraper, config)  # the second scrape carries the per-directory volume lookups
    volumes = {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")}
    assert volumes == {"C:\\", "T:\\", "D:\\mnt\\ssd\\", "E:\\mnt\\archive\\", "L:\\"}
    assert value(got, "mssql_tempdb_file_written_bytes_total", file="tempdev", volume="T:\\") > 0
    lookups = [sql for sql in s.handler.sql_seen if LOOKUP.search(sql)]
    # once per directory (5 directories hold the 8 files), in one batch
    assert len(lookups) == 1 and len(LOOKUP.findall(lookups[0])) == 5


def test_file_stats_denied_fails_only_the_file_collectors(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    s.instance.denied.add("sys.dm_io_virtual_file_stats")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb") == 0
    assert value(got, "mssql_exporter_collector_success", collector="volumes") == 0
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    assert not series(got, "mssql_volume_written_bytes_total")


def test_colocated_target_uses_host_mounts_dax_and_disk_counters(standin, scraper_for, tmp_path):
    from mssql_memory_exporter.host.collector import DiskIO, HostCollector

    from tests.unit.test_host import build_dev, build_server_sys

    fake = build_server_sys(tmp_path / "sys")
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw,relatime 0 0\n"
        "/dev/mapper/vg-lv /var/opt/mssql/tempdb xfs rw,noatime 0 0\n"
        "/dev/pmem0 /mnt/pmem0 ext4 rw,dax=always 0 0\n"
    )
    counters = {  # the kernel counts a write on every layer: partition, md, dm and each disk
        "sda": DiskIO(0, 5e9),
        "sda1": DiskIO(0, 5e9),
        "md0": DiskIO(0, 7e9),
        "dm-0": DiskIO(0, 7e9),
        "nvme0n1": DiskIO(0, 7e9),
        "nvme0n1p1": DiskIO(0, 7e9),
        "nvme1n1": DiskIO(0, 7e9),
        "nvme1n1p1": DiskIO(0, 7e9),
    }
    host = HostCollector(
        str(fake.root), str(mounts), dev_root=str(build_dev(tmp_path / "dev")), disk_io=lambda: counters
    )
    s = standin("hbp-dax")
    pool = {
        "drives": {"count": 2, "dwpd": 1, "capacity_tb": 3.84, "warranty_years": 5},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-06-01",
        "volumes": [TEMPDB_VOLUME],
        "host_disks": ["nvme0n1", "nvme1n1"],
    }
    config = s.config(colocated=True, ssd_pools={"tempdb-raid1": pool})
    scraper = scraper_for(config)
    scraper._host = host
    got = scrape(scraper, config)
    # Volumes come from the host's mount table, not the directory: tempdb's files sit on the LVM mount.
    assert {dict(labels)["volume"] for labels in series(got, "mssql_tempdb_file_written_bytes_total")} == {
        TEMPDB_VOLUME
    }
    # tempdb's free space comes from SQL Server, under the host's label; the mount is a real volume, so
    # the system volume fact can be told (not on /).
    assert {dict(labels)["volume"] for labels in series(got, "mssql_tempdb_volume_free_bytes")} == {
        TEMPDB_VOLUME
    }
    assert value(got, "mssql_tempdb_system_volume_files") == 0
    # DAX is read from the mount options: no pmem_volumes in the config.
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") > 0
    # RAID1: each mirror wears, so the host source counts both members; partitions and md/dm add nothing.
    assert value(got, "mssql_ssd_pool_written_bytes_total", pool="tempdb-raid1", source="host") == 14e9
    assert value(got, "mssql_ssd_pool_rated_endurance_bytes", pool="tempdb-raid1") == 2 * 3.84e12 * 365 * 5


def test_files_hidden_by_missing_view_any_definition_fail_loudly(standin, scraper_for, caplog):
    s = standin("tempdb-separate-volume")
    s.instance.scenario.files.hidden_from_master_files = {5, 6}  # the user databases
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="volumes") == 0
    assert value(got, "mssql_exporter_collector_success", collector="tempdb") == 1  # its files are visible
    assert any("VIEW ANY DEFINITION" in str(getattr(r, "err", "")) for r in caplog.records)
    for _ in range(3):  # and it does not re-read every file name on every scrape to find them
        scrape(scraper, config)
    assert len([sql for sql in s.handler.sql_seen if "sys.master_files" in sql]) == 1


def test_refused_volume_lookup_is_not_retried_every_scrape(standin, scraper_for, caplog):
    s = standin("windows-mount-folders")
    s.instance.denied.add("sys.dm_os_volume_stats")
    config = s.config()
    scraper = scraper_for(config)
    for _ in range(5):
        got = scrape(scraper, config)
        s.clock.advance(10)
    assert len([sql for sql in s.handler.sql_seen if LOOKUP.search(sql)]) == 1
    assert len([sql for sql in s.handler.sql_seen if "sys.master_files" in sql]) == 2  # refresh + lookups
    # Without the lookup, files keep their drive root: D:\ instead of the mount folder.
    volumes = {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")}
    assert volumes == {"C:\\", "T:\\", "D:\\", "E:\\", "L:\\"}
    assert any(r.getMessage().startswith("volume lookup failed") for r in caplog.records)


def test_resource_database_counters_do_not_fail_the_file_collectors(standin, scraper_for, caplog):
    s = standin("tempdb-separate-volume")
    # As on every real server: the function reports the hidden resource database, sys.master_files never.
    io_ids = {r["database_id"] for r in s.instance.rows("sys.dm_io_virtual_file_stats", [None, None])}
    named_ids = {r["database_id"] for r in s.instance.rows("sys.master_files", [])}
    assert 32767 in io_ids and 32767 not in named_ids
    pool = {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-01-01",
        "volumes": [TEMPDB_VOLUME],
    }
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME}, ssd_pools={"tempdb-ssd": pool})
    scraper = scraper_for(config)
    for _ in range(3):
        got = scrape(scraper, config)
        s.clock.advance(10)
        for collector in ("tempdb", "volumes", "ssd_pools"):
            assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    assert not any("VIEW ANY DEFINITION" in str(getattr(r, "err", "")) for r in caplog.records)
    # only once, with the first scrape: the names are not asked for again and again
    assert len([sql for sql in s.handler.sql_seen if "sys.master_files" in sql]) == 1


def _lookup_batches(s) -> list[int]:
    """Per batch that carried volume lookups, how many."""
    return [len(LOOKUP.findall(sql)) for sql in s.handler.sql_seen if LOOKUP.search(sql)]


def test_one_directory_failing_its_volume_lookup_fails_only_that_directory(standin, scraper_for, caplog):
    s = standin("windows-mount-folders")
    s.instance.scenario.files.volume_lookup_fails = ["E:\\mnt\\"]  # E:'s mount folder cannot be read
    config = s.config()
    scraper = scraper_for(config)
    for _ in range(6):
        got = scrape(scraper, config)
        # A failed lookup is that directory's answer, not a malformed batch: the target stays up.
        assert value(got, "mssql_up") == 1
        assert value(got, "mssql_exporter_collector_success", collector="volumes") == 1
        s.clock.advance(10)
    volumes = {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")}
    # The directories that answered have their mount points; the failed one keeps its drive root.
    assert volumes == {"C:\\", "T:\\", "D:\\mnt\\ssd\\", "E:\\", "L:\\"}
    assert value(got, "mssql_volume_written_bytes_total", volume="E:\\", file_type="data") > 0
    assert value(got, "mssql_tempdb_file_written_bytes_total", file="tempdev", volume="T:\\") > 0
    # Asked once, and not again every scrape (the refresh interval is 300 s).
    assert _lookup_batches(s) == [5]
    failures = [r for r in caplog.records if r.getMessage().startswith("volume lookup failed")]
    assert len(failures) == 1
    assert failures[0].directory == "e:\\mnt\\archive\\data" and failures[0].err.startswith("3634:")

    # Five minutes on, with the next regular refresh, only the failed directory is asked again; the
    # device is back, so its files move to their mount folder.
    state = scraper._states["standin"]
    failed = state.memo["file_catalog"].lookups_failed
    for directory in failed:
        failed[directory] -= 300
    state.next_slow_at = 0.0
    s.instance.scenario.files.volume_lookup_fails = []
    for _ in range(3):
        got = scrape(scraper, config)
        assert value(got, "mssql_up") == 1
        s.clock.advance(10)
    assert _lookup_batches(s) == [5, 1]
    volumes = {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")}
    assert "E:\\mnt\\archive\\" in volumes


def test_volume_lookups_are_capped_per_refresh(standin, scraper_for, monkeypatch):
    from mssql_memory_exporter.collectors import files

    monkeypatch.setattr(files, "MAX_VOLUME_LOOKUPS", 2)
    s = standin("windows-mount-folders")
    config = s.config()
    scraper = scraper_for(config)
    for _ in range(6):
        got = scrape(scraper, config)
        assert value(got, "mssql_up") == 1
        s.clock.advance(10)
    # 5 directories, at most 2 a batch: three refreshes in a row, then none.
    assert _lookup_batches(s) == [2, 2, 1]
    volumes = {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")}
    assert volumes == {"C:\\", "T:\\", "D:\\mnt\\ssd\\", "E:\\mnt\\archive\\", "L:\\"}


def test_a_section_error_followed_by_rows_of_the_same_tag_is_not_a_shape_error():
    from mssql_memory_exporter.collectors.base import Section
    from mssql_memory_exporter.connection.batch import ERROR_TAG, ResultSet, route

    lookup = Section(tag="volumes", sql="", may_be_empty=True)
    error = ResultSet(
        ("section", "failed_section", "error_number", "error_message"),
        [(ERROR_TAG, "volumes", 3634, "device not ready")],
    )
    rows = ResultSet(("section", "database_id", "file_id", "volume_mount_point"), [("volumes", 5, 1, "D:\\")])
    for order in ((error, rows), (rows, error)):
        got = route(order, [lookup])["volumes"]
        assert got.error is not None and got.error.number == 3634
        assert not got.has_rows()


