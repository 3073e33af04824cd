"""The wait_stats collector (sys.dm_os_wait_stats, filtered to a fixed set of wait types in SQL): its
facts, from the stand-in's rows in process."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import wait_stats

from tests.conftest import samples_of, scrape, value
from tests.offline import (
    collect,
    results_for,
    run_with,
)


def waits_of(got: dict, metric: str = "mssql_wait_seconds_total") -> dict[str, float]:
    return {dict(labels)["wait_type"]: v for (name, labels), v in got.items() if name == metric}


def test_waits_are_filtered_in_sql_and_read_in_seconds():
    results = results_for("healthy-oltp")
    sent = {row["wait_type"] for row in results[wait_stats.TAG].rows}
    assert sent == set(wait_stats.WAIT_TYPES)  # SOS_SCHEDULER_YIELD, LCK_M_X... stayed on the server
    got = samples_of(collect(results))
    assert waits_of(got)["WRITELOG"] == 6.0  # 100 ms per second for 60 s
    assert waits_of(got, "mssql_wait_tasks_total")["WRITELOG"] == 12000
    assert waits_of(got, "mssql_wait_signal_seconds_total")["WRITELOG"] == 0.3
    assert len(waits_of(got)) == 12


def test_a_wait_type_the_server_does_not_list_is_absent_not_zero():
    results = run_with("healthy-oltp", lambda views: views["dm_os_wait_stats"].pop("THREADPOOL"))
    got = samples_of(collect(results))
    for metric in ("mssql_wait_seconds_total", "mssql_wait_tasks_total", "mssql_wait_signal_seconds_total"):
        waits = waits_of(got, metric)
        assert "THREADPOOL" not in waits and len(waits) == 11, metric


def test_grant_starvation_grows_resource_semaphore_wait_seconds(offline_standin, scraper_for):
    s = offline_standin("grant-starvation")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(10)
    calm = scrape(scraper, config)
    s.clock.advance(20)
    first = scrape(scraper, config)
    s.clock.advance(10)
    second = scrape(scraper, config)
    before = waits_of(calm)["RESOURCE_SEMAPHORE"]
    assert before < 0.01  # healthy: next to no grant waits
    grown = waits_of(second)["RESOURCE_SEMAPHORE"] - waits_of(first)["RESOURCE_SEMAPHORE"]
    assert grown == pytest.approx(60.0)  # six waiters: 6 s of waiting per second, over 10 s
    tasks = "mssql_wait_tasks_total"
    assert waits_of(second, tasks)["RESOURCE_SEMAPHORE"] - waits_of(first, tasks)["RESOURCE_SEMAPHORE"] == 30
    # forced grants spill to tempdb
    assert waits_of(second)["IO_COMPLETION"] - waits_of(first)["IO_COMPLETION"] == pytest.approx(0.4)


def test_clearing_the_wait_statistics_is_a_counter_reset_not_a_failure(offline_standin, scraper_for):
    """DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR) sets the counts back to 0, as a restart does (the
    stand-in plays both by restarting its counters): the values drop, the collector still succeeds, and
    rate() sees a reset."""
    s = offline_standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(30)
    before = scrape(scraper, config)
    s.instance.restart()
    s.clock.advance(5)
    after = scrape(scraper, config)
    assert value(after, "mssql_exporter_collector_success", collector="wait_stats") == 1
    assert waits_of(after)["WRITELOG"] < waits_of(before)["WRITELOG"]
    assert waits_of(after)["WRITELOG"] == pytest.approx(0.5)
