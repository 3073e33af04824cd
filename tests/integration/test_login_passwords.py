"""Logins with awkward passwords, for real: FreeTDS over TDS against the stand-in, which decodes the
password the client really sent (LOGIN7) and refuses any other.

The connection string used to end in `PWD={...}` with no closing `;`, and FreeTDS 1.3 then kept the
closing brace as part of the password: every password needing braces (`;`, leading or trailing blanks)
failed with a bare "Login failed". A `}` cannot be sent by FreeTDS before 1.4 at all; start-up refuses it
there, naming the target and the reason, and a password changed to one at run time fails its scrape
with the same reason instead of one more failed login.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mssql_memory_exporter.config import parse_config
from mssql_memory_exporter.connection.driver_version import FIRST_TO_PARSE_BRACES, freetds_version

from tests.conftest import scrape, value
from tests.timeouts import PATIENT_SECONDS

ENV = "MSSQL_LOGIN_TEST_PASSWORD"

# One per character class the connection string must carry; none contains '}'.
SENDABLE = {
    "semicolon": "pa;ss;word",
    "open-brace": "{pa{ss",
    "equals": "pa=ss==word",
    "quotes": "pa'ss\"word",
    "leading-blank": " password",
    "trailing-blank": "password ",
    "blanks-inside": "pass  word",
    "non-ascii": "pässwörd-✓-密码",
    "everything": " {a;b=c'd\"é ",
}
CLOSING_BRACE = {"closing-brace": "pa}ss", "doubled": "}}pass", "braced": "{pass}"}
FREETDS = freetds_version("FreeTDS")
OLD_FREETDS = FREETDS is not None and FREETDS[:2] < FIRST_TO_PARSE_BRACES


def config_for(standin_port: int) -> dict:
    return {
        "auth_modules": {"m": {"username": "exporter", "password_env": ENV}},
        "targets": {
            "t": {
                "host": "127.0.0.1",
                "port": standin_port,
                "driver": "freetds",
                "encryption": "off",
                "login_timeout_seconds": PATIENT_SECONDS,
                "query_timeout_seconds": PATIENT_SECONDS,
                "auth_module": "m",
            }
        },
    }


def start_with_password(standin, password: str):
    s = standin("healthy-oltp")
    s.handler.set_password(password)
    return s


@pytest.fixture
def password_env():
    yield
    os.environ.pop(ENV, None)


@pytest.mark.parametrize("password", SENDABLE.values(), ids=SENDABLE.keys())
def test_login_succeeds_through_freetds(standin, scraper_for, password_env, password):
    s = start_with_password(standin, password)
    os.environ[ENV] = password
    config = parse_config(config_for(s.port), source="test")
    got = scrape(scraper_for(config), config, "t")
    assert value(got, "mssql_up") == 1


def test_the_standin_refuses_a_wrong_password(standin, scraper_for, password_env):
    """The tests above mean something only if a password that differs in its last character fails."""
    s = start_with_password(standin, "pa;ss;word")
    os.environ[ENV] = "pa;ss;wore"
    config = parse_config(config_for(s.port), source="test")
    got = scrape(scraper_for(config), config, "t")
    assert value(got, "mssql_up") == 0


@pytest.mark.skipif(not OLD_FREETDS, reason=f"FreeTDS {FREETDS} parses '}}' (1.4 and later)")
@pytest.mark.parametrize("password", CLOSING_BRACE.values(), ids=CLOSING_BRACE.keys())
def test_closing_brace_refused_at_start_up_on_old_freetds(tmp_path: Path, password):
    config = tmp_path / "exporter.yml"
    config.write_text(
        "auth_modules:\n  m: {username: exporter, password_env: " + ENV + "}\n"
        "targets:\n  prod-a: {host: 127.0.0.1, port: 1, driver: freetds, encryption: 'off', auth_module: m}\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", "--config.file", str(config),
         "--web.listen-address", "127.0.0.1:0"],
        capture_output=True, text=True, timeout=30, env={**os.environ, ENV: password}, check=False,
    )
    assert result.returncode == 2, result.stderr
    dotted = ".".join(map(str, FREETDS))
    assert f"error: targets.prod-a (auth_modules.m): the password contains '}}', which FreeTDS {dotted}" in (
        result.stderr
    )
    assert "odbc18" in result.stderr  # says what to do
    assert password not in result.stdout + result.stderr


@pytest.mark.skipif(not OLD_FREETDS, reason=f"FreeTDS {FREETDS} parses '}}' (1.4 and later)")
def test_closing_brace_set_at_run_time_fails_the_scrape_without_a_login(standin, scraper_for, password_env):
    s = start_with_password(standin, "pa}ss")
    os.environ[ENV] = "pa}ss"
    config = parse_config(config_for(s.port), source="test")
    scraper = scraper_for(config)
    got = scrape(scraper, config, "t")
    assert value(got, "mssql_up") == 0
    assert s.handler.login_attempts == 0, "FreeTDS cannot send it: no login may be tried"


def test_freetds_version_is_read_from_the_resolved_driver():
    # Debian 12's tdsodbc is 1.3.17; a machine with another FreeTDS reports its own, but never nothing.
    assert FREETDS is not None and FREETDS >= (1, 0, 0), FREETDS
