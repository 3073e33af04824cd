"""The server answers, but broken (cut short, garbage, a dropped socket mid-result) or slow (just under
and just over the query timeout): `mssql_up 0` in time, nothing stale, the reason logged, and the
next scrape healthy on a new session (tests/failure_checks.py).

Wall-clock bounds are generous: the CI box is a loaded 2-core VM.
"""

from __future__ import annotations

import logging

import pytest

from tests.conftest import scrape, value
from tests.failure_checks import (
    RETRY_MSG,
    SLACK,
    TARGET_METRIC,
    assert_down_and_nothing_stale,
    assert_logged,
    assert_recovers,
    eventually,
    records,
    timed_scrape,
)

# ---- the answer is broken ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "err", "retried"),
    [
        # Rows had come back before the socket closed: the batch is not sent again.
        ("drop_mid_result", "Unexpected EOF", False),
        # The server answered nonsense: the link is alive, a second try would meet the same server.
        ("garbage", "Bad token from the server", False),
        # Half a packet then EOF, before any row: indistinguishable from a session killed while idle,
        # so it is tried once more on a new connection (which the fault breaks again).
        ("truncated", "Unexpected EOF", True),
        # Half a packet then silence: a timeout, never retried.
        ("truncated_stall", "timed out waiting for SQL Server", False),
    ],
)
def test_broken_answer_is_down_then_the_next_scrape_recovers(
    standin, scraper_for, caplog, fault, err, retried
):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    setattr(s.handler.faults, fault, True)
    got, elapsed = timed_scrape(scraper, config, timeout=2.5)
    assert_down_and_nothing_stale(got)
    assert elapsed < 2.5 + SLACK
    assert_logged(caplog, err, "HYT00")
    assert len(records(caplog, RETRY_MSG)) == (1 if retried else 0)
    setattr(s.handler.faults, fault, False)
    assert_recovers(scraper, config)
    # The broken session was dropped, not reused.
    assert len(s.server.sessions) == (3 if retried else 2)
    assert eventually(lambda: all(session.closed for session in s.server.sessions[:-1]))


# ---- timeouts ------------------------------------------------------------------------------------


def test_answer_just_under_the_timeout_is_served_without_a_warning(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
    scraper = scraper_for(config)
    scrape(scraper, config)
    caplog.clear()
    s.handler.faults.delay_seconds = 1.6
    got = scrape(scraper, config, timeout=2.5)
    assert value(got, "mssql_up") == 1 and value(got, TARGET_METRIC) == 5400
    assert 1.6 <= value(got, "mssql_scrape_duration_seconds") < 2.5
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("mssql_")]
    assert warnings == [], [(r.getMessage(), r.__dict__.get("err")) for r in warnings]
    s.handler.faults.delay_seconds = 0
    assert_recovers(scraper, config)
    assert len(s.server.sessions) == 1  # a slow answer is not a reason to log in again


def test_answer_just_over_the_timeout_is_down_in_time_then_recovers(standin, scraper_for, caplog, driver):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config(driver=driver, query_timeout_seconds=2)
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.handler.faults.delay_seconds = 2.8
    got, elapsed = timed_scrape(scraper, config, timeout=2.5)
    assert elapsed < 2.5 + SLACK
    assert_down_and_nothing_stale(got)
    # Either the driver's query timeout (HYT00: FreeTDS "Timeout expired", Driver 18 "Query timeout
    # expired") or the exporter's own deadline ends it; both are logged.
    assert_logged(caplog, "Timeout expired", "Query timeout expired", "timed out waiting for SQL Server")
    assert not records(caplog, RETRY_MSG)  # a timeout is never retried
    s.handler.faults.delay_seconds = 0
    assert_recovers(scraper, config)
