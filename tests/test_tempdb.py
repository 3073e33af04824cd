"""tempdb's space, growth and layout end to end (issue 17): Scraper -> FreeTDS -> stand-in and back.

Every expected figure is worked out here from the scenario's own numbers (sizes in MB of 10^6 bytes,
8 KiB pages, 64 MB autogrowth steps), never read back from the stand-in's model.
"""

from __future__ import annotations

import math

import pytest

from tests.conftest import scrape, value
from tests.standin.tempdb import SpaceSpec, TempdbModel

PAGE = 8192
MB = 1_000_000
TEMPDB = "/var/opt/mssql/tempdb"


def pages(mb: float) -> int:
    """What a size in MB is in SQL Server's 8 KiB pages, as sys.database_files counts it."""
    return int(mb * MB / PAGE)


def grown(startup_mb: float, step_mb: float, needed_mb: float) -> int:
    """Pages of a file that autogrew by whole steps until it held `needed_mb`."""
    start, step, needed = pages(startup_mb), pages(step_mb), pages(needed_mb)
    return start + max(0, math.ceil((needed - start) / step)) * step


def space(samples: dict, file: str, usage: str, volume: str = TEMPDB) -> float:
    labels = {"file": file, "file_type": "data", "volume": volume, "usage": usage}
    return value(samples, "mssql_tempdb_file_space_bytes", **labels)


def size(samples: dict, file: str, volume: str = TEMPDB, file_type: str = "data") -> float:
    return value(samples, "mssql_tempdb_file_size_bytes", file=file, file_type=file_type, volume=volume)


def scrape_at(s, scraper, config, t: float) -> dict:
    s.clock.advance(t - s.clock.now())
    got = scrape(scraper, config)
    for collector in ("tempdb_files", "tempdb_usage", "tempdb_volumes", "tempdb_log", "volumes"):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    return got


FILLING = ("tempdev", "temp2", "temp3", "temp4")


def test_filling_tempdb_version_store_grows_and_a_spill_grows_the_files_into_the_volume(standin, scraper_for):
    s = standin("tempdb-filling")
    config = s.config()
    scraper = scraper_for(config)
    volume_free = 20e9

    # t=600: each file holds 250 MB + 1 MB/s of version store, 100 MB user and internal objects, 20 MB
    # in mixed extents; nothing grew.
    got = scrape_at(s, scraper, config, 600)
    for f in FILLING:
        assert space(got, f, "version_store") == pages(850) * PAGE
        assert space(got, f, "internal_objects") == pages(100) * PAGE
        held = pages(850) + 2 * pages(100) + pages(20)
        assert space(got, f, "unallocated") == (pages(4000) - held) * PAGE
        assert size(got, f) == pages(4000) * PAGE
        startup = value(got, "mssql_tempdb_file_startup_size_bytes", file=f, file_type="data", volume=TEMPDB)
        assert startup == pages(4000) * PAGE
    assert value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB) == volume_free
    assert value(got, "mssql_tempdb_volume_size_bytes", volume=TEMPDB) == 40e9
    version_store_before = sum(space(got, f, "version_store") for f in FILLING)

    # t=1400, inside the spill: 3,000 MB of internal objects per file; 250 + 1400 + 100 + 3000 + 20 MB
    # no longer fit in 4,000 MB, so every file grew by 64 MB steps, taking the volume's free space.
    got = scrape_at(s, scraper, config, 1400)
    during = grown(4000, 64, 250 + 1400 + 100 + 3000 + 20)
    for f in FILLING:
        assert size(got, f) == during * PAGE
        assert space(got, f, "internal_objects") == pages(3000) * PAGE
    growth = 4 * (during - pages(4000)) * PAGE
    assert value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB) == volume_free - growth
    assert sum(space(got, f, "version_store") for f in FILLING) > version_store_before

    # t=2000, after the spill: the files keep the size they grew to (the peak just before t=1500), and
    # the room is back inside them, not on the volume.
    got = scrape_at(s, scraper, config, 2000)
    peak = grown(4000, 64, 250 + 1500 + 100 + 3000 + 20)
    held = pages(250 + 2000) + 2 * pages(100) + pages(20)
    for f in FILLING:
        assert size(got, f) == peak * PAGE
        assert space(got, f, "unallocated") == (peak - held) * PAGE
    assert (
        value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB)
        == volume_free - 4 * (peak - pages(4000)) * PAGE
    )
    # The log is not in tempdb.sys.dm_db_file_space_usage: it has a size, but no usage series.
    assert size(got, "templog", file_type="log") == pages(2000) * PAGE
    assert not any(
        name == "mssql_tempdb_file_space_bytes" and dict(labels)["file"] == "templog" for name, labels in got
    )
    # One volume series, however many files share the volume.
    assert len([1 for name, _ in got if name == "mssql_tempdb_volume_free_bytes"]) == 1


def test_a_badly_laid_out_tempdb_shows_in_its_layout_facts(standin, scraper_for):
    s = standin("tempdb-bad-layout")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.clock.advance(15)
    got = scrape(scraper, config)  # the second scrape has the Windows volume lookups' answers
    assert value(got, "mssql_logical_cpus") == 16
    assert value(got, "mssql_tempdb_data_files") == 1  # advice: min(16, 8) = 8
    assert value(got, "mssql_tempdb_percent_growth_files") == 2  # the data file and the log
    assert value(got, "mssql_tempdb_system_volume_files") == 2  # both on C:\
    labels = {"file": "tempdev", "file_type": "data", "volume": "C:\\"}
    assert value(got, "mssql_tempdb_file_growth_ratio", **labels) == 0.1
    assert ("mssql_tempdb_file_growth_bytes", tuple(sorted(labels.items()))) not in got
    assert value(got, "mssql_tempdb_file_max_size_unlimited", **labels) == 1
    assert ("mssql_tempdb_file_max_size_bytes", tuple(sorted(labels.items()))) not in got
    # One file is trivially equal to itself.
    assert value(got, "mssql_tempdb_data_files_equal_size") == 1
    assert value(got, "mssql_tempdb_data_files_equal_growth") == 1


def test_uneven_tempdb_files_are_not_equal_in_size_or_growth(standin, scraper_for):
    s = standin("tempdb-uneven-files")
    config = s.config()
    got = scrape_at(s, scraper_for(config), config, 60)
    assert value(got, "mssql_tempdb_data_files") == 4
    assert value(got, "mssql_tempdb_data_files_equal_size") == 0
    assert value(got, "mssql_tempdb_data_files_equal_growth") == 0
    assert size(got, "temp4") == pages(16000) * PAGE and size(got, "temp2") == pages(8000) * PAGE
    big = {"file": "temp4", "file_type": "data", "volume": TEMPDB}
    assert value(got, "mssql_tempdb_file_growth_bytes", **big) == pages(1024) * PAGE
    assert space(got, "temp4", "user_objects") == pages(1000) * PAGE
    assert space(got, "temp2", "user_objects") == pages(500) * PAGE


def test_autogrowth_stops_at_max_size_while_the_volume_has_room(standin, scraper_for):
    s = standin("tempdb-growth-capped")
    config = s.config()
    scraper = scraper_for(config)
    labels = {"file": "tempdev", "file_type": "data", "volume": TEMPDB}
    # Each file holds 100 + 100 + 1,000 + t + 20 MB.
    got = scrape_at(s, scraper, config, 3000)
    assert size(got, "tempdev") == grown(4000, 512, 1220 + 3000) * PAGE == (pages(4000) + pages(512)) * PAGE
    assert value(got, "mssql_tempdb_file_max_size_bytes", **labels) == pages(6000) * PAGE
    assert value(got, "mssql_tempdb_file_max_size_unlimited", **labels) == 0
    assert value(got, "mssql_tempdb_file_growth_bytes", **labels) == pages(512) * PAGE

    got = scrape_at(s, scraper, config, 5000)
    for f in ("tempdev", "temp2"):
        assert size(got, f) == pages(6000) * PAGE  # the last step stopped at max_size
        assert space(got, f, "unallocated") == 0  # full: 6,220 MB wanted, 6,000 MB allowed
    free = value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB)
    assert free == 500e9 - 2 * (pages(6000) - pages(4000)) * PAGE
    # The fixed-size log: growth 0, and a maximum equal to its size.
    log = {"file": "templog", "file_type": "log", "volume": TEMPDB}
    assert value(got, "mssql_tempdb_file_growth_bytes", **log) == 0
    assert value(got, "mssql_tempdb_file_max_size_bytes", **log) == pages(2000) * PAGE


@pytest.mark.parametrize(
    ("volume_map", "expected"),
    [
        ({}, None),  # a directory label says nothing about the file system: absent
        ({"/var/opt/mssql/data": "/"}, 3),  # tempdb's two data files and its log on the root file system
        ({"/var/opt/mssql/data": "/var/opt/mssql/data"}, 0),
    ],
)
def test_system_volume_fact_is_absent_unless_the_volume_is_known(standin, scraper_for, volume_map, expected):
    s = standin("healthy-oltp")
    config = s.config(volume_map=volume_map)
    got = scrape_at(s, scraper_for(config), config, 60)
    if expected is None:
        assert not any(name == "mssql_tempdb_system_volume_files" for name, _ in got)
    else:
        assert value(got, "mssql_tempdb_system_volume_files") == expected


def test_growth_settings_travel_on_the_slow_cadence_and_sizes_every_scrape(standin, scraper_for):
    s = standin("tempdb-filling")
    config = s.config()
    scraper = scraper_for(config)
    scrape_at(s, scraper, config, 60)
    for t in (75, 90, 1300):  # the spill at t=1300 grows the files; the settings stay where they were
        got = scrape_at(s, scraper, config, t)
    settings = [sql for sql in s.handler.sql_seen if "tempdb_settings" in sql]
    sizes = [sql for sql in s.handler.sql_seen if "tempdb_sizes" in sql]
    assert len(settings) == 1 and len(sizes) == 4
    assert size(got, "tempdev") > pages(4000) * PAGE  # read at t=1300, not kept from t=60
    assert value(got, "mssql_tempdb_file_growth_bytes", file="tempdev", file_type="data", volume=TEMPDB) == (
        pages(64) * PAGE
    )


def model(free_mb: float, first_holds_mb: float) -> TempdbModel:
    """Two 1,000 MB data files growing by 100 MB on one volume; the first holds `first_holds_mb` (user
    objects), the second 10 MB."""

    def spec(held: float) -> SpaceSpec:
        return SpaceSpec.parse({"growth_mb": 100, "usage": {"user_objects": held}}, "test")

    files = [
        (1, "/t/tempdev.mdf", 0, pages(1000), spec(first_holds_mb)),
        (3, "/t/temp2.ndf", 0, pages(1000), spec(10)),
    ]
    return TempdbModel(files, {"/t": {"total_gb": 10, "free_gb": free_mb / 1000}})


def test_the_stand_in_grows_every_data_file_at_once_or_none():
    """SQL Server grows all of tempdb's data files together (AUTOGROW_ALL_FILES, 2016 on), and the rules'
    growth room counts the volume's free space in whole such events: the stand-in must grow the same way."""
    # The first file needs 1,250 MB: three growths of both files (1,300 MB each), 600 MB of the volume.
    first, second = model(free_mb=1000, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000) + 3 * pages(100)
    assert first.unallocated_pages == pages(1000) + 3 * pages(100) - pages(1250)
    # 250 MB free: one growth (200 MB) fits, the second does not, so neither file takes its half of it.
    first, second = model(free_mb=250, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000) + pages(100)
    assert first.unallocated_pages == 0  # full: 1,250 MB wanted, 1,100 MB held
    assert first.held["user_objects"] == pages(1000) + pages(100)
    # 150 MB free: less than one growth of both files, although one file's step would fit.
    first, second = model(free_mb=150, first_holds_mb=1250).space(now=10, since=0)
    assert first.size_pages == second.size_pages == pages(1000)


# --------------------------------------------------------------------------- tempdb's log


def log_size(samples: dict) -> float:
    return value(samples, "mssql_tempdb_log_size_bytes")


def log_used(samples: dict) -> float:
    return value(samples, "mssql_tempdb_log_used_bytes")


def reuse_waits(samples: dict) -> dict[str, float]:
    """The reason label of every mssql_tempdb_log_reuse_wait series, with its value."""
    return {
        dict(labels)["reason"]: v
        for (name, labels), v in samples.items()
        if name == "mssql_tempdb_log_reuse_wait"
    }


def test_healthy_oltp_log_holds_a_steady_third_of_its_8_mb_and_waits_on_nothing(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    data = "/var/opt/mssql/data"
    for t in (60, 3600):  # steady: the same at both times, and the log never grows
        got = scrape_at(s, scraper, config, t)
        assert log_size(got) == pages(8) * PAGE == 976 * PAGE
        assert log_used(got) == pages(2.5) * PAGE == 305 * PAGE  # 31% of the log
        assert reuse_waits(got) == {"NOTHING": 1}
        # The log view and tempdb.sys.database_files agree on the log's size.
        assert size(got, "templog", volume=data, file_type="log") == log_size(got)


def test_filling_log_grows_by_whole_steps_into_the_volume_until_its_maximum(standin, scraper_for):
    """tempdb-filling's log: 2,000 MB, 64 MB steps up to 3,000 MB, on the data files' 20 GB-free volume;
    the never-ending transaction keeps 400 MB + 0.4 MB/s in it (ACTIVE_TRANSACTION)."""
    s = standin("tempdb-filling")
    config = s.config()
    scraper = scraper_for(config)
    step = pages(64)
    spill_peak = grown(4000, 64, 250 + 1500 + 100 + 3000 + 20)  # the data files' size after the spill

    def volume_free(data_pages: int, log_pages: int) -> float:
        return 20e9 - (4 * (data_pages - pages(4000)) + (log_pages - pages(2000))) * PAGE

    def check(got: dict, log_pages: int, data_pages: int) -> None:
        assert log_size(got) == log_pages * PAGE
        assert size(got, "templog", file_type="log") == log_pages * PAGE
        assert size(got, "tempdev") == data_pages * PAGE
        free = value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB)
        assert free == volume_free(data_pages, log_pages)
        assert reuse_waits(got) == {"ACTIVE_TRANSACTION": 1}

    # t=600: 640 MB of the 2,000 MB log; nothing grew.
    got = scrape_at(s, scraper, config, 600)
    assert log_used(got) == pages(640) * PAGE
    check(got, pages(2000), pages(4000))

    # t=2000: 1,200 MB; the spill grew the data files, not the log.
    got = scrape_at(s, scraper, config, 2000)
    assert log_used(got) == pages(1200) * PAGE
    check(got, pages(2000), spill_peak)
    free_before = value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB)

    # t=4200: 2,080 MB no longer fit in 2,000 MB: the log grew alone by two whole 64 MB steps, and the volume
    # lost exactly those two steps (the data files need 470 + 4,200 MB, still inside their 4,896 MB).
    got = scrape_at(s, scraper, config, 4200)
    assert log_used(got) == pages(2080) * PAGE
    assert grown(2000, 64, 2080) == pages(2000) + 2 * step
    check(got, pages(2000) + 2 * step, spill_peak)
    assert value(got, "mssql_tempdb_volume_free_bytes", volume=TEMPDB) == free_before - 2 * step * PAGE

    # t=6000: 2,800 MB: thirteen steps; the data files grew too (6,470 MB each), all from the one volume.
    got = scrape_at(s, scraper, config, 6000)
    assert log_used(got) == pages(2800) * PAGE
    assert grown(2000, 64, 2800) == pages(2000) + 13 * step
    check(got, pages(2000) + 13 * step, grown(4000, 64, 6470))

    # t=7200: 3,280 MB wanted, but fifteen steps and a last one cut short stop the log at its 3,000 MB
    # maximum: full (error 9002 on a real server), used is the whole log.
    got = scrape_at(s, scraper, config, 7200)
    assert pages(2000) + 15 * step < pages(3000) < pages(2000) + 16 * step
    assert log_used(got) == log_size(got) == pages(3000) * PAGE
    check(got, pages(3000), grown(4000, 64, 470 + 7200))
    assert value(got, "mssql_tempdb_file_max_size_bytes", file="templog", file_type="log", volume=TEMPDB) == (
        pages(3000) * PAGE
    )

    # A restart recreates tempdb: the log is back at 2,000 MB and holds 400 MB again (and the volume has
    # its 20 GB back).
    s.instance.restart()
    got = scrape_at(s, scraper, config, 7200)
    assert log_used(got) == pages(400) * PAGE
    check(got, pages(2000), pages(4000))


def log_model(free_mb: float, log_used: object, max_mb: float | None = None) -> TempdbModel:
    """A 100 MB log growing by 20 MB (up to `max_mb`) on a volume with `free_mb` free, beside one 1,000 MB
    data file holding 10 MB."""
    spec = {"type": 1, "growth_mb": 20, "log_used": log_used, "log_reuse_wait": "ACTIVE_TRANSACTION"}
    if max_mb is not None:
        spec["max_size_mb"] = max_mb
    files = [
        (1, "/t/tempdev.mdf", 0, pages(1000), SpaceSpec.parse({"usage": {"user_objects": 10}}, "data")),
        (2, "/t/templog.ldf", 1, pages(100), SpaceSpec.parse(spec, "log")),
    ]
    return TempdbModel(files, {"/t": {"total_gb": 10, "free_gb": free_mb / 1000}})


def test_the_stand_in_log_grows_alone_never_shrinks_and_is_full_where_it_cannot_grow():
    def log(m: TempdbModel, now: float) -> tuple[int, int]:
        (f,) = [f for f in m.space(now=now, since=0) if f.file_id == 2]
        return f.size_pages, f.log_used_pages

    # 150 MB from t=100 (a big transaction), 10 MB again from t=200: the log grew by three 20 MB steps
    # (160 MB), keeps them after the transaction ends, and took them from the volume; the data file did
    # not grow.
    m = log_model(free_mb=1000, log_used={"mb": 10, "steps": [[100, 150], [200, 10]]})
    assert log(m, 50) == (pages(100), pages(10))
    assert log(m, 150) == (pages(100) + 3 * pages(20), pages(150))
    assert log(m, 300) == (pages(100) + 3 * pages(20), pages(10))
    assert m.volume_bytes("/t/templog.ldf", now=300, since=0) == (10 * 10**9, 10**9 - 3 * pages(20) * PAGE)
    data = [f for f in m.space(now=300, since=0) if f.file_id == 1]
    assert data[0].size_pages == pages(1000)
    # 50 MB free: two steps fit (40 MB), the third does not; the log is full at 140 MB.
    m = log_model(free_mb=50, log_used={"mb": 10, "steps": [[100, 150]]})
    assert log(m, 150) == (pages(100) + 2 * pages(20), pages(100) + 2 * pages(20))
    # A 130 MB maximum: one whole step and one cut short at the maximum, whatever the volume has.
    m = log_model(free_mb=1000, log_used={"mb": 10, "steps": [[100, 150]]}, max_mb=130)
    assert log(m, 150) == (pages(130), pages(130))
    assert m.log_reuse_wait == "ACTIVE_TRANSACTION"


def test_the_stand_in_refuses_log_usage_on_a_data_file_and_data_usage_on_the_log():
    with pytest.raises(ValueError, match="log_used"):
        SpaceSpec.parse({"type": 0, "log_used": 10}, "data")
    with pytest.raises(ValueError, match="usage is for data files"):
        SpaceSpec.parse({"type": 1, "usage": {"user_objects": 10}}, "log")
    with pytest.raises(ValueError, match="log_reuse_wait"):
        SpaceSpec.parse({"type": 1, "log_reuse_wait": "ACTIVE_TRANSACTIONS"}, "log")


@pytest.mark.parametrize("how", ["denied", "absent"])
def test_a_denied_or_absent_log_view_fails_only_tempdb_log(standin, scraper_for, how):
    s = standin("healthy-oltp")
    view = "tempdb.sys.dm_db_log_space_usage"
    if how == "denied":
        s.instance.denied.add(view, 229)
    else:
        s.instance.missing.add(view)  # as on a server older than 2012
    config = s.config()
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_up") == 1
    failed = {
        dict(labels)["collector"]
        for (name, labels), v in got.items()
        if name == "mssql_exporter_collector_success" and v == 0
    }
    assert failed == {"tempdb_log"}
    # None of its series, not even the reuse wait its other section read.
    assert not any(name.startswith("mssql_tempdb_log_") for name, _ in got)
    assert value(got, "mssql_tempdb_volume_free_bytes", volume="/var/opt/mssql/data") > 0
    s.instance.denied.discard(view)
    s.instance.missing.discard(view)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_log") == 1
    assert log_used(got) == pages(2.5) * PAGE
