"""tempdb, volumes, Hybrid Buffer Pool and Buffer Pool Extension through the stand-in over TDS."""

from __future__ import annotations

import itertools
import re

import pytest

from tests.conftest import scrape, value

TEMPDB_VOLUME = "/var/opt/mssql/tempdb"
DATA_VOLUME = "/var/opt/mssql/data"
MB = 1_000_000
# A per-directory volume lookup (the batch's tempdb_volumes section applies the function to tempdb's files
# by column, every scrape, and is not one).
LOOKUP = re.compile(r"dm_os_volume_stats\(\d+, \d+\)")


def series(samples: dict, name: str) -> dict[tuple, float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def total(samples: dict, name: str, **match: str) -> float:
    return sum(
        v for labels, v in series(samples, name).items() if all((k, m) in labels for k, m in match.items())
    )


def test_tempdb_files_on_their_own_volume(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    assert value(first, "mssql_exporter_collector_success", collector="tempdb") == 1
    s.clock.advance(10)
    second = scrape(scraper, config)
    files = series(second, "mssql_tempdb_file_written_bytes_total")
    assert len(files) == 9  # 8 data files and the log, each its own series
    assert {dict(labels)["volume"] for labels in files} == {TEMPDB_VOLUME}
    assert (
        value(second, "mssql_tempdb_file_written_bytes_total", file="templog", volume=TEMPDB_VOLUME)
        == 0.02 * 20 * MB * 10
    )
    written = total(second, "mssql_tempdb_file_written_bytes_total") - total(
        first, "mssql_tempdb_file_written_bytes_total"
    )
    assert written == pytest.approx(20 * MB * 10, rel=1e-6)
    # Stall times arrive in ms and are exported in seconds: 40 ms per second for 10 s is 0.4 s.
    assert (
        value(second, "mssql_tempdb_file_write_stall_seconds_total", file="tempdev", volume=TEMPDB_VOLUME)
        == 0.4
    )
    reads = value(second, "mssql_tempdb_file_read_bytes_total", file="tempdev", volume=TEMPDB_VOLUME)
    assert (
        value(second, "mssql_tempdb_file_reads_total", file="tempdev", volume=TEMPDB_VOLUME) == reads // 65536
    )
    # Without a map, a Linux file's volume is its directory (SQL Server on Linux reports no mount point).
    assert (
        value(second, "mssql_volume_written_bytes_total", volume="/var/opt/mssql/data", file_type="data") > 0
    )
    assert value(second, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME, file_type="log") > 0


IO_SIZE = 65536  # the stand-in counts one I/O per 64 KiB, as SQL Server's extent-sized I/O


def test_reads_writes_and_stalls_per_volume_and_file_type(standin, scraper_for):
    """Issue 17: latency and I/O size for every volume, not only tempdb. The scenario's user databases
    (sales, stock) read 5 MB/s each on /var/opt/mssql/data; tempdb's eight data files each write
    2.45 MB/s, read 2.25 MB/s and stall 40 ms per second writing and 25 ms reading."""
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    s.clock.advance(100)
    first = scrape(scraper, config)  # the baseline: every series starts at 0
    s.clock.advance(10)
    second = scrape(scraper, config)

    def grew(name: str, volume: str, file_type: str) -> float:
        key = {"volume": volume, "file_type": file_type}
        return value(second, name, **key) - value(first, name, **key)

    tempdb_data = (TEMPDB_VOLUME, "data")
    assert grew("mssql_volume_write_stall_seconds_total", *tempdb_data) == pytest.approx(8 * 0.040 * 10)
    assert grew("mssql_volume_read_stall_seconds_total", *tempdb_data) == pytest.approx(8 * 0.025 * 10)
    assert grew("mssql_volume_read_bytes_total", *tempdb_data) == pytest.approx(8 * 2.25 * MB * 10)
    # Operations are counted per file in whole 64 KiB I/Os: each file's count at 110 s less at 100 s.
    per_file_reads = int(2.25 * MB * 110) // IO_SIZE - int(2.25 * MB * 100) // IO_SIZE
    assert grew("mssql_volume_reads_total", *tempdb_data) == 8 * per_file_reads
    per_file_writes = int(2.45 * MB * 110) // IO_SIZE - int(2.45 * MB * 100) // IO_SIZE
    assert grew("mssql_volume_writes_total", *tempdb_data) == 8 * per_file_writes
    # The user databases' data files read 5 MB/s each and stall nowhere in this scenario.
    assert grew("mssql_volume_read_bytes_total", DATA_VOLUME, "data") == pytest.approx(2 * 5 * MB * 10)
    assert grew("mssql_volume_read_stall_seconds_total", DATA_VOLUME, "data") == 0
    # Average latency and I/O size, as a rule computes them from these series.
    latency = grew("mssql_volume_write_stall_seconds_total", *tempdb_data) / grew(
        "mssql_volume_writes_total", *tempdb_data
    )
    assert latency == pytest.approx(8 * 0.040 * 10 / (8 * per_file_writes))
    # Per volume and file type only: 2 volumes x 2 file types, however many files.
    for name in ("mssql_volume_reads_total", "mssql_volume_read_stall_seconds_total"):
        assert len(series(second, name)) == 4


@pytest.mark.parametrize(
    ("scenario", "rate_mb_s", "memory_gib"),
    [("micron-512gb-8stream", 124.1, 512), ("micron-960gb-8stream", 235.8, 960)],
)
def test_micron_table_4_write_rates_replay(standin, scraper_for, scenario, rate_mb_s, memory_gib):
    s = standin(scenario)
    assert s.instance.scenario.workload == "olap"
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME}, workload=s.instance.scenario.workload)
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    # Micron's server: SQL Server 2019, two sockets, the memory of the Table 4 row, analytics.
    assert value(first, "mssql_target_info", workload="olap") == 1
    assert value(first, "mssql_memory_target_bytes") == memory_gib * 2**30
    assert value(first, "mssql_memory_total_bytes") == memory_gib * 2**30
    assert {dict(k[1])["version"] for k in first if k[0] == "mssql_build_info"} == {"15.0.4375.4"}
    nodes = {dict(labels)["node"] for labels in series(first, "mssql_buffer_node_database_pages")}
    assert nodes == {"0", "1"}
    s.clock.advance(60)
    second = scrape(scraper, config)
    per_second = (
        total(second, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME)
        - total(first, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME)
    ) / 60
    assert per_second == pytest.approx(rate_mb_s * MB, rel=1e-4)


VOLUME_COUNTERS = (
    "mssql_volume_writes_total",
    "mssql_volume_write_stall_seconds_total",
    "mssql_volume_read_bytes_total",
    "mssql_volume_reads_total",
    "mssql_volume_read_stall_seconds_total",
)


def _dropped_history(s, scraper, config) -> tuple[list[float], list[float], dict, dict[str, list[float]]]:
    data: list[float] = []
    log: list[float] = []
    other: dict[str, list[float]] = {name: [] for name in VOLUME_COUNTERS}
    for _ in range(8):  # scenario time 0..70 s
        got = scrape(scraper, config)
        assert value(got, "mssql_exporter_collector_success", collector="volumes") == 1
        data.append(value(got, "mssql_volume_written_bytes_total", volume=DATA_VOLUME, file_type="data"))
        log.append(value(got, "mssql_volume_written_bytes_total", volume=DATA_VOLUME, file_type="log"))
        for name in VOLUME_COUNTERS:
            other[name].append(value(got, name, volume=DATA_VOLUME, file_type="data"))
        s.clock.advance(10)
    for name, history in other.items():  # every counter kept the way the written bytes are
        assert all(b >= a for a, b in itertools.pairwise(history)), (name, history)
    assert all(b >= a for a, b in itertools.pairwise(data)), data
    assert all(b >= a for a, b in itertools.pairwise(log)), log
    return data, log, got, other


def test_volume_writes_never_decrease_when_databases_go_away(standin, scraper_for):
    s = standin("databases-dropped")
    config = s.config()
    scraper = scraper_for(config)
    data, log, got, other = _dropped_history(s, scraper, config)
    system = 0.01 * MB * 10  # master's data file, and its log, in 10 s
    # Reads are kept the same way: five databases read 5 MB/s until t=30, two from then, three from t=50.
    read = other["mssql_volume_read_bytes_total"]
    assert [b - a for a, b in itertools.pairwise(read)][1:] == pytest.approx(
        [5 * 50 * MB, 2 * 50 * MB, 2 * 50 * MB, 2 * 50 * MB, 3 * 50 * MB, 3 * 50 * MB], rel=1e-6
    )
    # Five databases at 2 MB/s (logs 0.5 MB/s) until t=30, when app0 and app1 are dropped and app2 goes
    # offline; what they wrote after the last scrape before that went with their counters.
    assert data[2] - data[1] == pytest.approx(5 * 20 * MB + system, rel=1e-6)
    assert log[2] - log[1] == pytest.approx(5 * 5 * MB + system, rel=1e-6)
    assert data[3] - data[2] == pytest.approx(2 * 20 * MB + system, rel=1e-6)
    assert log[3] - log[2] == pytest.approx(2 * 5 * MB + system, rel=1e-6)
    assert data[4] - data[3] == pytest.approx(2 * 20 * MB + system, rel=1e-6)
    # app2 is back at t=50 with counters that started again from 0: nothing is counted twice...
    assert data[5] - data[4] == pytest.approx(2 * 20 * MB + system, rel=1e-6)
    assert log[5] - log[4] == pytest.approx(2 * 5 * MB + system, rel=1e-6)
    # ...and from then on it counts again.
    assert data[7] - data[6] == pytest.approx(3 * 20 * MB + system, rel=1e-6)
    assert log[7] - log[6] == pytest.approx(3 * 5 * MB + system, rel=1e-6)
    # (volume, file_type) pairs only: the dropped databases leave no series of their own behind
    assert len(series(got, "mssql_volume_written_bytes_total")) == 4
    # The offline database stayed in sys.master_files, so nothing looked unnamed: one read of the names.
    assert len([sql for sql in s.handler.sql_seen if "sys.master_files" in sql]) == 1


def test_database_back_online_with_its_counters_counts_only_what_is_new(standin, scraper_for):
    import dataclasses

    s = standin("databases-dropped")
    model = s.instance.scenario.files
    model.databases = [
        dataclasses.replace(d, offline_keeps_counters=True) if d.name == "app2" else d
        for d in model.databases
    ]
    config = s.config()
    scraper = scraper_for(config)
    data, log, _, _ = _dropped_history(s, scraper, config)
    system = 0.01 * MB * 10
    # Back at t=50, app2's counter carries on: what it wrote between the t=20 scrape and going offline
    # (20 MB) is counted then, and not the 40 MB counted before a second time.
    assert data[5] - data[4] == pytest.approx(2 * 20 * MB + 20 * MB + system, rel=1e-6)
    assert log[5] - log[4] == pytest.approx(2 * 5 * MB + 5 * MB + system, rel=1e-6)
    assert data[7] - data[6] == pytest.approx(3 * 20 * MB + system, rel=1e-6)
    # Over the whole run, exactly what the surviving and returning databases' counters say, plus what
    # the dropped ones were seen writing before t=30 (2 x 40 MB).
    app2 = 2 * MB * (70 - 20)  # written while online, t=0..30 and t=50..70
    assert data[7] - data[0] == pytest.approx(2 * 140 * MB + app2 + 2 * 40 * MB + 7 * system, rel=1e-6)


def test_restart_resets_file_counters_without_losing_volume_totals(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    scrape(scraper, config)  # the exporter's first scrape is its baseline: the totals start at 0
    s.clock.advance(100)
    before = scrape(scraper, config)
    s.clock.advance(5)
    s.instance.restart()
    s.clock.advance(10)
    after = scrape(scraper, config)
    key = {"volume": TEMPDB_VOLUME, "file_type": "data"}
    # 100 s seen before the restart plus the 10 s after it, none counted twice. The 5 s between the last
    # scrape and the restart died with the counters: nobody can see them.
    assert value(after, "mssql_volume_written_bytes_total", **key) == pytest.approx(
        value(before, "mssql_volume_written_bytes_total", **key) * 110 / 100, rel=1e-6
    )
    # SQL Server's own per-file counters did reset, and the tempdb series say so.
    assert total(after, "mssql_tempdb_file_written_bytes_total") < total(
        before, "mssql_tempdb_file_written_bytes_total"
    )


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


def test_hybrid_buffer_pool_on_a_dax_volume(standin, scraper_for):
    s = standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 1
    assert value(got, "mssql_hybrid_buffer_pool_enabled") == 1
    # The database-level switch is on by default: every database but archive (master, tempdb, sales,
    # stock, reports), whether or not its files are on PMEM.
    assert value(got, "mssql_hybrid_buffer_pool_databases") == 5
    # Only sales and stock data files count: 2 x 204,800 MB (sizes are whole 8 KiB pages). archive's data
    # file is on PMEM with the switch off; reports has it on, with its data file off PMEM; the logs on
    # PMEM are not data files.
    page = 8192
    expected = 2 * (204800 * MB // page) * page
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == expected


def test_hybrid_buffer_pool_databases_are_read_with_the_file_list_not_every_scrape(standin, scraper_for):
    s = standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    s.clock.advance(15)
    second = scrape(scraper, config)  # not a refresh: volume_refresh_seconds has not passed
    batches = [sql for sql in s.handler.sql_seen if "N'perf'" in sql]
    assert len(batches) == 2 and "is_memory_optimized_enabled" in batches[0]
    assert "is_memory_optimized_enabled" not in batches[1]
    for got in (first, second):
        assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
        assert value(got, "mssql_hybrid_buffer_pool_databases") == 5
    eligible = "mssql_hybrid_buffer_pool_eligible_bytes"
    assert value(second, eligible, volume="/mnt/pmem0") == value(first, eligible, volume="/mnt/pmem0") > 0


def test_hybrid_buffer_pool_absent_before_2019_is_not_a_failure(standin, scraper_for):
    s = standin("named-instance-padded")  # 15.x has the view; make it an older server
    s.instance.scenario.properties["ProductVersion"] = "14.0.3456.2"
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 0
    assert value(got, "mssql_hybrid_buffer_pool_databases") == 0


def test_buffer_pool_extension_state_and_counters(standin, scraper_for):
    from tests.standin.scenario import CounterSpec

    s = standin("healthy-oltp")
    s.instance.scenario.files.bpe = {"path": "E:\\bpe\\ext.BPE", "size_kb": 33554432}
    buffer_manager = s.instance.scenario.counters["Buffer Manager"]
    buffer_manager["Extension page reads/sec"] = CounterSpec.parse({"rate": 300}, "test")
    buffer_manager["Extension page writes/sec"] = CounterSpec.parse({"rate": 120}, "test")
    buffer_manager["Extension allocated pages"] = CounterSpec.parse(4000000, "test")
    config = s.config()
    s.clock.advance(10)
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_buffer_pool_extension_enabled") == 1
    assert value(got, "mssql_buffer_pool_extension_size_bytes") == 33554432 * 1024
    assert value(got, "mssql_buffer_pool_extension_page_reads_total") == 3000
    assert value(got, "mssql_buffer_pool_extension_page_writes_total") == 1200
    assert value(got, "mssql_buffer_pool_extension_allocated_pages") == 4000000


def test_file_stats_denied_fails_only_the_file_collectors(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    s.instance.denied.add("sys.dm_io_virtual_file_stats")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb") == 0
    assert value(got, "mssql_exporter_collector_success", collector="volumes") == 0
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1
    assert not series(got, "mssql_volume_written_bytes_total")


def test_ssd_pool_endurance_metrics_from_sql_server_writes(standin, scraper_for):
    s = standin("micron-960gb-8stream")
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


def test_colocated_target_uses_host_mounts_dax_and_disk_counters(standin, scraper_for, tmp_path):
    from mssql_memory_exporter.host.collector import DiskIO, HostCollector

    from tests.test_host import build_dev, build_server_sys

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


@pytest.mark.parametrize("step_seconds", [-3600, 3600])
def test_a_clock_step_on_the_server_is_not_a_restart(standin, scraper_for, step_seconds):
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    key = {"volume": TEMPDB_VOLUME, "file_type": "data"}
    scrape(scraper, config)
    s.clock.advance(10)
    first = scrape(scraper, config)
    before = value(first, "mssql_volume_written_bytes_total", **key)
    s.clock.wall_origin += step_seconds  # the server's clock is stepped an hour; nothing restarted
    s.clock.advance(10)
    got = scrape(scraper, config)
    # The start time SQL Server reports moves with its clock...
    assert value(got, "mssql_start_time_seconds") - value(first, "mssql_start_time_seconds") == step_seconds
    after = value(got, "mssql_volume_written_bytes_total", **key)
    assert after - before == pytest.approx(19.6 * MB * 10, rel=1e-6)  # ten more seconds, not everything again


def test_restart_counted_even_when_no_counter_went_down(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    scraper = scraper_for(config)
    key = {"volume": TEMPDB_VOLUME, "file_type": "data"}
    scrape(scraper, config)  # baseline
    s.clock.advance(10)
    before = scrape(scraper, config)
    s.instance.restart()
    s.clock.advance(30)  # every file has written more since the restart than before it was scraped
    after = scrape(scraper, config)
    assert value(after, "mssql_start_time_seconds") > value(before, "mssql_start_time_seconds")
    assert value(
        after, "mssql_tempdb_file_written_bytes_total", file="tempdev", volume=TEMPDB_VOLUME
    ) > value(before, "mssql_tempdb_file_written_bytes_total", file="tempdev", volume=TEMPDB_VOLUME)
    # 10 s before the restart and all 30 s after it; taking the difference would have counted 20 s.
    assert value(after, "mssql_volume_written_bytes_total", **key) == pytest.approx(
        19.6 * MB * (10 + 30), rel=1e-6
    )


def test_vanished_file_back_without_a_reset_is_not_counted_twice():
    from mssql_memory_exporter.collectors.volumes import VANISHED_KEEP_SECONDS, IoAccumulator

    def place(_key):
        return "/data", "data"

    acc = IoAccumulator(width=1)
    tick = 1000  # SQL Server's start tick: the same instance throughout
    steps = [({(5, 1): (1000,)}, 0.0), ({(5, 1): (2000,)}, 60.0), ({}, 120.0), ({(5, 1): (3000,)}, 180.0)]
    history = []
    for readings, now in steps:
        acc.update(readings, tick, place, now=now)
        history.append(acc.totals().get(("/data", "data"), (0,))[0])
    # From the 1000 baseline the file wrote 2000 more; the missing scrape changes nothing.
    assert history == [0, 1000, 1000, 2000]
    # Gone longer than it is kept: forgotten (its bytes stay with the volume), counted in full if back.
    acc.update({}, tick, place, now=200.0)
    acc.update({}, tick, place, now=200.0 + VANISHED_KEEP_SECONDS + 1)
    assert not acc.vanished and acc.totals()[("/data", "data")] == (2000,)
    acc.update({(5, 1): (3500,)}, tick, place, now=300.0 + VANISHED_KEEP_SECONDS)
    assert acc.totals()[("/data", "data")] == (5500,)


def test_restart_while_a_file_is_away_counts_its_new_counter_in_full():
    from mssql_memory_exporter.collectors.volumes import IoAccumulator

    def place(_key):
        return "/data", "data"

    acc = IoAccumulator(width=1)
    acc.update({(5, 1): (1000,), (1, 1): (10,)}, 1000, place, now=0.0)
    acc.update({(5, 1): (2000,), (1, 1): (20,)}, 1000, place, now=60.0)
    acc.update({(1, 1): (5,)}, 9000, place, now=120.0)  # restarted; database 5 not open yet
    acc.update({(5, 1): (2500,), (1, 1): (15,)}, 9000, place, now=180.0)  # back, counter since the restart
    assert acc.totals()[("/data", "data")] == (1000 + 10 + 5 + 10 + 2500,)


def test_exporter_restart_starts_totals_from_zero(standin, scraper_for):
    s = standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    s.clock.advance(500)  # SQL Server has been writing for a while before this exporter starts
    got = scrape(scraper_for(config), config)
    # A baseline, so a restarted exporter reads to Prometheus as a counter reset and rate() counts no
    # byte twice (the previous exporter already counted these).
    assert value(got, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME, file_type="data") == 0
    # SQL Server's own per-file counters are exported as they are.
    assert value(got, "mssql_tempdb_file_written_bytes_total", file="templog", volume=TEMPDB_VOLUME) > 0


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


def test_hybrid_buffer_pool_off_at_server_level_serves_nothing(standin, scraper_for):
    s = standin("hbp-dax")
    s.instance.scenario.files.hbp = {"configured": 1, "enabled": 0}  # configured, awaiting a restart
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 1
    assert value(got, "mssql_hybrid_buffer_pool_enabled") == 0
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == 0


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
    from mssql_memory_exporter.batch import ERROR_TAG, ResultSet, route
    from mssql_memory_exporter.collectors.base import Section

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


def _pool(*volumes: str) -> dict:
    return {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2025-01-01",
        "volumes": list(volumes),
    }


def test_pool_volumes_hold_the_directories_below_them(standin, scraper_for, caplog):
    s = standin("tempdb-separate-volume")
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


def test_windows_pool_volumes_ignore_case_but_not_mount_folders_below_them(standin, scraper_for, caplog):
    s = standin("windows-mount-folders")
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


def test_pmem_volume_holds_the_data_directory_below_it(standin, scraper_for):
    s = standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"])  # files in /mnt/pmem0/data, no volume_map
    got = scrape(scraper_for(config), config)
    assert {dict(labels)["volume"] for labels in series(got, "mssql_volume_written_bytes_total")} >= {
        "/mnt/pmem0/data"
    }
    page = 8192
    expected = 2 * (204800 * MB // page) * page
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == expected


def test_ssd_pools_fail_with_volumes_instead_of_repeating_the_last_totals(standin, scraper_for):
    s = standin("tempdb-separate-volume")
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


def test_a_file_placed_late_or_relabelled_keeps_every_counter_where_it_was_counted():
    from mssql_memory_exporter.collectors.volumes import IoAccumulator

    where: dict[tuple[int, int], str | None] = {(5, 1): None}

    def place(key):
        return where[key], "data"

    acc = IoAccumulator(width=2)
    acc.update({(5, 1): (10, 100)}, 1, place, generation=1, now=0.0)  # the baseline, volume not known yet
    acc.update({(5, 1): (15, 160)}, 1, place, generation=1, now=15.0)
    assert acc.totals() == {}  # no label, no series: what it did waits for one
    where[(5, 1)] = "D:\\mnt\\ssd\\"
    acc.update({(5, 1): (18, 200)}, 1, place, generation=2, now=30.0)
    assert acc.totals() == {("D:\\mnt\\ssd\\", "data"): (8, 100)}  # everything since the baseline
    where[(5, 1)] = "D:\\"  # relabelled (a volume_map edit): new growth counts under the new label
    acc.update({(5, 1): (20, 210)}, 1, place, generation=3, now=45.0)
    assert acc.totals() == {("D:\\mnt\\ssd\\", "data"): (8, 100), ("D:\\", "data"): (2, 10)}
