"""The memory_health collector (SQL Server 2025's sys.dm_os_memory_health_history), from the stand-in's
rows in process: the severity of the newest snapshot, the seconds at each level, and what happens where
the view is missing or empty."""

from __future__ import annotations

import logging

import pytest
from mssql_memory_exporter.collectors import COLLECTORS, memory_health

from tests.conftest import scrape, value

GIB = 1024**3
MIB = 1024**2
LEVEL_SECONDS = memory_health.SECONDS.name
PLATFORM_LOG = "mssql_memory_exporter.scrape.platform"
COLLECTOR_LOG = "mssql_memory_exporter.collectors.memory_health"


def scrapes_at(offline_standin, scraper_for, scenario: str, times: tuple[float, ...]) -> list[dict]:
    """One scrape at each scenario time (seconds since the stand-in started), through one scraper."""
    s = offline_standin(scenario)
    config = s.config()
    scraper = scraper_for(config)
    got = []
    for at in times:
        s.clock.advance(at - s.clock.now())
        samples = scrape(scraper, config)
        assert value(samples, "mssql_up") == 1
        got.append(samples)
    return got


def levels(samples: dict) -> dict[str, float]:
    return {dict(k)["level"]: v for (name, k), v in samples.items() if name == LEVEL_SECONDS}


def test_severity_follows_the_newest_snapshot_through_low_medium_high(offline_standin, scraper_for):
    # sql2025.yml: LOW until 300 s, MEDIUM until 600 s, HIGH until 900 s, then LOW; one snapshot per 15 s.
    got = scrapes_at(offline_standin, scraper_for, "sql2025", (0, 320, 640, 950))
    assert [value(g, memory_health.SEVERITY.name) for g in got] == [1, 2, 3, 1]
    assert [value(g, memory_health.ALLOCATION_POTENTIAL.name) for g in got] == [
        8 * GIB,
        GIB,
        128 * MIB,
        8 * GIB,
    ]
    assert value(got[2], memory_health.RECLAIMABLE_CACHE.name) == 2 * GIB
    for samples in got:
        assert value(samples, "mssql_exporter_collector_success", collector="memory_health") == 1
        assert value(samples, "mssql_exporter_collector_enabled", collector="memory_health") == 1


def test_time_at_each_level_is_counted_from_the_snapshots_once(offline_standin, scraper_for):
    got = scrapes_at(offline_standin, scraper_for, "sql2025", (0, 320, 640, 950))
    # The first scrape counts nothing: the hour of history already in the view would be counted again
    # after every exporter restart.
    assert levels(got[0]) == {"low": 0, "medium": 0, "high": 0}
    # Then each new snapshot adds the 15 s since the one before it to its own level: 19 LOW snapshots
    # (15..285 s) and 2 MEDIUM ones (300, 315 s) by 320 s ...
    assert levels(got[1]) == {"low": 285, "medium": 30, "high": 0}
    # ... and the whole 300 s at MEDIUM and at HIGH once they are over, whatever the scrape interval.
    assert levels(got[3]) == {"low": 285 + 60, "medium": 300, "high": 300}
    totals = [sum(levels(g).values()) for g in got]
    assert totals == [0, 315, 630, 945]  # never more time than passed between the snapshots


def test_a_restart_of_sql_server_keeps_counting_from_its_new_snapshots(offline_standin, scraper_for):
    s = offline_standin("sql2025")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.clock.advance(100)
    before = levels(scrape(scraper, config))
    s.instance.restart()  # at 100 s: the view starts over, its first snapshot at 115 s
    s.clock.advance(150)
    after = levels(scrape(scraper, config))
    # From the last snapshot counted (90 s) to the newest (250 s): nothing lost, nothing twice.
    assert after == {"low": before["low"] + 160, "medium": 0, "high": 0}


def test_a_gap_longer_than_the_view_holds_is_not_credited_to_one_level(offline_standin, scraper_for):
    """The exporter away for 5000 s: the view holds only its last 256 snapshots (3825 s); the hour before
    them is unknown and counts at most MAX_GAP_SECONDS."""
    got = scrapes_at(offline_standin, scraper_for, "sql2025", (0, 5000))
    assert levels(got[1]) == {"low": memory_health.MAX_GAP_SECONDS + 255 * 15, "medium": 0, "high": 0}


@pytest.mark.parametrize("scenario", ["healthy-oltp", "managed-instance"])
def test_left_out_where_the_view_is_missing_logged_once_never_failing(
    offline_standin, scraper_for, caplog, scenario
):
    """SQL Server 2022 (healthy-oltp) and a Managed Instance under the SQL Server 2022 update policy
    (managed-instance, 16.x) have no such view: left out from the first scrape, one log line, and every
    other collector as healthy as before."""
    with caplog.at_level(logging.INFO, logger=PLATFORM_LOG):
        got = scrapes_at(offline_standin, scraper_for, scenario, (0, 15, 30))
    for samples in got:
        assert value(samples, "mssql_exporter_collector_enabled", collector="memory_health") == 0
        assert ("mssql_exporter_collector_success", (("collector", "memory_health"),)) not in samples
        assert not [name for name, _ in samples if name.startswith("mssql_memory_health")]
        success = {
            dict(k)["collector"]: v
            for (n, k), v in samples.items()
            if n == "mssql_exporter_collector_success"
        }
        assert set(success.values()) == {1.0}
        assert len(success) == len(COLLECTORS) - 1
    lines = [r.getMessage() for r in caplog.records if "memory_health" in r.getMessage()]
    assert len(lines) == 1, lines
    assert memory_health.VIEW in lines[0]


def test_an_upgrade_to_2025_is_seen_after_the_restart_it_takes(offline_standin, scraper_for, caplog):
    """Left out on 2022; an in-place upgrade restarts SQL Server, and the exporter looks again."""
    s = offline_standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    with caplog.at_level(logging.INFO, logger=PLATFORM_LOG):
        for _ in range(2):
            assert (
                value(scrape(scraper, config), "mssql_exporter_collector_enabled", collector="memory_health")
                == 0
            )
            s.clock.advance(15)
    s.instance.scenario.properties["ProductVersion"] = "17.0.1000.7"
    s.instance.scenario.views["dm_os_memory_health_history"] = {
        "severity_level": 2,
        "allocation_potential_memory_mb": 1024,
        "reclaimable_cache_memory_mb": 4096,
    }
    s.instance.restart()
    s.clock.advance(60)
    scrape(scraper, config)  # sees the new start time
    s.clock.advance(15)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_enabled", collector="memory_health") == 1
    assert value(got, "mssql_exporter_collector_success", collector="memory_health") == 1
    assert value(got, memory_health.SEVERITY.name) == 2
    assert len([r for r in caplog.records if "left out memory_health" in r.getMessage()]) == 1


def test_an_empty_view_gives_no_severity_and_says_so_once(offline_standin, scraper_for, caplog):
    with caplog.at_level(logging.WARNING, logger=COLLECTOR_LOG):
        got = scrapes_at(offline_standin, scraper_for, "sql2025-memory-health-empty", (0, 15, 30))
    for samples in got:
        assert value(samples, "mssql_exporter_collector_success", collector="memory_health") == 1
        assert (memory_health.SEVERITY.name, ()) not in samples
        assert levels(samples) == {"low": 0, "medium": 0, "high": 0}
        # The rest of the scrape is intact.
        success = {
            dict(k)["collector"]: v
            for (n, k), v in samples.items()
            if n == "mssql_exporter_collector_success"
        }
        assert set(success.values()) == {1.0} and len(success) == len(COLLECTORS)
        assert value(samples, "mssql_page_life_expectancy_seconds") > 0
    lines = [r.getMessage() for r in caplog.records if memory_health.VIEW in r.getMessage()]
    assert len(lines) == 1 and "no snapshot" in lines[0], lines


def test_the_server_clock_going_back_starts_counting_afresh():
    """A target now answered by another server (or a clock set back): nothing is credited for the jump."""
    memo: dict[str, object] = {}
    row: dict[str, object] = {}
    memory_health._count([(1_000_000.0, 1, row), (1_015_000.0, 1, row)], memo)
    memory_health._count([(1_030_000.0, 3, row)], memo)
    assert memo[memory_health.SECONDS_KEY] == {"low": 0.0, "medium": 0.0, "high": 15.0}
    memory_health._count([(500_000.0, 3, row), (515_000.0, 3, row)], memo)
    assert memo[memory_health.SECONDS_KEY] == {"low": 0.0, "medium": 0.0, "high": 15.0}
    memory_health._count([(530_000.0, 2, row)], memo)
    assert memo[memory_health.SECONDS_KEY] == {"low": 0.0, "medium": 15.0, "high": 15.0}
