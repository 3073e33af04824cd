"""The exporter writes the text format itself (exposition.render); prometheus_client's generate_latest is
the reference it must match byte for byte, on every scenario and on families built to be awkward."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.connection.batch import ResultSet, render_batch, route, sections_of
from mssql_memory_exporter.metrics import exposition
from mssql_memory_exporter.metrics.builder import FamilyBuilder
from mssql_memory_exporter.metrics.families import SeriesFamily
from mssql_memory_exporter.web.pages import PROCESS_METRICS
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.samples import Exemplar, Sample

from tests.conftest import exposition as reference
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter
from tests.test_fuzz import collected_families

SCENARIOS = sorted(p.stem for p in (Path(__file__).parent / "standin" / "scenarios").glob("*.yml"))
SECTIONS = sections_of(COLLECTORS)
BATCH = render_batch(SECTIONS)


def scenario_families(scenario: str, labels: dict[str, str]) -> list[Metric]:
    clock = Clock(manual=True)
    instance = Instance(Scenario.load(scenario), clock)
    clock.advance(120.0)
    sets = [
        ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in Interpreter(instance).run(BATCH)
    ]
    return collected_families(route(sets, SECTIONS), labels)


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(families: list[Metric]) -> bytes:
        raise AssertionError(f"fell back to generate_latest for {[f.name for f in families][:5]}")

    monkeypatch.setattr(exposition, "_fallback", refuse)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_renders_as_generate_latest_does_without_falling_back(scenario, no_fallback):
    families = scenario_families(scenario, {"instance_name": 'odd "name"\\ with\nnewline'})
    assert len(families) > 10
    assert exposition.render(families).decode() == reference(families)


def test_process_metrics_render_without_falling_back(no_fallback):
    families = list(PROCESS_METRICS.collect())
    assert {f.type for f in families} == {"gauge", "counter"} and "python_info" in {f.name for f in families}
    assert exposition.render(families).decode() == reference(families)


def test_families_outside_the_simple_shape_go_to_generate_latest():
    histogram = HistogramMetricFamily(
        "h_seconds", "A histogram.", buckets=[("1.0", 2), ("+Inf", 3)], sum_value=4
    )
    summary = SummaryMetricFamily("s_seconds", "A summary.", count_value=3, sum_value=1.5)
    with_created = CounterMetricFamily("c", "Counter with created.", labels=["a"])
    with_created.add_metric(["x"], 3, created=1_700_000_000.0)
    stamped = GaugeMetricFamily("g", "Gauge with a timestamp.", labels=["a"])
    stamped.add_metric(["x"], 1, timestamp=1_700_000_000.5)
    exemplar = Metric("e", "Counter with an exemplar.", "counter")
    exemplar.samples.append(Sample("e_total", {}, 1.0, None, Exemplar({"trace": "t"}, 1.0)))
    reserved = GaugeMetricFamily("r", "Reserved label name.", labels=["__reserved"])
    reserved.add_metric(["v"], 2)
    dotted = GaugeMetricFamily("dotted.name", "A name outside the legacy set.", value=1)
    plain = GaugeMetricFamily("plain", "Plain.", value=1)
    for odd in (histogram, summary, with_created, stamped, exemplar, reserved, dotted):
        families = [plain, odd]
        assert exposition.render(families).decode() == reference(families), odd.name


def test_series_text_kept_between_scrapes_follows_label_changes_and_a_full_cache(monkeypatch):
    """The writer keeps each series' `name{labels}` text between scrapes: a changed label value must
    give a new line, and a cache cleared when full must still write every series."""
    monkeypatch.setattr(exposition, "_PREFIX_CACHE_MAX", 3)
    monkeypatch.setattr(exposition, "_prefixes", {})

    def scrape(state: str) -> list[Metric]:
        out = FamilyBuilder({"instance_name": "sql1"})
        for i in range(5):
            out.gauge("g", "A gauge.", float(i), {"file": f"f{i}", "state": state})
        out.counter("c_total", "A counter.", 7.0)
        return out.families()

    for state in ("ONLINE", "OFFLINE", "ONLINE"):
        families = scrape(state)
        text = exposition.render(families).decode()
        assert text == reference(families)
        assert text.count(f'state="{state}"') == 5
    assert len(exposition._prefixes) <= 3


# ---- awkward families, built at random ---------------------------------------------------------------

names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,20}", fullmatch=True) | st.sampled_from(
    ["a.b", "ünïcode", "9starts_with_digit", "with space"]
)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True) | st.sampled_from(
    ["__reserved", "a-b", "ü"]
)
label_values = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(['\\"\n', "\\n", '"'])
values = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(-(2**63), 2**63)
    | st.sampled_from([0.0, -0.0, 1e6, 1234567.0, 12345678.0, 1e16, 1e21, 1e-7, 123456789012345678.0, 5e-324])
)
docs = st.text(st.characters(codec="utf-8"), max_size=30) | st.sampled_from(["back\\slash", "new\nline", ""])


@st.composite
def family(draw: st.DrawFn) -> Metric:
    kind = draw(
        st.sampled_from([GaugeMetricFamily, CounterMetricFamily, InfoMetricFamily, "unknown", SeriesFamily])
    )
    name = draw(names)
    doc = draw(docs)
    labels = draw(st.lists(label_names, max_size=4, unique=True))
    rows = draw(
        st.lists(
            st.tuples(st.lists(label_values, min_size=len(labels), max_size=len(labels)), values), max_size=4
        )
    )
    if kind == "unknown":
        fam = Metric(name, doc, "unknown")
        for row_labels, value in rows:
            fam.samples.append(Sample(name, dict(zip(labels, row_labels, strict=True)), value))
        return fam
    if kind is SeriesFamily:  # what FamilyBuilder makes: the writer's own fast path
        fam = SeriesFamily(name, doc, draw(st.sampled_from(["gauge", "counter"])))
        for row_labels, value in rows:
            fam.series.append((dict(zip(labels, row_labels, strict=True)), value))
        return fam
    if kind is InfoMetricFamily:
        fam = InfoMetricFamily(name, doc, labels=labels[:1])
        for row_labels, _ in rows:
            fam.add_metric(row_labels[:1], {"version": "1"} if labels else {})
        return fam
    fam = kind(name, doc, labels=labels)
    for row_labels, value in rows:
        fam.add_metric(row_labels, value)
    return fam


def unique_by_name(families: list[Metric]) -> list[Metric]:
    seen: dict[str, Metric] = {}
    for fam in families:
        seen.setdefault(fam.name, fam)
    return list(seen.values())


@given(st.lists(family(), max_size=5).map(unique_by_name))
def test_any_family_renders_as_generate_latest_does(families):
    assert exposition.render(families).decode() == reference(families)


@given(values)
def test_numbers_are_written_as_prometheus_reads_them(value):
    family = GaugeMetricFamily("g", "g", value=value)
    line = exposition.render([family]).decode().splitlines()[-1]
    written = line.split(" ")[1]
    parsed = float(written.replace("+Inf", "inf").replace("-Inf", "-inf"))
    if math.isnan(float(value)):
        assert written == "NaN"
    else:
        assert parsed == float(value)



@pytest.mark.parametrize("name", ["", "mssql_\udc80"])
def test_a_family_refuses_a_name_that_is_no_text(name):
    """Empty or not UTF-8 (a lone surrogate): what prometheus_client's private check refused, checked by
    the package itself since it no longer imports that function."""
    with pytest.raises(ValueError, match="invalid metric name"):
        SeriesFamily(name, "help", "gauge")


def test_a_family_takes_any_other_name_and_the_writer_quotes_what_needs_it():
    assert SeriesFamily("level:mssql_x:rate5m", "help", "counter").sample_name == "level:mssql_x:rate5m_total"
    family = SeriesFamily("with space", "help", "gauge")
    family.series.append(({}, 1.0))
    assert exposition.render([family]).decode() == reference([family])
