"""Failure modes through the real driver, as a matrix: for each fault, (a) what the scrape returns
(`mssql_up 0` in time and nothing stale, or `mssql_up 1` with one collector failed), (b) what is logged
(the `scrape failed`/`section failed` record with the target and a recognisable error), and (c) that
the next scrape on the SAME Scraper is healthy again once the fault is cleared.

Wall-clock bounds are generous: the CI box is a loaded 2-core VM.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.scrape_metrics import LOGIN_BACKOFF, SCRAPE_DURATION, UP

from tests.collector_matrix import (
    SECTIONS,
    FailureCase,
    analysed_objects,
    declared_names,
    failure_cases,
    objects_read,
)
from tests.conftest import exposition, make_config, samples_of, scrape, value
from tests.standin.server import StandInServer
from tests.timeouts import SLACK_SECONDS

TARGET_METRIC = "mssql_page_life_expectancy_seconds"
RETRY_MSG = "connection lost while idle, logging in again"
SLACK = SLACK_SECONDS  # what a loaded machine may add to a deadline before the answer is out
# An SSD pool on the data volume, so that ssd_pools reads the file I/O rows too.
SSD_POOLS = {
    "data": {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2022-03-01",
        "volumes": ["/var/opt/mssql/data"],
    }
}


def only_scrape_metrics(samples: dict) -> set[str]:
    return {name for name, _ in samples}


def assert_down_and_nothing_stale(samples: dict) -> None:
    assert value(samples, "mssql_up") == 0
    # Never the last scrape's values: a down target exports only what describes the scrape itself.
    assert only_scrape_metrics(samples) == {UP.name, SCRAPE_DURATION.name, LOGIN_BACKOFF.name}


def eventually(check: Callable[[], bool], seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def records(
    caplog: pytest.LogCaptureFixture, message: str, target: str | None = None
) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.getMessage() == message and (target is None or getattr(r, "target", None) == target)
    ]


def assert_logged(
    caplog: pytest.LogCaptureFixture, *texts: str, message: str = "scrape failed", target: str = "standin"
) -> logging.LogRecord:
    """The last `message` record names `target` and its err holds one of `texts`."""
    found = records(caplog, message)
    assert found, f"no {message!r} record; have {[r.getMessage() for r in caplog.records]}"
    last = found[-1]
    err = str(getattr(last, "err", ""))
    assert getattr(last, "target", None) == target, last.__dict__
    assert any(text in err for text in texts), f"err={err!r}, expected one of {texts}"
    return last


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


def settle(target: str = "standin", seconds: float = 15.0) -> None:
    """Wait until no scrape worker of `target` is still inside the driver: FreeTDS gives up on a silent
    server only after twice its query timeout, and until then the target's lock is taken."""
    assert eventually(
        lambda: not any(t.name == f"scrape-{target}" and t.is_alive() for t in threading.enumerate()),
        seconds,
    ), f"a scrape worker of {target} is still stuck in the driver after {seconds} s"


def assert_recovers(scraper, config, target: str = "standin", metric: float | None = 5400) -> dict:
    """The next scrape (after any stuck worker has given up) is healthy again."""
    settle(target)
    got = scrape(scraper, config, target=target)
    assert value(got, "mssql_up") == 1
    if metric is not None:
        assert value(got, TARGET_METRIC) == metric
    return got


def timed_scrape(scraper, config, timeout: float, target: str = "standin") -> tuple[dict, float]:
    started = time.monotonic()
    got = scrape(scraper, config, target=target, timeout=timeout)
    return got, time.monotonic() - started


def back_on_the_same_port(s) -> None:
    """The stand-in comes (back) up where the exporter expects it; the fixture stops it at the end."""
    port = s.port
    s.server = StandInServer(s.handler, port=port)
    s.server.start()
    assert s.port == port


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


def test_logged_in_but_batch_never_answered(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
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


# ---- the login is refused ------------------------------------------------------------------------


def test_wrong_password_is_down_fast_then_recovers_when_fixed(standin, scraper_for, caplog, monkeypatch):
    from tests.conftest import PASSWORD_ENV, TEST_PASSWORD

    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    got, elapsed = timed_scrape(scraper, config, timeout=3)
    assert_down_and_nothing_stale(got)
    assert elapsed < 2
    failed = assert_logged(caplog, "18456")
    assert "not-the-password" not in str(failed.__dict__)
    monkeypatch.setenv(PASSWORD_ENV, TEST_PASSWORD)  # the secret is rotated back
    assert_recovers(scraper, config)


# ---- one section fails, the others export --------------------------------------------------------


def _failed_collectors(samples: dict) -> set[str]:
    return {
        dict(labels)["collector"]
        for (name, labels), ok in samples.items()
        if name == "mssql_exporter_collector_success" and ok == 0
    }


def _break(s, case: FailureCase) -> None:
    if case.fault == "missing":
        s.instance.missing.add(case.view)
    else:
        s.instance.denied.add(case.view, int(case.fault.removeprefix("denied ")))


def _mend(s, case: FailureCase) -> None:
    s.instance.missing.discard(case.view)
    s.instance.denied.discard(case.view)


NEWEST_RELEASE = "sql2025"


@pytest.mark.parametrize("case", failure_cases(), ids=lambda case: case.id)
def test_a_failing_view_fails_exactly_the_collectors_that_read_it_then_recovers(
    standin, scraper_for, caplog, case
):
    """The matrix comes from the collectors' records (tests/collector_matrix.py): every object a
    collector's sections read, denied (229: a DENY; 300: no VIEW SERVER STATE) and missing (208: an
    older server). Exactly the collectors reading it fail, none of their declared metrics is exported,
    the failure is logged under one of them with the server's error number, and once the grant is back
    (or the object is there) the same Scraper exports all of them again. It plays the newest release the
    stand-in knows: there every version-gated section reads its objects (on 2022 the SQL Server 2025
    sections ask COL_LENGTH and stop before any object a denial could fail)."""
    s = standin(NEWEST_RELEASE)
    config = s.config(ssd_pools=SSD_POOLS)
    scraper = scraper_for(config)
    state = scraper._state(config.targets["standin"])
    before = only_scrape_metrics(scrape(scraper, config))
    _break(s, case)
    state.next_slow_at = 0.0  # the slow sections (the HBP databases, the file list) come in this batch too
    got = scrape(scraper, config)
    assert value(got, "mssql_up") == 1
    assert _failed_collectors(got) == case.failing
    for record in COLLECTORS:
        if record.name in case.failing:
            assert not declared_names(record) & only_scrape_metrics(got), record.name
    if case.failing:
        # The exporter's own existence check says "not available"; an object read past it, SQL Server's 208.
        missing = ("not available", "Invalid object name")
        number, texts = (208, missing) if case.fault == "missing" else (case.fault[-3:], ("denied",))
        failed = assert_logged(caplog, *texts, message="section failed")
        assert str(failed.err).startswith(f"{number}: ") and failed.collector in case.failing, failed.err
    _mend(s, case)
    left_out = [
        r
        for r in COLLECTORS
        if r.left_out_when_missing and any(case.view in objects_read(t) for t in r.sections)
    ]
    if case.fault == "missing" and left_out:
        # An object appears with an upgrade, which restarts SQL Server: a collector left out for its absence
        # is looked for again only then (scrape.py).
        s.instance.restart()
        s.clock.advance(60)
        scrape(scraper, config)
    state.next_slow_at = 0.0
    got = assert_recovers(scraper, config)
    assert not _failed_collectors(got)
    assert before <= only_scrape_metrics(got), before - only_scrape_metrics(got)


def test_the_objects_a_section_reads_are_those_the_stand_in_parses_from_its_sql():
    for tag in SECTIONS:
        assert objects_read(tag) == analysed_objects(tag), tag


def test_the_failure_matrix_covers_every_collector_that_reads_a_server_object():
    covered = {name for case in failure_cases() for name in case.failing}
    readers = {record.name for record in COLLECTORS if any(objects_read(tag) for tag in record.sections)}
    assert covered == readers, readers - covered


def test_denied_tempdb_growth_settings_fail_tempdb_files_until_a_refresh_reads_them(
    standin, scraper_for, caplog
):
    """The settings are a slow section: denied at the first read, tempdb_files says why and fails; once a
    refresh reads them, it succeeds from then on, also on the scrapes that do not carry them."""
    s = standin("healthy-oltp")
    s.instance.denied.add("tempdb.sys.database_files", 229)
    config = s.config(volume_refresh_seconds=30)
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 0
    s.instance.denied.discard("tempdb.sys.database_files")
    s.clock.advance(15)
    got = scrape(scraper, config)  # sizes are read, the settings not yet: no refresh is due
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 0
    assert any("tempdb growth settings not read" in str(getattr(r, "err", "")) for r in caplog.records)
    # The refresh interval runs on the exporter's monotonic clock, not the scenario's: make it due.
    scraper._state(config.targets["standin"]).next_slow_at = 0.0
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 1
    got = scrape(scraper, config)  # no settings in this batch: the ones read are kept
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 1
    assert value(got, "mssql_tempdb_percent_growth_files") == 0


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


def test_answer_just_over_the_timeout_is_down_in_time_then_recovers(standin, scraper_for, caplog):
    caplog.set_level(logging.INFO)
    s = standin("healthy-oltp")
    config = s.config(query_timeout_seconds=2)
    scraper = scraper_for(config)
    scrape(scraper, config)
    s.handler.faults.delay_seconds = 2.8
    got, elapsed = timed_scrape(scraper, config, timeout=2.5)
    assert elapsed < 2.5 + SLACK
    assert_down_and_nothing_stale(got)
    # Either the driver's query timeout (HYT00) or the exporter's own deadline ends it; both are logged.
    assert_logged(caplog, "Timeout expired", "timed out waiting for SQL Server")
    assert not records(caplog, RETRY_MSG)  # a timeout is never retried
    s.handler.faults.delay_seconds = 0
    assert_recovers(scraper, config)


# ---- concurrency ---------------------------------------------------------------------------------


def test_concurrent_probes_never_share_the_connection_at_once(standin, scraper_for):
    s = standin("healthy-oltp")
    other = standin("numa-4-nodes")
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


def test_one_hung_target_among_healthy_ones_under_concurrent_probes(standin, scraper_for, caplog):
    healthy = {"a": standin("healthy-oltp"), "b": standin("numa-4-nodes"), "c": standin("memory-pressure")}
    hung = standin("healthy-oltp")
    targets = {name: s.target_yaml(name) for name, s in healthy.items()}
    targets["h"] = hung.target_yaml("h", query_timeout_seconds=2)
    config = make_config(targets)
    scraper = scraper_for(config)
    for name in targets:  # warm: logged in, batch text parsed by the stand-in
        assert value(scrape(scraper, config, target=name), "mssql_up") == 1
    timeout = 4.0

    def round_of_probes(per_target: int) -> list[tuple[str, float, float]]:
        outcomes: list[tuple[str, float, float]] = []
        lock = threading.Lock()

        def probe(name: str) -> None:
            got, elapsed = timed_scrape(scraper, config, timeout, target=name)
            with lock:
                outcomes.append((name, value(got, "mssql_up"), elapsed))

        threads = [
            threading.Thread(target=probe, args=(name,)) for name in targets for _ in range(per_target)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 10)
        assert not any(t.is_alive() for t in threads), "a probe did not answer"
        return outcomes

    caplog.clear()
    hung.handler.faults.hang_batch = True
    outcomes = round_of_probes(4)
    assert len(outcomes) == 16
    for name, up, elapsed in outcomes:
        assert up == (0.0 if name == "h" else 1.0), (name, up, elapsed)
        assert elapsed < timeout + SLACK, (name, elapsed)
    failed = records(caplog, "scrape failed")
    assert failed and {r.target for r in failed} == {"h"}
    # Every way of running out of time is fine (a probe whose worker got the lock at its deadline says
    # "no time left"); what must not appear is a reason that is not about time.
    timing = ("timed out waiting", "still running", "HYT00", "no time left")
    assert all(any(t in r.err for t in timing) for r in failed), [r.err for r in failed]
    hung.handler.faults.hang_batch = False
    settle("h")
    outcomes = round_of_probes(2)
    assert len(outcomes) == 8 and all(up == 1.0 for _, up, _ in outcomes), outcomes


# ---- the connection died while idle (restart, failover, killed session) --------------------------


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


def test_a_worker_stuck_on_a_hung_target_shows_as_busy(standin, scraper_for):
    from mssql_memory_exporter.connection import WORKERS
    from mssql_memory_exporter.self_metrics import worker_families

    s = standin("healthy-oltp")
    config = make_config({"hung": s.target_yaml("hung", query_timeout_seconds=2)})
    scraper = scraper_for(config)
    assert value(scrape(scraper, config, target="hung"), "mssql_up") == 1
    s.handler.faults.hang_batch = True
    got, _ = timed_scrape(scraper, config, 1.5, target="hung")
    assert value(got, "mssql_up") == 0
    busy = samples_of(exposition(worker_families(WORKERS)))
    assert value(busy, "mssql_exporter_scrape_workers", state="busy") >= 1
    assert any(t.name == "scrape-hung" for t in threading.enumerate())
    s.handler.faults.hang_batch = False
    settle("hung")
