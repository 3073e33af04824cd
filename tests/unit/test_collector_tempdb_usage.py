"""The tempdb_usage collector (tempdb.sys.dm_db_file_space_usage): what fills tempdb's files, end to
end (Scraper -> in-process connection -> stand-in); every figure worked out from the scenario's numbers
(tests/tempdb_figures.py)."""

from __future__ import annotations

from tests.conftest import value
from tests.tempdb_figures import PAGE, TEMPDB, grown, pages, scrape_at, size, space

FILLING = ("tempdev", "temp2", "temp3", "temp4")


def test_filling_tempdb_version_store_grows_and_a_spill_grows_the_files_into_the_volume(
    offline_standin, scraper_for
):
    s = offline_standin("tempdb-filling")
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
