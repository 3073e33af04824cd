"""What the failure tests (tests/integration/test_failing_*.py, tests/integration/test_concurrent_probes.py)
check after a fault:
(a) what the scrape returns (`mssql_up 0` in time and nothing stale), (b) what is logged (the
`scrape failed`/`section failed` record with the target and a recognisable error), and (c) that the
next scrape on the SAME Scraper is healthy again once the fault is cleared."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from mssql_memory_exporter.scrape.scrape_metrics import LOGIN_BACKOFF, SCRAPE_DURATION, UP

from tests.conftest import scrape, value
from tests.standin.server import StandInServer
from tests.timeouts import SLACK_SECONDS

TARGET_METRIC = "mssql_page_life_expectancy_seconds"
RETRY_MSG = "connection lost while idle, logging in again"
SLACK = SLACK_SECONDS  # what a loaded machine may add to a deadline before the answer is out


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
