"""The tempdb_files collector (tempdb.sys.database_files, sys.master_files): sizes, growth settings and
layout facts, end to end; every figure worked out from the scenario's numbers (tests/tempdb_figures.py)."""

from __future__ import annotations

import pytest

from tests.conftest import scrape, value
from tests.tempdb_figures import PAGE, TEMPDB, grown, pages, scrape_at, size, space


def test_a_badly_laid_out_tempdb_shows_in_its_layout_facts(offline_standin, scraper_for):
    s = offline_standin("tempdb-bad-layout")
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


def test_uneven_tempdb_files_are_not_equal_in_size_or_growth(offline_standin, scraper_for):
    s = offline_standin("tempdb-uneven-files")
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


def test_autogrowth_stops_at_max_size_while_the_volume_has_room(offline_standin, scraper_for):
    s = offline_standin("tempdb-growth-capped")
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
def test_system_volume_fact_is_absent_unless_the_volume_is_known(
    offline_standin, scraper_for, volume_map, expected
):
    s = offline_standin("healthy-oltp")
    config = s.config(volume_map=volume_map)
    got = scrape_at(s, scraper_for(config), config, 60)
    if expected is None:
        assert not any(name == "mssql_tempdb_system_volume_files" for name, _ in got)
    else:
        assert value(got, "mssql_tempdb_system_volume_files") == expected


def test_growth_settings_travel_on_the_slow_cadence_and_sizes_every_scrape(offline_standin, scraper_for):
    s = offline_standin("tempdb-filling")
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
