"""Property-based tests: whatever SQL Server (or a broken proxy) sends, and whatever a client puts in the
query string, the exporter answers with a clear error or a valid exposition, never an escaping exception.

Whole scrapes are fuzzed too: a scenario's true answer to the real batch, with cells of every section
replaced by what may arrive in that column (NULLs, blank-padded strings, negative and huge integers,
Decimals, NaN and infinite floats, bytes, booleans), rows dropped or made up, and sections failing or
silent, goes through the Scraper as a scrape does."""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.collectors.perf import objects_named
from mssql_memory_exporter.collectors.perfcounters import parse_perf_rows, parse_perf_table
from mssql_memory_exporter.connection.batch import (
    ERROR_TAG,
    UNAVAILABLE_TAG,
    BatchShapeError,
    ResultSet,
    route,
    sections_of,
)
from mssql_memory_exporter.metrics.builder import FamilyBuilder, MissingData
from mssql_memory_exporter.web import BadRequest, probe_target
from mssql_memory_exporter.web.requests import MAX_QUERY_FIELDS
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import exposition, make_config
from tests.standin.scenario import Clock, Instance, Scenario
from tests.whole_scrapes import ScenarioServer, check_scrape, scrape_through

SECTIONS = sections_of(COLLECTORS)
PERF_COLUMNS = ("section", "object_name", "counter_name", "instance_name", "cntr_value", "cntr_type")
KNOWN_TYPES = [65792, 272696576, 537003264, 1073939712, 1073874176, 1073939458]
# The perf objects the collectors' records read, and one no collector reads; the counters and instances
# the stand-in's base scenario serves them with (where a new collector's counters are added).
OBJECTS = sorted({name for r in COLLECTORS for name in objects_named(r.reads)} | {"Locks"})
BASE_PERF_ROWS = Instance(Scenario.load("healthy-oltp"), Clock(manual=True)).perf_rows()
COUNTERS = sorted({str(row["counter_name"]).strip() for row in BASE_PERF_ROWS})
PERF_INSTANCES = sorted({str(row["instance_name"]).strip() for row in BASE_PERF_ROWS} | {"tempdb"})

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
    st.one_of(st.sampled_from(PERF_INSTANCES), padded, st.none()),
    values,
    types,
)


def collect_all(results: dict) -> str:
    return exposition(collected_families(results, {"env": "fuzz"}))


def collected_families(results: dict, labels: dict[str, str]) -> list:
    """Every collector whose sections answered, as the Scraper runs them: one that finds its data
    missing or impossible leaves nothing behind."""
    out = FamilyBuilder(labels)
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
    return out.families()


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
    parsed_rows = parse_perf_rows(rows)
    for parsed in parsed_rows:
        assert parsed.counter == parsed.counter.strip()
        assert parsed.instance == parsed.instance.strip()
        assert parsed.object == parsed.object.strip()
    # The scrape parses the driver's tuples instead (no dict per row): the same rows, column order aside.
    columns = ("cntr_type", "instance_name", "object_name", "cntr_value", "counter_name")
    assert parse_perf_table(columns, [tuple(r[c] for c in columns) for r in rows]) == parsed_rows


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
                [
                    "target=prod-a",
                    "target=",
                    "target=x",
                    "module=y",
                    "target=prod-a%00",
                    "&",
                    "==",
                    "collect[]=wait_stats",
                    "collect%5B%5D=sys_info",
                    "collect[]=",
                    "collect[]=nope",
                ]
            ),
            max_size=6,
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


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(["target=prod-a", "x=1", "", "target=", "==", "collect[]=wait_stats"]),
        min_size=MAX_QUERY_FIELDS + 1,
        max_size=MAX_QUERY_FIELDS * 3,
    ).map("&".join)
)
def test_more_query_parameters_than_the_limit_are_refused_as_too_many(query):
    with pytest.raises(BadRequest, match=rf"^too many query parameters \(at most {MAX_QUERY_FIELDS}\)$"):
        probe_target(query, CONFIG)


# --- whole scrapes: every section's columns fuzzed, run through the Scraper as a real scrape is -------

# What a misbehaving driver or proxy might hand over where SQL Server sends a number.
odd_numbers = st.one_of(
    st.integers(2**63, 2**80),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.binary(max_size=8),
    st.booleans(),
)
numbers = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), odd_numbers)
texts = st.one_of(st.none(), padded, st.integers(-5, 5), st.floats(), st.binary(max_size=8))


def _near(value: object) -> st.SearchStrategy[object]:
    """What may arrive instead of one true cell, from its type: a number negated, grown huge, or any
    count; a string blank-padded as nchar pads it, in another case, cut short ("C:", "/", ""), or with
    another instance's prefix before its colon ("MSSQL$X:Buffer Manager")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return st.one_of(st.just(-value), st.just(value * 2**40), st.integers(0, 10**15))
    if isinstance(value, str):
        variants = [
            st.integers(1, 130).map(lambda pad: value + " " * pad),
            st.just(value.upper()),
            st.just(value.lower()),
            st.integers(0, len(value)).map(lambda cut: value[:cut]),
        ]
        if ":" in value:
            variants.append(st.just("MSSQL$X:" + value.split(":", 1)[1]))
        return st.one_of(variants)
    return st.nothing()


def column_cells(rs: ResultSet) -> dict[str, st.SearchStrategy[object]]:
    """For each column of a section's true answer (the tag column aside), what may arrive in it: the
    values other rows hold (so file ids, database ids and names still join up, or join the wrong row),
    one of them edited (_near), and anything of the column's kind, NULL included. Read from the answer
    the stand-in gives to the batch the collectors' records make, so a new section needs no entry here."""

    def cell(at: int) -> st.SearchStrategy[object]:
        seen = sorted({row[at] for row in rs.rows}, key=repr)
        kinds = {type(v) for v in seen if v is not None}
        anything = [numbers] if kinds <= {int, float} else [texts] if kinds <= {str} else [numbers, texts]
        return st.one_of(st.sampled_from(seen), st.sampled_from(seen).flatmap(_near), *anything)

    # Deferred: a scrape's sections hold thousands of cells, and a draw edits a handful of columns.
    return {
        column: st.deferred(lambda at=at: cell(at)) for at, column in enumerate(rs.columns[1:], start=1)
    }


ERROR_COLUMNS = ("section", "failed_section", "error_number", "error_message")
# Scenarios whose answers are the starting point: between them every section has rows (NUMA nodes,
# padded named-instance names, Windows mount folders with volume lookups, HBP on DAX, dropped databases).
BASE_SCENARIOS = [
    "healthy-oltp",
    "numa-4-nodes",
    "named-instance-padded",
    "windows-mount-folders",
    "hbp-dax",
    "databases-dropped",
    "tempdb-bad-layout",  # Windows, percent growth, tempdb on the system drive
    "tempdb-filling",  # four files on their own volume, every usage kind non-zero
    "ag-pair-a",  # a primary replica: the availability group sections
    "sql2025",  # SQL Server 2025: tempdb governance per workload group, the persistent version store
    "memory-notifications",  # the resource monitor's ring buffer records
]

Plan = tuple[list[tuple[int, int, object]], set[int], list[tuple[object, ...]]]


def mutated(rs: ResultSet) -> st.SearchStrategy[list[ResultSet]]:
    """One section's true answer, edited: cells replaced by what may arrive in that column, rows dropped,
    made-up rows added; now and then the whole answer becomes an error row or nothing at all."""
    tag = str(rs.rows[0][0]) if rs.rows else ""
    if not rs.rows or rs.columns[0] != "section" or tag in (ERROR_TAG, UNAVAILABLE_TAG):
        return st.just([rs])  # nothing to edit, or the batch's own report of a section it could not read
    last = len(rs.rows) - 1

    def apply(plan: Plan) -> list[ResultSet]:
        edits, dropped, added = plan
        rows = [list(row) for row in rs.rows]
        for row, column, new in edits:
            rows[row][column] = new
        kept = [tuple(row) for n, row in enumerate(rows) if n not in dropped] + list(added)
        return [ResultSet(rs.columns, kept)] if kept else []

    def fate(name: str) -> st.SearchStrategy[list[ResultSet]]:
        # Built for the fate drawn only: a scrape has dozens of answers and most arrive as sent.
        if name == "as sent":
            return st.just([rs])
        if name == "silent":
            return st.just([])
        if name == "failed":
            return st.tuples(
                st.sampled_from([ERROR_TAG, UNAVAILABLE_TAG]),
                st.just(tag),
                st.one_of(st.sampled_from([208, 297, 300, 229]), numbers),
                texts,
            ).map(lambda row: [ResultSet(ERROR_COLUMNS, [row])])
        cells = column_cells(rs)
        edit = st.tuples(st.integers(0, last), st.integers(1, len(rs.columns) - 1)).flatmap(
            lambda at: st.tuples(st.just(at[0]), st.just(at[1]), cells[rs.columns[at[1]]])
        )
        if name == "edited":
            return st.tuples(st.lists(edit, min_size=1, max_size=2), st.just(set()), st.just([])).map(apply)
        extra = st.tuples(st.just(tag), *(cells[c] for c in rs.columns[1:]))
        return st.tuples(
            st.lists(edit, max_size=8), st.sets(st.integers(0, last), max_size=2), st.lists(extra, max_size=3)
        ).map(apply)

    # Most sections arrive as sent or lightly edited, so most scrapes reach every collector and the odd
    # value meets code past the first row; a few are mangled, fail, or send nothing.
    return st.sampled_from(FATES).flatmap(fate)


FATES = ["as sent"] * 6 + ["edited"] * 3 + ["mangled", "failed", "silent"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.sampled_from(BASE_SCENARIOS), st.integers(1, 3), st.data())
def test_any_section_answers_give_a_valid_exposition_or_a_reasoned_failure(scenario, scrapes, data):
    server = ScenarioServer(scenario, lambda rs: data.draw(mutated(rs)))
    for text, records in scrape_through(server, scrapes):
        check_scrape(text, records)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) is not installed")
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(st.sampled_from(BASE_SCENARIOS), st.data())
@pytest.mark.promtool
def test_fuzzed_expositions_pass_promtool(scenario, data):
    """Prometheus' own linter on a sample of fuzzed scrapes (label values from odd file names and
    padded strings included); the parser above is lenient where promtool is not."""
    server = ScenarioServer(scenario, lambda rs: data.draw(mutated(rs)))
    for text, _ in scrape_through(server, 2):
        check = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert check.returncode == 0 and not (check.stdout + check.stderr).strip(), (
            check.stdout + check.stderr
        )


def test_the_base_scenarios_give_every_collector_rows_to_fuzz():
    """Every section a collector reads, and the volume lookups, arrive with rows from some base scenario,
    so the fuzz edits them; a new collector whose rows are in none fails here, naming its sections."""
    answered: set[str] = set()

    def note(rs: ResultSet) -> list[ResultSet]:
        if rs.rows and rs.columns[0] == "section":
            answered.add(str(rs.rows[0][0]))
        return [rs]

    for scenario in BASE_SCENARIOS:
        scrape_through(ScenarioServer(scenario, note), 2)  # the second scrape asks for the volume lookups
    unfuzzed = {r.name: [t for t in r.sections if t not in answered] for r in COLLECTORS}
    assert not {name: tags for name, tags in unfuzzed.items() if tags}
    assert any(tag.startswith("volumes/") for tag in answered)


# What the collectors' declarations say arrives as a count or a size (MetricSpec.columns), per collector;
# every perf counter's value is the perf section's cntr_value.
READINGS = {
    record.name: {c for spec in record.metrics for c in spec.columns}
    | ({"cntr_value"} if objects_named(record.reads) else set())
    for record in COLLECTORS
}
NEVER_NEGATIVE = {spec.family for record in COLLECTORS for spec in record.metrics if spec.columns}


def _negated(
    server: list[ScenarioServer], seen: dict[str, set[str]]
) -> Callable[[ResultSet], list[ResultSet]]:
    """From the second batch on, every column a collector declares as a count or size arrives negative (a
    wrapped 32-bit perf counter, a proxy that mangles signs); `seen` gathers each section's columns."""
    columns = set().union(*READINGS.values())

    def edit(rs: ResultSet) -> list[ResultSet]:
        if rs.rows and rs.columns[0] == "section":
            seen.setdefault(str(rs.rows[0][0]), set()).update(rs.columns)
        if server[0].batches < 2:
            return [rs]
        at = [i for i, column in enumerate(rs.columns) if column in columns]
        rows = [
            tuple(-abs(v) - 5 if i in at and isinstance(v, int) else v for i, v in enumerate(row))
            for row in rs.rows
        ]
        return [ResultSet(rs.columns, rows)]

    return edit


def test_negative_readings_never_become_negative_counters():
    """No counter and no metric read from a declared count or size goes negative; a collector whose
    declared columns arrive negative fails (and says why, check_scrape) instead of exporting them. A new
    collector is covered by declaring its columns; a declared column its sections do not send fails here."""
    holder: list[ScenarioServer] = []
    seen: dict[str, set[str]] = {}
    holder.append(ScenarioServer("healthy-oltp", _negated(holder, seen)))
    declared = {r.name for r in COLLECTORS if any(spec.columns for spec in r.metrics)}
    assert {"wait_stats", "memory_clerks", "tempdb_files", "tempdb_log", "volumes"} <= declared
    negative = set()
    for text, records in scrape_through(holder[0], 3)[1:]:
        for family in text_string_to_metric_families(text):
            if family.type == "counter" or family.name in NEVER_NEGATIVE:
                negative |= {sample.name for sample in family.samples if sample.value < 0}
        success = check_scrape(text, records)
        assert {name for name in declared if success[name] != 0} == set()
    assert not negative, sorted(negative)
    for record in COLLECTORS:
        sent = set().union(*(seen.get(tag, set()) for tag in record.sections))
        assert READINGS[record.name] <= sent, (record.name, READINGS[record.name] - sent)
