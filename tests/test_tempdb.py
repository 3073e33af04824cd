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
    for collector in ("tempdb_files", "tempdb_usage", "tempdb_volumes", "volumes"):
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
