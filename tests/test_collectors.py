"""Row parsers without the network: scenario rows -> batch routing -> collectors -> exposition. What
every collector shares (the golden expositions, perf-counter parsing, routing, impossible values) is here;
each collector's own facts are in tests/test_collector_<name>.py.

Golden files pin the whole exposition of each scenario at a fixed scenario time; `make generate` rewrites
them (generators/goldens.py) after a deliberate change: review the diff before committing it.
"""

from __future__ import annotations

import re
import sys

import pytest
from mssql_memory_exporter.collectors import COLLECTORS, perf
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.collectors.perfcounters import CounterKind, kind_of, object_suffix, parse_perf_rows
from mssql_memory_exporter.connection.batch import (
    BatchShapeError,
    ResultSet,
    render_batch,
    route,
    sections_of,
)
from mssql_memory_exporter.metrics.builder import FamilyBuilder, ImpossibleValue, MissingData

from generators import goldens
from tests.offline import BATCH, SECTIONS, NamedTarget, results_for


@pytest.mark.parametrize("scenario", goldens.SCENARIOS)
def test_exposition_matches_golden(scenario):
    path = goldens.GOLDEN / f"{scenario}.prom"
    assert goldens.exposition(scenario) == path.read_text(), (
        f"exposition of {scenario} changed: run `make generate` (python -m generators.goldens) and review"
        " the diff of tests/golden before committing it"
    )


def test_padding_and_named_instance_prefix_are_stripped():
    rows = parse_perf_rows(
        [
            {
                "object_name": "MSSQL$SQL2019:Buffer Node".ljust(128),
                "counter_name": "Page life expectancy".ljust(128),
                "instance_name": "003".ljust(128),
                "cntr_value": 150,
                "cntr_type": 65792,
            }
        ]
    )
    assert rows[0].object == "Buffer Node" and rows[0].counter == "Page life expectancy"
    assert rows[0].instance == "003" and rows[0].kind is CounterKind.GAUGE
    assert object_suffix("SQLServer:Memory Manager   ") == "Memory Manager"
    assert object_suffix(None) == ""


@pytest.mark.parametrize(
    ("cntr_type", "kind"),
    [
        (65792, CounterKind.GAUGE),
        (272696576, CounterKind.CUMULATIVE),
        (537003264, CounterKind.FRACTION),
        (1073939712, CounterKind.FRACTION_BASE),
        (1073874176, CounterKind.AVERAGE),
        (12345, CounterKind.UNKNOWN),
        (None, CounterKind.UNKNOWN),
    ],
)
def test_cntr_type_meaning(cntr_type, kind):
    assert kind_of(cntr_type) is kind


# The module of every collector that reads a perf object, from the registry: a new one is pinned below
# without an edit here.
PERF_MODULES = tuple(sys.modules[r.collect.__module__] for r in COLLECTORS if perf.objects_named(r.reads))


def test_only_the_buffer_pool_extension_counters_are_optional():
    # Pinned so that making a counter optional is a deliberate, reviewed change.
    optional = {
        spec.counter
        for module in PERF_MODULES
        for spec in module.METRICS
        if not spec.required
    }
    assert optional == {"Extension page reads/sec", "Extension page writes/sec", "Extension allocated pages"}


REQUIRED = [
    (module, spec)
    for module in PERF_MODULES
    for spec in module.METRICS
    if spec.required
]


@pytest.mark.parametrize(
    ("module", "spec"), REQUIRED, ids=[f"{m.COLLECTOR.name}:{s.counter}" for m, s in REQUIRED]
)
def test_a_required_counter_that_vanishes_fails_its_collector(module, spec):
    results = results_for("numa-4-nodes")
    perf_rows = results[perf.PERF_TAG]
    obj, counter = perf_rows.index("object_name"), perf_rows.index("counter_name")
    perf_rows.raw = [
        r
        for r in perf_rows.raw
        if not (
            str(r[obj]).rstrip().endswith(":" + module.OBJECT.name)
            and str(r[counter]).rstrip().casefold() == spec.counter.casefold()
        )
    ]
    left = [r for r in perf_rows.raw if str(r[obj]).rstrip().endswith(":" + module.OBJECT.name)]
    # SQL Statistics is read for one counter only: without it the object has no rows at all.
    named = spec.counter if left else module.OBJECT.name
    ctx = ScrapeContext(now=0.0, workload="oltp", memo={}, target=NamedTarget())
    with pytest.raises(MissingData, match=re.escape(repr(named))):
        module.collect(results, ctx, FamilyBuilder({}))


def test_route_discards_rows_of_a_section_that_failed_half_way():
    columns = ("section", "object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
    error_columns = ("section", "failed_section", "error_number", "error_message")
    sets = [
        ResultSet(columns, [("perf", "SQLServer:Buffer Manager", "Page life expectancy", "", 1, 65792)]),
        ResultSet(error_columns, [("section_error", "perf", 1205, "deadlock victim")]),
        ResultSet(
            ("section", "version", "product_level", "update_level", "edition", "engine_edition"),
            [("server", "16.0", "RTM", "CU1", "Dev", "3")],
        ),
    ]
    results = route(sets, SECTIONS)
    assert results["perf"].rows == [] and results["perf"].error is not None
    assert results["perf"].error.number == 1205
    assert results["server"].error is None
    assert results["sys_info"].error is not None  # silent section: reported, not assumed fine


def test_route_rejects_an_answer_it_cannot_place():
    with pytest.raises(BatchShapeError):
        route([ResultSet(("x",), [(1,)])], SECTIONS)
    with pytest.raises(BatchShapeError):
        route([ResultSet(("section",), [("nonsense",)])], SECTIONS)


def test_batch_is_built_once_and_identical_between_scrapes():
    assert render_batch(sections_of(COLLECTORS)) == BATCH
    assert BATCH.count("BEGIN TRY") == len(SECTIONS)
    assert BATCH.count("sp_executesql") == len(SECTIONS)


@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_a_counter_that_no_server_can_report_fails_its_collector(value):
    out = FamilyBuilder({"target": "t"})
    with pytest.raises(ImpossibleValue, match="mssql_lazy_writes_total"):
        out.counter("mssql_lazy_writes_total", "doc", value)
    assert out.families() == []


def test_a_negative_size_fails_but_other_gauges_may_go_below_zero():
    out = FamilyBuilder({})
    with pytest.raises(ImpossibleValue, match="mssql_memory_total_bytes"):
        out.gauge("mssql_memory_total_bytes", "doc", -8192)
    out.gauge("mssql_some_delta", "doc", -1)
    out.counter("mssql_lazy_writes_total", "doc", 0)
    assert [f.name for f in out.families()] == ["mssql_some_delta", "mssql_lazy_writes"]


