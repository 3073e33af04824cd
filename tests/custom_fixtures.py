"""Shared pieces of the custom collector tests: configs with custom collectors, and a scraper whose
targets are answered in process by the stand-in's handler (its strict SQL check and its interpreter, no
socket, no driver), so the scrape-time facts of a custom collector are tested on rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mssql_memory_exporter.config import ExporterConfig, parse_config
from mssql_memory_exporter.connection.batch import ResultSet
from mssql_memory_exporter.connection.session import ScrapeFailed
from mssql_memory_exporter.scrape.scraper import Outcome, Scraper

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, exposition, samples_of
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tds import SqlError

BUILT_IN = ["server_properties", "buffer_manager", "wait_stats"]
WAITS = {
    "name": "waits",
    "query": "SELECT wait_type, waiting_tasks_count, wait_time_ms FROM sys.dm_os_wait_stats",
    "columns": ["wait_type", "waiting_tasks_count", "wait_time_ms"],
    "metrics": [
        {
            "name": "mssql_custom_waits_total",
            "type": "counter",
            "help": "Waits by type, from the site's own query.",
            "value_column": "waiting_tasks_count",
            "label_columns": ["wait_type"],
            "static_labels": {"source": "custom"},
        }
    ],
}


def custom(name: str, **changes: Any) -> dict[str, Any]:
    """The WAITS collector renamed (its metric too), with `changes` applied."""
    body = {**WAITS, "name": name, **changes}
    if "metrics" not in changes:
        metric = {**WAITS["metrics"][0], "name": f"mssql_custom_{name}_total"}
        body["metrics"] = [metric]
    return body


def config_with(
    collectors: Sequence[Mapping[str, Any]], target: Mapping[str, Any] | None = None, **top: Any
) -> ExporterConfig:
    import os

    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    # A few built-in collectors beside the custom ones: the stand-in parses each new batch text with
    # sqlfluff (seconds for the whole batch), and these are enough to show the others still export.
    include = [*BUILT_IN, *(c["name"] for c in collectors if isinstance(c.get("name"), str))]
    body = {"host": "127.0.0.1", "port": 1, "auth_module": "standin", "collectors": {"include": include}}
    data = {
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"standin": {**body, **(target or {})}},
        "custom_collectors": list(collectors),
        **top,
    }
    return parse_config(data, source="custom.yml")


class InProcess:
    """A target connection answered by a stand-in handler in this process."""

    def __init__(self, handler: ScenarioHandler) -> None:
        self.handler = handler
        self.sent: list[str] = []

    def run(self, sql: str, deadline: float) -> list[ResultSet]:
        self.sent.append(sql)
        reply = self.handler.answer(sql)
        errors = [r for r in reply if isinstance(r, SqlError)]
        if errors:
            raise ScrapeFailed(f"{errors[0].number}: {errors[0].message}")
        return [ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply]

    def retire(self) -> None:
        pass

    def discard_soon(self) -> None:
        pass


class Offline:
    """A scraper of one config whose target `standin` plays `scenario` in process."""

    def __init__(self, config: ExporterConfig, scenario: str = "healthy-oltp") -> None:
        self.config = config
        self.instance = Instance(Scenario.load(scenario), Clock(manual=True))
        self.instance.clock.advance(60)
        self.handler = ScenarioHandler(self.instance)
        self.connection = InProcess(self.handler)
        self.scraper = Scraper(config)
        self.scraper._state(config.targets["standin"]).connection = self.connection  # type: ignore[assignment]

    def scrape(
        self, collect: Sequence[str] | None = None, outcomes: dict[str, Outcome] | None = None
    ) -> dict:
        target = self.config.targets["standin"]
        families = self.scraper.probe(target, 60.0, collect, outcomes)
        return samples_of(exposition(families))

    def reload(self, config: ExporterConfig) -> None:
        self.config = config
        self.scraper.reload(config)
        self.scraper._state(config.targets["standin"]).connection = self.connection  # type: ignore[assignment]


def success(samples: dict, collector: str) -> float | None:
    return samples.get(("mssql_exporter_collector_success", (("collector", collector),)))


def enabled(samples: dict, collector: str) -> float | None:
    return samples.get(("mssql_exporter_collector_enabled", (("collector", collector),)))


def names(samples: dict) -> set[str]:
    return {name for name, _ in samples}
