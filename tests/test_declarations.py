"""Each collector declares its metrics once (CollectorRecord.metrics, metrics/declare.py): what it emits
on the stand-in's scenarios is what it declares, and docs/metrics.md's tables are written from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.config import ConfigError
from mssql_memory_exporter.scrape.scrape_metrics import SCRAPE_METRICS

from generators import reference
from tests.conftest import make_config
from tests.declared import emitted, undeclared
from tests.timeouts import PATIENT_SECONDS

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "metrics.md"
CONFIG_DOCS = ROOT / "docs" / "configuration.md"
DECLARED = list(COLLECTORS)
SCENARIOS = ("healthy-oltp", "memory-pressure", "plan-cache-bloat", "named-instance-padded", "numa-4-nodes")
# Series the probe adds whatever the collectors (declared in scrape_metrics.py): not any collector's.
SCRAPE_FAMILIES = frozenset(spec.family for spec in SCRAPE_METRICS)
# An SSD pool on the scenarios' data volume, with a known_written reading, so ssd_pools has something to
# emit (every collector is probed with it; the others ignore it).
POOLS = {
    "data": {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2022-03-01",
        "known_written": {"written_tb": 120, "read_date": "2024-01-15"},
        "volumes": ["/var/opt/mssql/data"],
    }
}


def test_every_collector_declares_its_metrics():
    assert not [record.name for record in COLLECTORS if not record.metrics]


def test_a_metric_is_declared_by_one_collector_once():
    seen: dict[str, str] = {}
    for owner, specs in [("the probe", SCRAPE_METRICS), *((r.name, r.metrics) for r in DECLARED)]:
        for spec in specs:
            assert spec.name not in seen, f"{spec.name}: declared by {seen[spec.name]} and {owner}"
            seen[spec.name] = owner
            assert spec.name.startswith("mssql_") and spec.help and spec.source and spec.unit, spec
            assert spec.name.endswith("_total") == (spec.type == "counter"), spec.name


def _reference(metrics_page: Path = DOCS, config_page: Path = CONFIG_DOCS, *flags: str) -> int:
    return reference.main(["--docs", str(metrics_page), "--config-docs", str(config_page), *flags])


def test_docs_tables_are_written_from_the_declarations():
    assert _reference(DOCS, CONFIG_DOCS, "--check") == 0, "stale: run `make generate`"


def test_a_stale_or_missing_table_is_caught(tmp_path: Path):
    page = tmp_path / "metrics.md"
    text = DOCS.read_text(encoding="utf-8")
    record = DECLARED[0]
    page.write_text(text.replace(f"| `{record.metrics[0].name}` |", "| `mssql_renamed` |"), encoding="utf-8")
    assert _reference(page, CONFIG_DOCS, "--check") == 1
    assert _reference(page, CONFIG_DOCS) == 0
    assert page.read_text(encoding="utf-8") == text
    page.write_text(text.replace(reference.end(record.name), ""), encoding="utf-8")
    with pytest.raises(LookupError, match=rf"no table markers for collector '{record.name}'"):
        reference.render(page.read_text(encoding="utf-8"))


# Every label name a target's series carry, as the declarations say: the probe's own and its collectors'.
DECLARED_LABELS = sorted(
    {label.name for spec in SCRAPE_METRICS for label in spec.labels}
    | {label.name for record in COLLECTORS for spec in record.metrics for label in spec.labels}
)


@pytest.mark.parametrize("label", DECLARED_LABELS)
def test_a_target_label_named_like_a_declared_label_is_refused(label):
    """A constant label goes on every series of its target: one that a metric also carries would be
    there twice. Adding a label to a declaration reserves it, with no list to edit."""
    target = {"host": "db", "auth_module": "standin", "labels": {label: "x"}}
    with pytest.raises(ConfigError, match=rf"labels\.{label}: .*'{label}' is set by the exporter itself"):
        make_config({"standin": target})


@pytest.mark.parametrize("label", ["env", "team", "target", "serial"])
def test_a_target_label_no_series_carries_is_accepted(label):
    # `target` and the drives' `serial` were reserved by hand once; no series of a target carries them.
    config = make_config({"standin": {"host": "db", "auth_module": "standin", "labels": {label: "x"}}})
    assert config.targets["standin"].labels == {label: "x"}


def test_the_docs_list_of_reserved_labels_is_written_from_the_declarations(tmp_path: Path):
    page = tmp_path / "configuration.md"
    text = CONFIG_DOCS.read_text(encoding="utf-8")
    assert "`cache`" in text.split(reference.LABELS_BEGIN)[1].split(reference.LABELS_END)[0]
    page.write_text(text.replace("`cache`, ", ""), encoding="utf-8")
    assert _reference(DOCS, page, "--check") == 1
    assert _reference(DOCS, page) == 0
    assert page.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("name", [r.name for r in DECLARED])
def test_emits_exactly_what_it_declares(standin, scraper_for, name):
    """A probe narrowed to the collector, on each scenario: every family it exports is declared with that
    type and those labels, and every declared one shows in some scenario unless marked conditional."""
    record = next(r for r in COLLECTORS if r.name == name)
    seen: set[str] = set()
    for scenario in SCENARIOS:
        s = standin(scenario)
        config = s.config(collectors={"include": [name]}, ssd_pools=POOLS)
        families = scraper_for(config).probe(config.targets["standin"], PATIENT_SECONDS)
        mine = [f for f in families if f.name not in SCRAPE_FAMILIES]
        assert not undeclared(record, mine), (scenario, undeclared(record, mine))
        seen |= set(emitted(mine))
    never = [s.name for s in record.metrics if s.family not in seen and not s.conditional]
    assert not never, f"declared, emitted by no scenario and not marked conditional: {never}"


# Issue 34: the rule and dashboard generators import every name this exporter exports from where it is
# declared; only other exporters' names (smartctl_exporter's, translated in one module) stay spelt there.
GENERATOR_SOURCES = sorted(p for folder in ("alerts", "dashboards") for p in (ROOT / folder).glob("*.py"))
NAME = re.compile(r"(?<![:\w])mssql_[a-z0-9_]+(?![:\w])")  # recording rules' names carry colons


def exported_names() -> frozenset[str]:
    """Every metric name of the exporter: the collectors' and the probe's declarations, and the names the
    host, drive and exporter-self modules write."""
    names = {spec.name for record in COLLECTORS for spec in record.metrics} | {s.name for s in SCRAPE_METRICS}
    for path in (ROOT / "exporter" / "mssql_memory_exporter").rglob("*.py"):
        names |= set(re.findall(r'"(mssql_[a-z0-9_]+)"', path.read_text(encoding="utf-8")))
    return frozenset(names)


def spelt_names(path: Path, names: frozenset[str]) -> list[str]:
    """The exporter's metric names written as string literals in `path` (docstrings aside: not output)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{path.name}:{node.lineno}: {name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        for name in NAME.findall(node.value)
        if name in names or f"{name}_total" in names
    ]


def test_the_generators_import_every_metric_name_of_the_exporter():
    names = exported_names()
    spelt = [problem for path in GENERATOR_SOURCES for problem in spelt_names(path, names)]
    assert not spelt, "import the name from its declaration instead:\n" + "\n".join(spelt)


def test_the_name_scan_finds_a_spelt_name_and_skips_docstrings_and_rule_names(tmp_path: Path):
    source = tmp_path / "rules.py"
    source.write_text(
        '"""Reads mssql_up."""\n'
        'def f():\n    """mssql_up too."""\n'
        '    return f"rate(mssql_lazy_writes_total[5m])", "instance:mssql_up:avg", "smartctl_device"\n'
    )
    assert spelt_names(source, exported_names()) == ["rules.py:4: mssql_lazy_writes_total"]
