"""Failures of the connection through the real driver: the server unreachable or gone, silent at login
or after it, refusing the login, restarted, or dropping the session while idle; for each, what the
scrape returns, what is logged, and that the same Scraper recovers (tests/failure_checks.py).

Wall-clock bounds are generous: the CI box is a loaded 2-core VM.
"""

from __future__ import annotations

import logging
import time

import pytest

from tests.conftest import scrape, value
from tests.failure_checks import (
    RETRY_MSG,
    SLACK,
    assert_down_and_nothing_stale,
    assert_logged,
    assert_recovers,
    back_on_the_same_port,
    count_logins,
    eventually,
    records,
    timed_scrape,
)

# ---- healthy baseline ----------------------------------------------------------------------------


def test_one_round_trip_per_scrape_on_one_persistent_connection(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config)  # the first scrape also logs in and answers the driver's type-info queries
    session = s.server.sessions[-1]
    before = session.batches
    for _ in range(5):
        assert value(scrape(scraper, config), "mssql_up") == 1
    assert session.batches - before == 5
    assert s.handler.exporter_batches == 6
    assert len(s.server.sessions) == 1 and s.handler.logins == 1


# ---- the server is not there ---------------------------------------------------------------------


def test_unreachable_at_start_then_the_same_scraper_recovers_on_the_same_port(standin, scraper_for, caplog):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    s.server.stop()
    config = s.config()
    scraper = scraper_for(config)
    got, elapsed = timed_scrape(scraper, config, timeout=3)
    assert_down_and_nothing_stale(got)
    assert elapsed < 3 + SLACK
    assert_logged(caplog, "Unable to connect")
    assert not records(caplog, RETRY_MSG)  # nothing to retry: there never was a connection
    back_on_the_same_port(s)
    assert_recovers(scraper, config)


def test_server_goes_away_mid_run_and_comes_back(standin, scraper_for, caplog):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    s.server.stop()  # the instance is shut down: its sockets close under the open connection
    for _ in range(2):
        got, elapsed = timed_scrape(scraper, config, timeout=2.5)
        assert_down_and_nothing_stale(got)
        assert elapsed < 2.5 + SLACK
        assert_logged(caplog, "Unable to connect")
    assert len(records(caplog, RETRY_MSG, target="standin")) == 1  # only the scrape that found it gone
    back_on_the_same_port(s)
    assert_recovers(scraper, config)


# ---- the server is there but silent --------------------------------------------------------------


@pytest.mark.parametrize("fault", ["hang_connect", "hang_login"])
def test_tcp_accepted_but_login_never_answered(standin, scraper_for, caplog, fault):
    s = standin("healthy-oltp")
    config = s.config(login_timeout_seconds=2)
    scraper = scraper_for(config)
    setattr(s.handler.faults, fault, True)
    got, elapsed = timed_scrape(scraper, config, timeout=2.5)
    assert_down_and_nothing_stale(got)
    assert elapsed < 2.5 + SLACK
    assert value(got, "mssql_scrape_duration_seconds") < 2.5 + SLACK
    assert_logged(caplog, "HYT00", "timed out waiting for SQL Server")
    setattr(s.handler.faults, fault, False)
    assert_recovers(scraper, config)


def test_logged_in_but_batch_never_answered(standin, scraper_for, caplog, driver):
    s = standin("healthy-oltp")
    config = s.config(driver=driver, query_timeout_seconds=2)
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    s.handler.faults.hang_batch = True
    got, elapsed = timed_scrape(scraper, config, timeout=2.5)
    assert_down_and_nothing_stale(got)
    assert elapsed < 2.5 + SLACK
    assert_logged(caplog, "timed out waiting for SQL Server", "HYT00")
    s.handler.faults.hang_batch = False
    assert_recovers(scraper, config)  # the hung session was given up, never reused
    assert len(s.server.sessions) == 2
    assert eventually(lambda: s.server.sessions[0].closed)


# ---- the login is refused ------------------------------------------------------------------------


def test_wrong_password_is_down_fast_then_recovers_when_fixed(
    standin, scraper_for, caplog, monkeypatch, driver
):
    from tests.conftest import PASSWORD_ENV, TEST_PASSWORD

    s = standin("healthy-oltp")
    config = s.config(driver=driver)
    scraper = scraper_for(config)
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    got, elapsed = timed_scrape(scraper, config, timeout=3)
    assert_down_and_nothing_stale(got)
    assert elapsed < 2
    failed = assert_logged(caplog, "18456")
    assert "not-the-password" not in str(failed.__dict__)
    monkeypatch.setenv(PASSWORD_ENV, TEST_PASSWORD)  # the secret is rotated back
    assert_recovers(scraper, config)


# ---- restarts ------------------------------------------------------------------------------------


def test_restart_moves_start_time_and_resets_counters(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(600)
    before = scrape(scraper, config)
    s.clock.advance(30)
    s.instance.restart()
    s.clock.advance(10)
    after = scrape(scraper, config)
    # The scenario's instance had been up for uptime_seconds when the scenario began.
    moved = 630 + s.instance.scenario.uptime_seconds
    assert value(after, "mssql_start_time_seconds") - value(before, "mssql_start_time_seconds") == moved
    assert value(after, "mssql_batch_requests_total") == 12000  # 10 s at 1,200/s since the restart
    assert value(after, "mssql_batch_requests_total") < value(before, "mssql_batch_requests_total")


# ---- the connection died while idle (restart, failover, killed session) --------------------------


def test_restart_that_drops_the_session_is_up_on_the_very_next_scrape(standin, scraper_for, caplog, driver):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config(driver=driver)
    scraper = scraper_for(config)
    s.clock.advance(600)
    before = scrape(scraper, config)
    assert value(before, "mssql_up") == 1
    s.clock.advance(30)
    s.instance.restart(drop_sessions=True)  # the idle connection's socket is closed under it
    assert s.server.sessions[0].closed
    s.clock.advance(10)
    after = scrape(scraper, config)
    assert value(after, "mssql_up") == 1
    # The scenario's instance had been up for uptime_seconds when the scenario began.
    moved = 630 + s.instance.scenario.uptime_seconds
    assert value(after, "mssql_start_time_seconds") - value(before, "mssql_start_time_seconds") == moved
    assert value(after, "mssql_batch_requests_total") == 12000  # 10 s at 1,200/s since the restart
    assert not records(caplog, "scrape failed")
    (retry,) = records(caplog, RETRY_MSG)
    assert retry.levelno == logging.INFO and getattr(retry, "target", None) == "standin"
    assert len(s.server.sessions) == 2 and s.handler.logins == 2


def test_server_down_after_the_drop_retries_once_and_is_down_in_time(
    standin, scraper_for, caplog, monkeypatch
):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    logins = count_logins(monkeypatch)
    s.server.stop()  # closes the session and stays down
    started = time.monotonic()
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=3))
    assert time.monotonic() - started < 3 + SLACK
    assert len(records(caplog, RETRY_MSG)) == 1 and len(logins) == 1  # one retry, and only one
    (failed,) = records(caplog, "scrape failed")
    assert getattr(failed, "target", None) == "standin"
    assert "Unable to connect" in str(getattr(failed, "err", "")), failed.__dict__
    # The next scrape starts on no connection at all: a failed login is not retried.
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=3))
    assert len(records(caplog, RETRY_MSG)) == 1 and len(logins) == 2


def test_hung_login_after_the_drop_still_ends_within_the_timeout(standin, scraper_for, caplog):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config(login_timeout_seconds=5)
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    s.handler.faults.hang_login = True
    s.instance.restart(drop_sessions=True)
    started = time.monotonic()
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=2.5))
    assert time.monotonic() - started < 2.5 + SLACK
    assert len(records(caplog, RETRY_MSG)) == 1
    s.handler.faults.hang_login = False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if value(scrape(scraper, config, timeout=2.5), "mssql_up") == 1:
            break
    else:
        pytest.fail("no recovery after the login answered again")
    assert len(records(caplog, RETRY_MSG)) == 1


# Errors as FreeTDS 1.3.17 raised them through pyodbc (measured against the stand-in), as
# (SQLSTATE, text, native error): pyodbc formats them "[STATE] [FreeTDS][SQL Server]text (native)
# (SQLExecDirectW)".
@pytest.mark.parametrize(
    ("state", "text", "native", "link"),
    [
        ("HY000", "Unknown error", 0, True),  # socket closed while idle
        ("08S01", "Communication link failure", 0, True),
        ("01000", "Unexpected EOF from the server", 20017, True),
        ("HYT00", "Timeout expired", 0, False),
        ("08S01", "Bad token from the server: Datastream processing out of sync", 20020, False),
        ("42000", "Incorrect syntax near 'SELEC'.", 102, False),
        ("42000", "The server principal is not able to access the database", 916, False),
        ("HY000", "Some server error", 50000, False),
    ],
)
def test_which_errors_mean_the_connection_is_gone(state: str, text: str, native: int, link: bool) -> None:
    import pyodbc
    from mssql_memory_exporter.connection.session import is_link_failure

    message = f"[{state}] [FreeTDS][SQL Server]{text} ({native}) (SQLExecDirectW)"
    assert is_link_failure(pyodbc.Error(state, message)) is link
