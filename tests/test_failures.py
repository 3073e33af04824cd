"""Failure modes through the real driver: each gives `mssql_up 0` in time, no stale values, and recovery."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest

from tests.conftest import scrape, value

TARGET_METRIC = "mssql_page_life_expectancy_seconds"


def only_scrape_metrics(samples: dict) -> set[str]:
    return {name for name, _ in samples}


def assert_down_and_nothing_stale(samples: dict) -> None:
    assert value(samples, "mssql_up") == 0
    # Never the last scrape's values: a down target exports only what describes the scrape itself.
    assert only_scrape_metrics(samples) == {"mssql_up", "mssql_scrape_duration_seconds"}


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


def test_unreachable_at_start_then_comes_up(standin, scraper_for):
    s = standin("healthy-oltp")
    port = s.port
    s.server.stop()
    config = s.config(port=port)
    scraper = scraper_for(config)
    started = time.monotonic()
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=3))
    assert time.monotonic() - started < 3.5
    again = standin("healthy-oltp")
    config2 = again.config()
    assert value(scrape(scraper_for(config2), config2), "mssql_up") == 1


def test_wrong_password_is_down_fast_and_says_login_failed(standin, scraper_for, caplog, monkeypatch):
    s = standin("healthy-oltp")
    config = s.config()
    monkeypatch.setenv("MSSQL_STANDIN_TEST_PASSWORD", "not-the-password")
    started = time.monotonic()
    got = scrape(scraper_for(config), config, timeout=3)
    assert_down_and_nothing_stale(got)
    assert time.monotonic() - started < 2
    assert any("18456" in str(getattr(r, "err", "")) for r in caplog.records), [
        r.__dict__ for r in caplog.records
    ]


@pytest.mark.parametrize("fault", ["hang_connect", "hang_login", "hang_batch"])
def test_silent_server_gives_up_zero_within_the_timeout(standin, scraper_for, fault):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    if fault == "hang_batch":
        assert value(scrape(scraper, config), "mssql_up") == 1  # logged in, then it stops answering
    setattr(s.handler.faults, fault, True)
    started = time.monotonic()
    got = scrape(scraper, config, timeout=2.5)
    elapsed = time.monotonic() - started
    assert_down_and_nothing_stale(got)
    assert elapsed < 3.0, elapsed
    assert value(got, "mssql_scrape_duration_seconds") <= 3.0


def test_hung_batch_then_recovery(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    s.handler.faults.hang_batch = True
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=2.5))
    s.handler.faults.hang_batch = False
    # The driver gives up on the hung request on its own query timeout; the next scrape after that
    # must be healthy again (on the same or a fresh connection).
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        got = scrape(scraper, config, timeout=2.5)
        if value(got, "mssql_up") == 1:
            assert value(got, TARGET_METRIC) == 5400
            return
    pytest.fail("the target did not recover within 15 s of the server answering again")


@pytest.mark.parametrize("fault", ["drop_mid_result", "garbage"])
def test_broken_answer_is_down_then_recovers_on_a_new_connection(standin, scraper_for, fault):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    setattr(s.handler.faults, fault, True)
    started = time.monotonic()
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=3))
    assert time.monotonic() - started < 3.5
    setattr(s.handler.faults, fault, False)
    got = scrape(scraper, config, timeout=3)
    assert value(got, "mssql_up") == 1 and value(got, TARGET_METRIC) == 5400
    assert len(s.server.sessions) == 2  # the broken session was dropped, not reused


def test_slow_answer_under_the_timeout_is_served(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.handler.faults.delay_seconds = 0.8
    got = scrape(scraper, config, timeout=2.5)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_scrape_duration_seconds") >= 0.8


def test_denied_section_fails_alone(standin, scraper_for):
    s = standin("healthy-oltp")
    s.instance.denied.add("sys.dm_os_sys_info")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="sys_info") == 0
    assert "mssql_start_time_seconds" not in only_scrape_metrics(got)
    for collector in (
        "server_properties",
        "buffer_manager",
        "buffer_node",
        "memory_manager",
        "sql_statistics",
    ):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1
    assert value(got, TARGET_METRIC) == 5400


def test_missing_dmv_on_an_older_server_fails_its_section_only(standin, scraper_for):
    s = standin("healthy-oltp")
    s.instance.missing.add("sys.dm_os_performance_counters")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_up") == 1
    for collector in ("buffer_manager", "buffer_node", "memory_manager", "sql_statistics"):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 0
    assert value(got, "mssql_exporter_collector_success", collector="sys_info") == 1
    assert TARGET_METRIC not in only_scrape_metrics(got)


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
    assert value(after, "mssql_start_time_seconds") - value(before, "mssql_start_time_seconds") == 630
    assert value(after, "mssql_batch_requests_total") == 12000  # 10 s at 1,200/s since the restart
    assert value(after, "mssql_batch_requests_total") < value(before, "mssql_batch_requests_total")


def test_concurrent_probes_never_share_the_connection_at_once(standin, scraper_for):
    s = standin("healthy-oltp")
    other = standin("numa-4-nodes")
    from tests.conftest import make_config

    config = make_config({"a": s.target_yaml(), "b": other.target_yaml()})
    scraper = scraper_for(config)
    results: list[float] = []
    lock = threading.Lock()

    def probe(name: str) -> None:
        got = scrape(scraper, config, target=name, timeout=8)
        with lock:
            results.append(value(got, "mssql_up"))

    threads = [threading.Thread(target=probe, args=("a" if i % 2 else "b",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [1.0] * 12
    # One connection per target, each used by one scrape at a time.
    assert len(s.server.sessions) == 1 and len(other.server.sessions) == 1
    assert s.handler.exporter_batches == 6 and other.handler.exporter_batches == 6


def test_server_goes_away_mid_run_and_comes_back(standin, scraper_for, caplog):
    from tests.standin.server import StandInServer

    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    port = s.port
    s.server.stop()  # the instance is shut down: its sockets close under the open connection
    started = time.monotonic()
    assert_down_and_nothing_stale(scrape(scraper, config, timeout=2.5))
    assert time.monotonic() - started < 3.0
    assert any(
        r.getMessage() == "scrape failed" and getattr(r, "target", "") == "standin" for r in caplog.records
    )
    back = StandInServer(s.handler, port=port)
    back.start()
    try:
        got = scrape(scraper, config, timeout=2.5)
        assert value(got, "mssql_up") == 1 and value(got, TARGET_METRIC) == 5400
    finally:
        back.stop()


def test_answer_just_under_the_timeout_is_served(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.handler.faults.delay_seconds = 1.6
    got = scrape(scraper, config, timeout=2.5)
    assert value(got, "mssql_up") == 1
    assert 1.6 <= value(got, "mssql_scrape_duration_seconds") < 2.5


def test_answer_just_over_the_timeout_is_down_in_time_then_recovers(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.handler.faults.delay_seconds = 2.8
    started = time.monotonic()
    got = scrape(scraper, config, timeout=2.5)
    assert time.monotonic() - started < 2.8
    assert_down_and_nothing_stale(got)
    errors = [str(getattr(r, "err", "")) for r in caplog.records if r.getMessage() == "scrape failed"]
    # Either the driver's query timeout (HYT00) or the exporter's own deadline ends it; both are logged.
    assert any("Timeout expired" in e or "timed out" in e for e in errors), errors
    s.handler.faults.delay_seconds = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if value(scrape(scraper, config, timeout=2.5), "mssql_up") == 1:
            return
    pytest.fail("no recovery after a slow answer")


RETRY_MSG = "connection lost while idle, logging in again"


def eventually(check: Callable[[], bool], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def records(caplog: pytest.LogCaptureFixture, message: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == message]


def count_logins(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pyodbc.connect() the exporter makes from now on (the opener looks it up at call time)."""
    import pyodbc

    calls: list[str] = []
    real = pyodbc.connect

    def counting(*args: object, **kwargs: object) -> object:
        calls.append("connect")
        return real(*args, **kwargs)

    monkeypatch.setattr(pyodbc, "connect", counting)
    return calls


def test_restart_that_drops_the_session_is_up_on_the_very_next_scrape(standin, scraper_for, caplog):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config()
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
    assert value(after, "mssql_start_time_seconds") - value(before, "mssql_start_time_seconds") == 630
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
    assert time.monotonic() - started < 3.5
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
    assert time.monotonic() - started < 3.0
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
    from mssql_memory_exporter.connection import is_link_failure

    message = f"[{state}] [FreeTDS][SQL Server]{text} ({native}) (SQLExecDirectW)"
    assert is_link_failure(pyodbc.Error(state, message)) is link


def test_unreadable_answer_while_another_worker_holds_the_connection_does_not_block(
    standin, scraper_for, caplog, monkeypatch
):
    from mssql_memory_exporter.batch import ResultSet

    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    connection = scraper._state(config.targets["standin"]).connection
    # This probe's round trip returns an answer route() rejects, while a concurrent probe's worker is
    # stuck in the driver with the target's lock.
    monkeypatch.setattr(connection, "run", lambda sql, deadline: [ResultSet(("section",), [("bogus",)])])
    connection._lock.acquire()
    got: list[dict] = []
    prober = threading.Thread(target=lambda: got.append(scrape(scraper, config, timeout=3)), daemon=True)
    started = time.monotonic()
    prober.start()
    prober.join(5)
    elapsed = time.monotonic() - started
    connection._lock.release()
    assert not prober.is_alive(), "the probe waited for the lock held by the stuck worker"
    assert elapsed < 1.0, elapsed
    assert_down_and_nothing_stale(got[0])
    (failed,) = records(caplog, "scrape failed")
    assert getattr(failed, "target", None) == "standin" and "bogus" in str(getattr(failed, "err", ""))
    monkeypatch.undo()
    # The unreadable session is not reused: the next scrape logs in again and is healthy.
    again = scrape(scraper, config)
    assert value(again, "mssql_up") == 1 and value(again, TARGET_METRIC) == 5400
    assert len(s.server.sessions) == 2
    assert eventually(lambda: s.server.sessions[0].closed)  # the server sees the close on its own thread


def test_vanished_required_counter_fails_its_collector_only(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    del s.instance.scenario.counters["Memory Manager"]["Memory Grants Pending"]
    config = s.config()
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="memory_manager") == 0
    assert "mssql_memory_free_bytes" not in only_scrape_metrics(got)  # nothing half-exported
    for collector in ("server_properties", "sys_info", "buffer_manager", "buffer_node", "sql_statistics"):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1
    assert value(got, TARGET_METRIC) == 5400
    (missing,) = records(caplog, "collector found no data")
    assert getattr(missing, "target", None) == "standin"
    assert getattr(missing, "collector", None) == "memory_manager"
    assert "'Memory Grants Pending' missing" in str(getattr(missing, "err", ""))
