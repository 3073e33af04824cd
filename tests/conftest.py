"""Fixtures: stand-in SQL Servers playing scenarios, and exporter configs pointing at them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exporter"))

from mssql_memory_exporter.config import ExporterConfig, parse_config  # noqa: E402
from mssql_memory_exporter.scrape import Scraper  # noqa: E402

from tests.standin.handler import ScenarioHandler  # noqa: E402
from tests.standin.scenario import Clock, Instance, Scenario  # noqa: E402
from tests.standin.server import StandInServer  # noqa: E402

# Deliberately distinctive, so a test can grep every output of the run for it.
TEST_PASSWORD = "Stand1n-S3cret-q7Zx"
PASSWORD_ENV = "MSSQL_STANDIN_TEST_PASSWORD"


@dataclass
class StandIn:
    server: StandInServer
    handler: ScenarioHandler
    instance: Instance
    clock: Clock

    @property
    def port(self) -> int:
        return self.server.port

    def target_yaml(self, name: str = "standin", **overrides: object) -> dict[str, object]:
        target: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.port,
            "driver": "freetds",
            "encryption": "off",
            "login_timeout_seconds": 2,
            # The stand-in parses each new batch text with sqlfluff once (a few hundred ms, more on a
            # loaded machine); fault tests that need tight timeouts set them explicitly.
            "query_timeout_seconds": 4,
            "auth_module": "standin",
        }
        target.update(overrides)
        return target

    def config(self, **overrides: object) -> ExporterConfig:
        return make_config({"standin": self.target_yaml(**overrides)})


def make_config(targets: dict[str, dict[str, object]], default_target: str | None = None) -> ExporterConfig:
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    data: dict[str, object] = {
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": targets,
    }
    if default_target:
        data["default_target"] = default_target
    return parse_config(data, source="test-config")


@pytest.fixture
def standin() -> Iterator[callable]:
    """Start stand-ins: `standin("memory-pressure")`; all are stopped after the test."""
    started: list[StandIn] = []

    def start(scenario: str = "healthy-oltp", manual_clock: bool = True) -> StandIn:
        clock = Clock(manual=manual_clock)
        instance = Instance(Scenario.load(scenario), clock)
        handler = ScenarioHandler(instance, user="exporter", password=TEST_PASSWORD)
        server = StandInServer(handler)
        server.start()
        s = StandIn(server, handler, instance, clock)
        started.append(s)
        return s

    yield start
    for s in started:
        s.server.stop()


@pytest.fixture
def scraper_for() -> Iterator[callable]:
    scrapers: list[Scraper] = []

    def make(config: ExporterConfig) -> Scraper:
        scraper = Scraper(config)
        scrapers.append(scraper)
        return scraper

    yield make
    for scraper in scrapers:
        scraper.close()


def exposition(families: list) -> str:
    registry = CollectorRegistry()

    class _Fixed:
        def collect(self) -> list:
            return families

    registry.register(_Fixed())
    return generate_latest(registry).decode()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        raise AssertionError(f"{name}{labels} not exported; have: {sorted({k[0] for k in samples})}")
    return samples[key]


def scrape(
    scraper: Scraper, config: ExporterConfig, target: str = "standin", timeout: float = 5.0
) -> Samples:
    return samples_of(exposition(scraper.probe(config.targets[target], timeout)))


# Property tests check what comes out, not how fast: on a loaded 2-core CI machine hypothesis' default
# 200 ms deadline per example fails them at random (seen with the pool-config property test).
settings.register_profile("project", deadline=None)
settings.load_profile("project")
