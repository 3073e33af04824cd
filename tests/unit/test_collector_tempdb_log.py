"""The tempdb_log collector (tempdb.sys.dm_db_log_space_usage, tempdb's row of sys.databases): its facts,
end to end; every figure worked out from the scenario's numbers (tests/tempdb_figures.py)."""

from __future__ import annotations

from tests.conftest import value
from tests.tempdb_figures import PAGE, TEMPDB, grown, pages, scrape_at, size


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


def test_healthy_oltp_log_holds_a_steady_third_of_its_8_mb_and_waits_on_nothing(offline_standin, scraper_for):
    s = offline_standin("healthy-oltp")
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


def test_filling_log_grows_by_whole_steps_into_the_volume_until_its_maximum(offline_standin, scraper_for):
    """tempdb-filling's log: 2,000 MB, 64 MB steps up to 3,000 MB, on the data files' 20 GB-free volume;
    the never-ending transaction keeps 400 MB + 0.4 MB/s in it (ACTIVE_TRANSACTION)."""
    s = offline_standin("tempdb-filling")
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
