"""Whole scrapes without a socket, for the fuzz (tests/unit/test_fuzz.py): the stand-in's interpreter answers
the exporter's real batch for a scenario, each section's answer may be edited on the way, and the Scraper
probes a target as a real scrape does; `check_scrape` is what every such scrape must satisfy."""

from __future__ import annotations

import copy
import functools
import logging
import math
from collections.abc import Callable

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.connection.batch import ResultSet
from mssql_memory_exporter.scrape.scraper import Scraper
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import exposition, make_config
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter


@functools.cache
def _loaded(scenario: str) -> Scenario:
    """A scenario read once (YAML parsing was a third of the fuzz's time); each server plays a copy."""
    return Scenario.load(scenario)


class ScenarioServer:
    """Stands in for the target's connection: the stand-in's interpreter answers the exporter's real
    batch for a scenario (so slow sections and volume lookups come and go as in production), and `edit`
    changes each section's answer before the exporter sees it."""

    def __init__(self, scenario: str, edit: Callable[[ResultSet], list[ResultSet]]) -> None:
        self.clock = Clock(manual=True)
        self.interpreter = Interpreter(Instance(copy.deepcopy(_loaded(scenario)), self.clock))
        self.edit = edit
        self.batches = 0

    def run(self, sql: str, deadline: float) -> list[ResultSet]:
        self.clock.advance(15.0)
        self.batches += 1
        answer = [
            ResultSet(tuple(c.name for c in reply.columns), list(reply.rows))
            for reply in self.interpreter.run(sql)
            if hasattr(reply, "columns")
        ]
        return [edited for rs in answer for edited in self.edit(rs)]

    def close(self) -> None:
        pass


FUZZ_TARGET = {
    "host": "127.0.0.1",
    "port": 1,
    "auth_module": "standin",
    "pmem_volumes": ["/mnt/pmem0"],
    "volume_map": {"/var/opt/mssql/tempdb": "/var/opt/mssql/tempdb"},
    "ssd_pools": {
        "data": {
            "drives": {"count": 2, "tbw_per_drive_tb": 7000},
            "planned_lifetime_years": 5,
            "in_service_date": "2022-03-01",
            "volumes": ["/var/opt/mssql/data", "/var/opt/mssql/tempdb", "T:\\"],
        }
    },
}
FUZZ_CONFIG = make_config({"fuzz": FUZZ_TARGET})


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def scrape_through(server: ScenarioServer, scrapes: int) -> list[tuple[str, list[logging.LogRecord]]]:
    """Scrape the fuzz target `scrapes` times, as the exporter does: each exposition, with what that
    scrape logged."""
    scraper = Scraper(FUZZ_CONFIG)
    # Every scrape's failures must say why (check_scrape), also a repeat of the previous scrape's reason,
    # which the exporter otherwise logs once and then counts.
    scraper.repeat_log.interval = 0.0
    target = FUZZ_CONFIG.targets["fuzz"]
    scraper._state(target).connection = server  # type: ignore[assignment]
    logger = logging.getLogger("mssql_memory_exporter")
    out = []
    for _ in range(scrapes):
        handler = Records()
        logger.addHandler(handler)
        try:
            families = scraper.probe(target, 5.0)  # an exception escaping here fails the test
        finally:
            logger.removeHandler(handler)
        out.append((exposition(families), handler.records))
    return out


def check_scrape(text: str, records: list[logging.LogRecord]) -> dict[str, float]:
    """The exposition parses, the target is up, every collector says whether it succeeded, a failed one
    logged why (under its name), and nothing exported is NaN or infinite."""
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert [s.value for s in families["mssql_up"].samples] == [1.0]
    success = {s.labels["collector"]: s.value for s in families["mssql_exporter_collector_success"].samples}
    enabled = {s.labels["collector"]: s.value for s in families["mssql_exporter_collector_enabled"].samples}
    # Left out (enabled 0, no success series) only where SQL Server 2025's views are missing.
    left_out = {m.name for m in COLLECTORS if m.left_out_when_missing and enabled.get(m.name) == 0}
    assert set(success) == {module.name for module in COLLECTORS} - left_out
    for collector, ok in success.items():
        if ok == 0:
            reasons = [r for r in records if getattr(r, "collector", None) == collector]
            assert reasons, f"{collector} failed without logging why"
            assert all(getattr(r, "err", None) or r.exc_info for r in reasons), [r.__dict__ for r in reasons]
    for family in families.values():
        for sample in family.samples:
            assert math.isfinite(sample.value), (sample, family.type)
    return success
