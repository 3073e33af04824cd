"""Row parsers without the network: scenario rows -> batch routing -> collectors -> exposition.

Golden files pin the whole exposition of each scenario at a fixed scenario time; regenerate them with
`UPDATE_GOLDEN=1 pytest tests/test_collectors.py` after a deliberate change, and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from mssql_memory_exporter.batch import BatchShapeError, ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.collectors import (
    COLLECTORS,
    buffer_manager,
    buffer_node,
    memory_manager,
    perf,
    sql_statistics,
    sys_info,
)
from mssql_memory_exporter.collectors.base import (
    FamilyBuilder,
    ImpossibleValue,
    MissingData,
    ScrapeContext,
    SectionResult,
)
from mssql_memory_exporter.collectors.perfcounters import CounterKind, kind_of, object_suffix, parse_perf_rows

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


BM = "SQLServer:Buffer Manager"
CNTR_TYPE = {CounterKind.GAUGE: 65792, CounterKind.CUMULATIVE: 272696576}


def buffer_manager_rows(**replace: tuple[str, int, int] | None) -> list[tuple[str, str, str, int, int]]:
    """Every Buffer Manager counter a server reports, at value 1; `replace` (by counter) swaps a row for
    (counter name as sent, value, cntr_type), or drops it with None."""
    rows = []
    for spec in buffer_manager.METRICS:
        counter, value, cntr_type = spec.counter, 1, CNTR_TYPE[spec.kind]
        if spec.counter in replace:
            if replace[spec.counter] is None:
                continue
            counter, value, cntr_type = replace[spec.counter]  # type: ignore[misc]
        rows.append((BM, counter, "", value, cntr_type))
    return rows


class _Target:
    name = "prod-a"


def run_buffer_manager(results: dict[str, SectionResult]) -> str:
    out = FamilyBuilder({})
    buffer_manager.collect(results, ScrapeContext(0.0, "oltp", {}, target=_Target()), out)
    return exposition(out.families())


def test_hit_ratio_is_value_over_base_and_absent_when_base_is_zero():
    text = run_buffer_manager(
        perf_result(
            *buffer_manager_rows(),
            (BM, "Buffer cache hit ratio", "", 930, 537003264),
            (BM, "Buffer cache hit ratio base", "", 1000, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio 0.93" in text
    text = run_buffer_manager(
        perf_result(
            *buffer_manager_rows(),
            (BM, "Buffer cache hit ratio", "", 0, 537003264),
            (BM, "Buffer cache hit ratio base", "", 0, 1073939712),
        )
    )
    assert "mssql_buffer_cache_hit_ratio" not in text


def test_required_counter_typed_against_its_name_fails_the_collector():
    # A server reporting lazy writes as a raw gauge: exporting it as *_total would break rate(), and
    # skipping it would leave a hole behind collector_success 1.
    rows = buffer_manager_rows(**{"Lazy writes/sec": ("Lazy writes/sec", 17, 65792)})
    with pytest.raises(MissingData, match=r"'Lazy writes/sec' has type gauge, expected counter"):
        run_buffer_manager(perf_result(*rows))


def test_optional_counter_typed_against_its_name_is_skipped_with_the_target_logged(caplog):
    rows = buffer_manager_rows(**{"Extension page reads/sec": ("Extension page reads/sec", 17, 65792)})
    text = run_buffer_manager(perf_result(*rows))
    assert "mssql_buffer_pool_extension_page_reads_total" not in text
    assert "mssql_buffer_pool_extension_page_writes_total 1.0" in text
    assert "mssql_lazy_writes_total 1.0" in text
    (warning,) = [r for r in caplog.records if r.getMessage() == "counter type does not match metric"]
    assert warning.target == "prod-a" and warning.counter == "Extension page reads/sec"
    assert (warning.expected, warning.got) == ("counter", "gauge")


def test_optional_counters_may_be_absent():
    rows = buffer_manager_rows(
        **{
            "Extension page reads/sec": None,
            "Extension page writes/sec": None,
            "Extension allocated pages": None,
        }
    )
    text = run_buffer_manager(perf_result(*rows))
    assert "mssql_buffer_pool_extension" not in text and "mssql_page_reads_total 1.0" in text


def test_only_the_buffer_pool_extension_counters_are_optional():
    # Pinned so that making a counter optional is a deliberate, reviewed change.
    optional = {
        spec.counter
        for module in (buffer_manager, buffer_node, memory_manager, sql_statistics)
        for spec in module.METRICS
        if not spec.required
    }
    assert optional == {"Extension page reads/sec", "Extension page writes/sec", "Extension allocated pages"}


REQUIRED = [
    (module, spec)
    for module in (buffer_manager, buffer_node, memory_manager, sql_statistics)
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
    ctx = ScrapeContext(now=0.0, workload="oltp", memo={}, target=_Target())
    with pytest.raises(MissingData, match=re.escape(repr(named))):
        module.collect(results, ctx, FamilyBuilder({}))


def test_counter_names_match_case_insensitively():
    rows = buffer_manager_rows(**{"Page lookups/sec": ("Page Lookups/sec", 77, 272696576)})
    text = run_buffer_manager(perf_result(*rows))
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


DAY = 86_400


def start_time_after(memo: dict[str, object], now: float, uptime: float) -> float:
    """mssql_start_time_seconds from one sys_info row: server clock `now`, up for `uptime` seconds."""
    boot_ticks_ms = 7 * DAY * 1000  # the OS was up a week before SQL Server started
    row = {
        "section": "sys_info",
        "now_unix_ms": int(now * 1000),
        "ms_ticks": boot_ticks_ms + int(uptime * 1000),
        "sqlserver_start_time_ms_ticks": boot_ticks_ms,
    }
    out = FamilyBuilder({})
    sys_info.collect({"sys_info": SectionResult(rows=[row])}, ScrapeContext(now, "oltp", memo), out)
    (family,) = out.families()
    return family.samples[0].value


T0 = 1_700_000_000.0  # when the instance started


@pytest.mark.parametrize(
    ("uptime", "drift", "kept"),
    [
        (600, 4.0, True),  # a fresh start: the 5 s floor
        (600, 6.0, False),
        (30 * DAY, 250.0, True),  # a month up: 259 s of drift is still the same start
        (30 * DAY, -250.0, True),
        (30 * DAY, 270.0, False),
    ],
)
def test_start_time_tolerates_clock_drift_in_proportion_to_uptime(uptime, drift, kept):
    memo: dict[str, object] = {}
    assert start_time_after(memo, T0 + 60, 60) == T0
    # The tick counter ran `drift` seconds slow against the wall clock over the uptime.
    got = start_time_after(memo, T0 + uptime + drift, uptime)
    assert got == (T0 if kept else T0 + drift)


def test_a_restart_after_long_uptime_always_moves_the_start_time():
    memo: dict[str, object] = {}
    assert start_time_after(memo, T0 + 60 * DAY, 60 * DAY) == T0  # tolerance 518 s by now
    restarted = T0 + 60 * DAY + 30
    assert start_time_after(memo, restarted + 60, 60) == restarted
    assert start_time_after(memo, restarted + 62, 62.003) == restarted  # and it holds still again
