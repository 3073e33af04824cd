"""Property-based tests: whatever SQL Server (or a broken proxy) sends, and whatever a client puts in the
query string, the exporter answers with a clear error or a valid exposition, never an escaping exception."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.batch import BatchShapeError, ResultSet, route, sections_of
from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import FamilyBuilder, MissingData, ScrapeContext
from mssql_memory_exporter.perfcounters import parse_perf_rows
from mssql_memory_exporter.web import BadRequest, probe_target
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import exposition, make_config

SECTIONS = sections_of(COLLECTORS)
PERF_COLUMNS = ("section", "object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
KNOWN_TYPES = [65792, 272696576, 537003264, 1073939712, 1073874176, 1073939458]
OBJECTS = ["Buffer Manager", "Buffer Node", "Memory Manager", "SQL Statistics", "Locks"]
COUNTERS = [
    "Page life expectancy",
    "Lazy writes/sec",
    "Free list stalls/sec",
    "Buffer cache hit ratio",
    "Buffer cache hit ratio base",
    "Database pages",
    "Batch Requests/sec",
    "Free Memory (KB)",
    "Memory Grants Pending",
    "Target Server Memory (KB)",
    "Local node page lookups/sec",
]

padded = st.builds(
    lambda text, pad: text + " " * pad, st.text(max_size=40), st.integers(min_value=0, max_value=130)
)
names = st.one_of(
    st.builds(
        lambda p, o, pad: f"{p}:{o}" + " " * pad,
        st.sampled_from(["SQLServer", "MSSQL$SQL2019", "MSSQL$X", ""]),
        st.sampled_from(OBJECTS),
        st.integers(0, 128),
    ),
    padded,
    st.none(),
)
values = st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1))
types = st.one_of(
    st.none(), st.sampled_from(KNOWN_TYPES), st.integers(min_value=-(2**31), max_value=2**31 - 1)
)
perf_row = st.tuples(
    st.just("perf"),
    names,
    st.one_of(st.sampled_from(COUNTERS), padded, st.none()),
    st.one_of(st.sampled_from(["", "000", "001", "_Total", "tempdb"]), padded, st.none()),
    values,
    types,
)


def collect_all(results: dict) -> str:
    out = FamilyBuilder({"env": "fuzz"})
    ctx = ScrapeContext(now=0.0, workload="oltp", memo={})
    for module in COLLECTORS:
        if any(results[tag].error is not None for tag in module.sections if tag in results):
            continue
        scratch = out.child()
        try:
            module.collect(results, ctx, scratch)
        except MissingData:
            continue
        out.merge(scratch)
    return exposition(out.families())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(perf_row, max_size=60))
def test_any_perf_rows_give_a_valid_exposition(rows):
    text = collect_all(route([ResultSet(PERF_COLUMNS, rows)] if rows else [], SECTIONS))
    for family in text_string_to_metric_families(text):  # the exposition parses back
        for sample in family.samples:
            assert not math.isnan(sample.value) or family.type == "gauge"
            if family.name == "mssql_buffer_cache_hit_ratio":
                assert 0.0 <= sample.value <= 1.0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "object_name": names,
                "counter_name": st.one_of(padded, st.none()),
                "instance_name": st.one_of(padded, st.none()),
                "cntr_value": values,
                "cntr_type": types,
            }
        ),
        max_size=30,
    )
)
def test_parse_perf_rows_never_raises_and_strips(rows):
    for parsed in parse_perf_rows(rows):
        assert parsed.counter == parsed.counter.strip()
        assert parsed.instance == parsed.instance.strip()
        assert parsed.object == parsed.object.strip()


cell = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=20), st.floats(allow_nan=True))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.sampled_from(["section", "x", "database_id", "file_id", "failed_section", "error_number"]),
                min_size=1,
                max_size=4,
                unique=True,
            ),
            st.lists(st.lists(cell, min_size=4, max_size=4), max_size=5),
            st.sampled_from(
                ["perf", "server", "sys_info", "file_stats", "section_error", "section_unavailable", "bogus"]
            ),
        ),
        max_size=5,
    )
)
def test_route_answers_or_names_the_problem(raw_sets):
    sets = []
    for columns, rows, tag in raw_sets:
        width = len(columns)
        sets.append(ResultSet(tuple(columns), [tuple([tag, *row][:width]) for row in rows]))
    try:
        results = route(sets, SECTIONS)
    except BatchShapeError as exc:
        assert str(exc)
        return
    assert set(results) >= {s.tag for s in SECTIONS}


CONFIG = make_config({"prod-a": {"host": "127.0.0.1", "port": 1, "auth_module": "standin"}})
query_chars = st.characters(codec="utf-8", exclude_categories=("Cs",))


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=query_chars, max_size=300),
        st.builds(
            lambda k, v: f"{k}={v}",
            st.sampled_from(["target", "TARGET", "target[]", "t", ""]),
            st.text(alphabet=query_chars, max_size=200),
        ),
        st.lists(
            st.sampled_from(
                ["target=prod-a", "target=", "target=x", "module=y", "target=prod-a%00", "&", "=="]
            ),
            max_size=4,
        ).map("&".join),
    )
)
def test_probe_parameters_give_a_target_or_a_clear_400(query):
    try:
        target = probe_target(query, CONFIG)
    except BadRequest as exc:
        assert str(exc), "a 400 must say what is wrong"
        return
    # Anything accepted names a configured target, so no query can reach another host.
    assert target is CONFIG.targets["prod-a"]
