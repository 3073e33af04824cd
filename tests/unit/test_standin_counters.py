"""The stand-in's performance-counter rows: named counter instances (the Plan Cache object's cache types),
as SQL Server reports them in sys.dm_os_performance_counters' instance_name column."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.collectors.perfcounters import CounterKind, PerfIndex, parse_perf_rows

from tests.standin.scenario import Clock, Instance, Scenario

CACHE_TYPES = (
    "SQL Plans",
    "Object Plans",
    "Bound Trees",
    "Extended Stored Procedures",
    "Temporary Tables & Table Variables",
    "_Total",
)


def plan_cache(scenario: str) -> PerfIndex:
    rows = parse_perf_rows(Instance(Scenario.load(scenario), Clock(manual=True)).perf_rows())
    return PerfIndex(r for r in rows if r.object == "Plan Cache")


def test_named_instances_give_one_row_per_instance_with_the_base_named_as_sql_server_does():
    index = plan_cache("base")
    assert index.instances() == sorted(CACHE_TYPES)
    for instance in CACHE_TYPES:
        for counter in ("Cache Pages", "Cache Object Counts", "Cache Objects in use"):
            assert index.get(counter, instance).kind is CounterKind.GAUGE  # type: ignore[union-attr]
        ratio = index.get("Cache Hit Ratio", instance)
        assert ratio is not None and ratio.kind is CounterKind.FRACTION
    raw = Instance(Scenario.load("base"), Clock(manual=True)).perf_rows()
    bases = {str(r["counter_name"]).rstrip() for r in raw if "Plan Cache" in str(r["object_name"])}
    # Capitalised like its counter (unlike "Buffer cache hit ratio base").
    assert "Cache Hit Ratio Base" in bases
    assert index.get("Cache Pages", "SQL Plans").value == 65536  # type: ignore[union-attr]


def test_totals_add_up_and_the_bloat_is_in_single_use_sql_plans():
    for scenario in ("base", "plan-cache-bloat"):
        index = plan_cache(scenario)
        for counter in ("Cache Pages", "Cache Object Counts"):
            parts = sum(index.get(counter, i).value for i in CACHE_TYPES[:-1])  # type: ignore[union-attr]
            assert index.get(counter, "_Total").value == parts, (scenario, counter)  # type: ignore[union-attr]
    bloat, base = plan_cache("plan-cache-bloat"), plan_cache("base")
    assert bloat.get("Cache Pages", "SQL Plans").value * 8 == 6291456  # the CACHESTORE_SQLCP clerk, in KB
    assert bloat.ratio("Cache Hit Ratio", "Cache Hit Ratio Base", "SQL Plans") < 0.1  # type: ignore[operator]
    assert base.ratio("Cache Hit Ratio", "Cache Hit Ratio Base", "SQL Plans") > 0.8  # type: ignore[operator]


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"instances": {}}, "instances must be the only key"),
        ({"instances": {"SQL Plans": 1}, "gauge": 2}, "instances must be the only key"),
        ({"instances": {"": 1}}, "instance name ''"),
        ({"instances": {"SQL Plans": "many"}}, r"instances\.SQL Plans: expected a number"),
    ],
)
def test_bad_named_instances_are_refused_naming_the_counter(tmp_path: Path, spec: object, problem: str):
    path = tmp_path / "odd.yml"
    path.write_text(yaml.safe_dump({"extends": "base", "counters": {"Plan Cache": {"Cache Pages": spec}}}))
    with pytest.raises(ValueError, match=rf"odd\.yml: counters\.Plan Cache\.Cache Pages.*{problem}"):
        Scenario.load(path)
