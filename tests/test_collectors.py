"""Row parsers without the network: scenario rows -> batch routing -> collectors -> exposition.

Golden files pin the whole exposition of each scenario at a fixed scenario time; regenerate them with
`UPDATE_GOLDEN=1 pytest tests/test_collectors.py` after a deliberate change, and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mssql_memory_exporter.batch import BatchShapeError, ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.collectors import COLLECTORS, buffer_manager
from mssql_memory_exporter.collectors.base import FamilyBuilder, ImpossibleValue, ScrapeContext, SectionResult
from mssql_memory_exporter.perfcounters import CounterKind, kind_of, object_suffix, parse_perf_rows

from tests.conftest import exposition
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter

GOLDEN = Path(__file__).parent / "golden"
SECTIONS = sections_of(COLLECTORS)
BATCH = render_batch(SECTIONS)
SCENARIOS = ["healthy-oltp", "memory-pressure", "named-instance-padded", "numa-4-nodes"]


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


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_exposition_matches_golden(scenario):
    text = collect(results_for(scenario))
    # The start time depends on the wall clock at which the test runs; everything else is exact.
    text = (
        "\n".join(line for line in text.splitlines() if not line.startswith("mssql_start_time_seconds "))
        + "\n"
    )
    path = GOLDEN / f"{scenario}.prom"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"exposition of {scenario} changed; see the diff above"


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


def perf_result(*rows: tuple[str, str, str, int, int]) -> dict[str, SectionResult]:
    columns = ("section", "object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
    return {"perf": SectionResult(rows=[dict(zip(columns, ("perf", *r), strict=True)) for r in rows])}


def run_buffer_manager(results: dict[str, SectionResult]) -> str:
    out = FamilyBuilder({})
    buffer_manager.collect(results, ScrapeContext(0.0, "oltp", {}), out)
    return exposition(out.families())


def test_hit_ratio_is_value_over_base_and_absent_when_base_is_zero():
    bm = "SQLServer:Buffer Manager"
    text = run_buffer_manager(
        perf_result(
            (bm, "Buffer cache hit ratio", "", 930, 537003264),
            (bm, "Buffer cache hit ratio base", "", 1000, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio 0.93" in text
    text = run_buffer_manager(
        perf_result(
            (bm, "Buffer cache hit ratio", "", 0, 537003264),
            (bm, "Buffer cache hit ratio base", "", 0, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio" not in text


def test_counter_typed_against_its_name_is_skipped_not_mislabelled(caplog):
    bm = "SQLServer:Buffer Manager"
    # A server reporting lazy writes as a raw gauge: exporting it as *_total would break rate().
    text = run_buffer_manager(
        perf_result((bm, "Lazy writes/sec", "", 17, 65792), (bm, "Page reads/sec", "", 5, 272696576))
    )
    assert "mssql_lazy_writes_total" not in text
    assert "mssql_page_reads_total 5.0" in text
    assert any("counter type does not match" in r.getMessage() for r in caplog.records)


def test_counter_names_match_case_insensitively():
    bm = "SQLServer:Buffer Manager"
    text = run_buffer_manager(perf_result((bm, "Page Lookups/sec", "", 77, 272696576)))
    assert "mssql_page_lookups_total 77.0" in text


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
