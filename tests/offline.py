"""The exporter's whole batch answered by the stand-in's interpreter in process (no socket, no driver):
the rows each collector's own test module (tests/test_collector_<name>.py) feeds its collector.
"""

from __future__ import annotations

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import CollectorRecord, ScrapeContext, SectionResult
from mssql_memory_exporter.connection.batch import ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, samples_of
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter

SECTIONS = sections_of(COLLECTORS)
BATCH = render_batch(SECTIONS)


def collect(results: dict[str, SectionResult], workload: str = "oltp") -> str:
    out = FamilyBuilder({})
    ctx = ScrapeContext(now=0.0, workload=workload, memo={})
    for module in COLLECTORS:
        if all(results[tag].error is None for tag in module.sections):
            module.collect(results, ctx, out)
    return exposition(out.families())


def results_for(scenario: str, at: float = 60.0) -> dict[str, SectionResult]:
    clock = Clock(manual=True)
    instance = Instance(Scenario.load(scenario), clock)
    clock.advance(at)
    reply = Interpreter(instance).run(BATCH)
    sets = [ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply]
    return route(sets, SECTIONS)


def perf_result(*rows: tuple[str, str, str, int, int]) -> dict[str, SectionResult]:
    columns = ("section", "object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
    return {"perf": SectionResult(rows=[dict(zip(columns, ("perf", *r), strict=True)) for r in rows])}


class NamedTarget:
    """A target view with a name, for the log lines that name the target."""

    name = "prod-a"


def run_with(scenario: str, change) -> dict[str, SectionResult]:
    instance = Instance(Scenario.load(scenario), Clock(manual=True))
    change(instance.scenario.views)
    instance.clock.advance(60)
    reply = Interpreter(instance).run(BATCH)
    return route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)


def samples_offline(scenario: str, *records: CollectorRecord, at: float = 60.0) -> dict:
    """The samples of these collectors alone, from the scenario's rows at `at` (no network)."""
    results = results_for(scenario, at)
    out = FamilyBuilder({})
    ctx = ScrapeContext(now=0.0, workload="oltp", memo={})
    for record in records:
        record.collect(results, ctx, out)
    return samples_of(exposition(out.families()))
