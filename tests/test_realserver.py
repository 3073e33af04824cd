"""The same assertions against a real SQL Server, when one is named by MSSQL_TEST_* variables."""

from __future__ import annotations

import os

import pytest

from tests.conftest import exposition, samples_of, value

pytestmark = pytest.mark.realserver

REQUIRED = ("MSSQL_TEST_HOST", "MSSQL_TEST_USER", "MSSQL_TEST_PASSWORD")
if not all(os.environ.get(v) for v in REQUIRED):
    pytest.skip(
        "set MSSQL_TEST_HOST, MSSQL_TEST_USER and MSSQL_TEST_PASSWORD to run against a real SQL Server",
        allow_module_level=True,
    )

from mssql_memory_exporter.config import parse_config  # noqa: E402
from mssql_memory_exporter.scrape import Scraper  # noqa: E402

from tests.test_scenarios import EXPECTED_COLLECTORS  # noqa: E402


@pytest.fixture
def real():
    env = os.environ
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
    scraper = Scraper(config)
    yield scraper, config.targets["real"]
    scraper.close()


def test_every_collector_succeeds_and_core_metrics_are_sane(real):
    scraper, target = real
    got = samples_of(exposition(scraper.probe(target, 10)))
    assert value(got, "mssql_up") == 1
    for collector in EXPECTED_COLLECTORS:
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    assert value(got, "mssql_page_life_expectancy_seconds") >= 0
    assert 0 <= value(got, "mssql_buffer_cache_hit_ratio") <= 1
    assert value(got, "mssql_memory_total_bytes") > 0
    assert value(got, "mssql_batch_requests_total") > 0
    nodes = [k for k in got if k[0] == "mssql_buffer_node_page_life_expectancy_seconds"]
    assert nodes, "no Buffer Node rows: the NUMA filter matched nothing"


def test_one_round_trip_and_steady_start_time(real):
    scraper, target = real
    first = samples_of(exposition(scraper.probe(target, 10)))
    second = samples_of(exposition(scraper.probe(target, 10)))
    assert value(first, "mssql_start_time_seconds") == value(second, "mssql_start_time_seconds")
    assert value(second, "mssql_batch_requests_total") >= value(first, "mssql_batch_requests_total")
