"""The volumes collector (the file I/O counters summed per volume and file type, totals that survive files
going away and restarts): its facts, from the stand-in's rows in process."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import scrape, value
from tests.file_figures import DATA_VOLUME, MB, TEMPDB_VOLUME, series, total

IO_SIZE = 65536  # the stand-in counts one I/O per 64 KiB, as SQL Server's extent-sized I/O


def test_reads_writes_and_stalls_per_volume_and_file_type(offline_standin, scraper_for):
    """Issue 17: latency and I/O size for every volume, not only tempdb. The scenario's user databases
    (sales, stock) read 5 MB/s each on /var/opt/mssql/data; tempdb's eight data files each write
    2.45 MB/s, read 2.25 MB/s and stall 40 ms per second writing and 25 ms reading."""
    s = offline_standin("tempdb-separate-volume")
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
def test_micron_table_4_write_rates_replay(offline_standin, scraper_for, scenario, rate_mb_s, memory_gib):
    s = offline_standin(scenario)
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


def test_volume_writes_never_decrease_when_databases_go_away(offline_standin, scraper_for):
    s = offline_standin("databases-dropped")
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


def test_database_back_online_with_its_counters_counts_only_what_is_new(offline_standin, scraper_for):
    import dataclasses

    s = offline_standin("databases-dropped")
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


def test_restart_resets_file_counters_without_losing_volume_totals(offline_standin, scraper_for):
    s = offline_standin("tempdb-separate-volume")
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


@pytest.mark.parametrize("step_seconds", [-3600, 3600])
def test_a_clock_step_on_the_server_is_not_a_restart(offline_standin, scraper_for, step_seconds):
    s = offline_standin("tempdb-separate-volume")
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


def test_restart_counted_even_when_no_counter_went_down(offline_standin, scraper_for):
    s = offline_standin("tempdb-separate-volume")
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


def test_exporter_restart_starts_totals_from_zero(offline_standin, scraper_for):
    s = offline_standin("tempdb-separate-volume")
    config = s.config(volume_map={TEMPDB_VOLUME: TEMPDB_VOLUME})
    s.clock.advance(500)  # SQL Server has been writing for a while before this exporter starts
    got = scrape(scraper_for(config), config)
    # A baseline, so a restarted exporter reads to Prometheus as a counter reset and rate() counts no
    # byte twice (the previous exporter already counted these).
    assert value(got, "mssql_volume_written_bytes_total", volume=TEMPDB_VOLUME, file_type="data") == 0
    # SQL Server's own per-file counters are exported as they are.
    assert value(got, "mssql_tempdb_file_written_bytes_total", file="templog", volume=TEMPDB_VOLUME) > 0


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
