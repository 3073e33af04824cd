"""A refused login is not retried at once: real logins through FreeTDS against the stand-in, which counts
every LOGIN7 it receives."""

from __future__ import annotations

import logging
import os
import time

import pytest
from mssql_memory_exporter.config import parse_config
from mssql_memory_exporter.connection.login_backoff import (
    FIRST_SECONDS,
    MAX_SECONDS,
    LoginBackoff,
    fingerprint,
)

from tests.conftest import scrape, value
from tests.test_login_passwords import ENV, config_for


@pytest.fixture
def password_env():
    yield
    os.environ.pop(ENV, None)


def test_a_refused_login_is_not_retried_until_the_password_changes(
    standin, scraper_for, password_env, driver
):
    s = standin("healthy-oltp")
    s.handler.set_password("right-one")
    os.environ[ENV] = "wrong-one"
    data = config_for(s.port)
    data["targets"]["t"]["driver"] = driver
    config = parse_config(data, source="test")
    scraper = scraper_for(config)

    got = scrape(scraper, config, "t")
    assert value(got, "mssql_up") == 0
    assert s.handler.login_attempts == 1
    assert FIRST_SECONDS - 5 < value(got, "mssql_exporter_login_backoff_seconds") <= FIRST_SECONDS

    for _ in range(5):  # Prometheus keeps scraping: no further login reaches the server
        got = scrape(scraper, config, "t")
        assert value(got, "mssql_up") == 0
    assert s.handler.login_attempts == 1

    os.environ[ENV] = "right-one"  # the operator fixes the secret: the next scrape logs in
    got = scrape(scraper, config, "t")
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_login_backoff_seconds") == 0
    assert s.handler.login_attempts == 2


def test_no_back_off_without_a_refusal(standin, scraper_for, password_env):
    s = standin("healthy-oltp")
    s.handler.set_password("right-one")
    os.environ[ENV] = "right-one"
    config = parse_config(config_for(s.port), source="test")
    got = scrape(scraper_for(config), config, "t")
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_login_backoff_seconds") == 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_back_off_doubles_up_to_its_cap_and_ends_on_a_new_password():
    clock = FakeClock()
    backoff = LoginBackoff("t", clock=clock)
    old, new = fingerprint("u", "old"), fingerprint("u", "new")
    steps = []
    for _ in range(8):
        steps.append(backoff.refused(old))
        assert backoff.blocked_for(old) == steps[-1]
        clock.now += steps[-1]
        assert backoff.blocked_for(old) == 0
    assert steps == [30, 60, 120, 240, 480, 900, 900, 900]
    assert MAX_SECONDS == 900
    backoff.refused(old)
    assert backoff.blocked_for(new) == 0  # a changed password may log in at once
    assert backoff.seconds_left() == 0
    assert backoff.refused(new) == FIRST_SECONDS  # and starts from the first step if refused too


def test_a_success_resets_the_back_off():
    clock = FakeClock()
    backoff = LoginBackoff("t", clock=clock)
    cred = fingerprint("u", "p")
    backoff.refused(cred)
    clock.now += 30
    backoff.succeeded()
    assert backoff.refused(cred) == FIRST_SECONDS


def test_the_back_off_logs_one_line_and_the_recovery_counts_every_failure(
    standin, scraper_for, password_env, caplog
):
    """Issue 25, defect 3: the reason carried a countdown ("next login attempt in 6 s", "4 s", ...), so
    every scrape logged a "new" line, and the recovery said failures=1 after a dozen failures."""
    s = standin("healthy-oltp")
    s.handler.set_password("right-one")
    os.environ[ENV] = "wrong-one"
    config = parse_config(config_for(s.port), source="test")
    scraper = scraper_for(config)
    caplog.set_level(logging.INFO)
    failed = 0
    for _ in range(8):  # across several seconds, so a countdown in whole seconds would have changed
        assert value(scrape(scraper, config, "t"), "mssql_up") == 0
        failed += 1
        time.sleep(0.5)
    lines = [r for r in caplog.records if r.getMessage() == "scrape failed"]
    # The refused login itself, then the back-off: two reasons, two lines, however many scrapes.
    assert len(lines) == 2, [r.err for r in lines]
    assert "Login failed" in lines[0].err and "back-off" in lines[1].err
    os.environ[ENV] = "right-one"
    assert value(scrape(scraper, config, "t"), "mssql_up") == 1
    [recovered] = [r for r in caplog.records if r.getMessage() == "scrape succeeded again"]
    assert recovered.failures == failed
