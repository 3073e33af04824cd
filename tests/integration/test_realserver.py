"""The same assertions against the stand-in and, when MSSQL_TEST_* variables name one, a real SQL Server.

Every test here takes the `backend` fixture, so it runs once against the stand-in playing healthy-oltp
(always) and once against the real server (skipped unless configured). A test that only the real server
can answer honestly (there is none) or only the stand-in can (none either) does not belong here.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyodbc
import pytest
from mssql_memory_exporter.config import TargetConfig, build_connection_string, parse_config, resolve_driver
from mssql_memory_exporter.scrape.scraper import Scraper
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import exposition, samples_of, value
from tests.integration.test_scenarios import EXPECTED_COLLECTORS
from tests.timeouts import PATIENT_SECONDS

REQUIRED = ("MSSQL_TEST_HOST", "MSSQL_TEST_USER", "MSSQL_TEST_PASSWORD")
APP_NAME = "mssql-memory-exporter"  # the APP= the exporter's connection string sets


@dataclass
class Backend:
    name: str
    scraper: Scraper
    target: TargetConfig
    # Identities of the exporter's sessions on the server, as the server sees them.
    exporter_sessions: Callable[[], set[object]]

    def probe(self) -> str:
        return exposition(self.scraper.probe(self.target, PATIENT_SECONDS))


def _real_backend() -> Iterator[Backend]:
    env = os.environ
    if not all(env.get(v) for v in REQUIRED):
        pytest.skip(f"set {', '.join(REQUIRED)} to run against a real SQL Server")
    config = parse_config(
        {
            "auth_modules": {
                "real": {"username": env["MSSQL_TEST_USER"], "password_env": "MSSQL_TEST_PASSWORD"}
            },
            "targets": {
                "real": {
                    "host": env["MSSQL_TEST_HOST"],
                    "port": int(env.get("MSSQL_TEST_PORT", "1433")),
                    "driver": env.get("MSSQL_TEST_DRIVER", "auto"),
                    "encryption": env.get("MSSQL_TEST_ENCRYPTION", "require"),
                    "trust_server_certificate": env.get("MSSQL_TEST_TRUST_CERT", "false").lower() == "true",
                    "auth_module": "real",
                }
            },
        },
        source="MSSQL_TEST_*",
    )
    target = config.targets["real"]
    creds = config.credentials_for(target)
    driver = resolve_driver(target.driver, pyodbc.drivers(), encryption=target.encryption)
    # A second session of our own, to look at the exporter's from the server's side.
    watcher = pyodbc.connect(
        build_connection_string(target, driver, creds.password, username=creds.username), autocommit=True
    )

    def sessions() -> set[object]:
        rows = watcher.cursor().execute(
            "SELECT session_id, login_time FROM sys.dm_exec_sessions"
            " WHERE program_name = ? AND host_process_id = ?",
            APP_NAME,
            os.getpid(),
        )
        return {(r.session_id, r.login_time) for r in rows.fetchall()}

    scraper = Scraper(config)
    try:
        yield Backend("real", scraper, target, sessions)
    finally:
        scraper.close()
        watcher.close()


@pytest.fixture(params=["standin", pytest.param("real", marks=pytest.mark.realserver)])
def backend(request, standin, scraper_for) -> Iterator[Backend]:
    if request.param == "real":
        yield from _real_backend()
        return
    s = standin("healthy-oltp")
    s.clock.advance(100)  # a real server has been up a while: its counters are not all zero
    config = s.config()

    def sessions() -> set[object]:
        return {x.spid for x in s.server.sessions if x.logged_in and not x.closed}

    yield Backend("standin", scraper_for(config), config.targets["standin"], sessions)


def test_every_collector_succeeds_and_core_metrics_are_sane(backend):
    got = samples_of(backend.probe())
    assert value(got, "mssql_up") == 1
    for collector in EXPECTED_COLLECTORS:
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    assert value(got, "mssql_page_life_expectancy_seconds") >= 0
    assert 0 <= value(got, "mssql_buffer_cache_hit_ratio") <= 1
    assert value(got, "mssql_memory_total_bytes") > 0
    assert value(got, "mssql_batch_requests_total") > 0
    nodes = [k for k in got if k[0] == "mssql_buffer_node_page_life_expectancy_seconds"]
    assert nodes, "no Buffer Node rows: the NUMA filter matched nothing"


def test_exposition_is_promtool_clean_and_typed_by_name(backend):
    text = backend.probe()
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0 and not said.strip(), said
    for family in text_string_to_metric_families(text):
        # The parser strips _total from counter family names; a counter must have had it.
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        elif family.name.endswith("_total"):
            pytest.fail(f"{family.name} ends in _total but is typed {family.type}")


def test_one_persistent_session_and_steady_start_time(backend):
    first = samples_of(backend.probe())
    sessions = backend.exporter_sessions()
    assert len(sessions) == 1, f"expected the exporter's one session, found {sessions}"
    second = samples_of(backend.probe())
    third = samples_of(backend.probe())
    assert backend.exporter_sessions() == sessions, "the exporter opened a new session between scrapes"
    assert value(first, "mssql_start_time_seconds") == value(third, "mssql_start_time_seconds")
    assert value(second, "mssql_batch_requests_total") >= value(first, "mssql_batch_requests_total")
