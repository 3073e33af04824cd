"""The fleet group (alerts/fleet.py) and where each group is evaluated (alerts/evaluators.py, the spec's
`rule_groups.evaluators`): the ruler's file as Thanos Ruler reads it (`thanos tools rules-check`), its
expressions under both promtools over two shards' series with figures worked out by hand, the shards'
files untouched by it, a site moving a group between evaluators, and the docs' table kept from the spec.

The real engine (Thanos Ruler through Thanos Query over two live shards, one of them stopped) is
tests/test_thanos_ruler_e2e.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from alerts import evaluators, fleet, generate, group_names
from alerts import names as N
from alerts.spec import Evaluator, SpecError, load, load_site
from deploy import prometheusrule
from generators import where_rules_run
from tests import tools

RULER_FILE = generate.RULES_DIR / evaluators.RULER_DIR / fleet.FILE_NAME


def groups_of(files: dict[str, str]) -> dict[str, tuple[str, dict[str, Any]]]:
    """{group name: (file path, group)} of rendered rule files."""
    return {g["name"]: (path, g) for path, text in files.items() for g in yaml.safe_load(text)["groups"]}


def stripped(text: str) -> str:
    """A ruler file without Thanos' partial_response_strategy: what Prometheus' parser reads (as Thanos'
    own rules-check does before handing a file to it)."""
    data = yaml.safe_load(text)
    for group in data["groups"]:
        group.pop("partial_response_strategy", None)
    return yaml.safe_dump(data, sort_keys=False)


# --- where each group goes -----------------------------------------------------------------------------


def test_the_spec_names_every_group_and_only_the_fleet_group_leaves_the_shards():
    spec = load()
    assert set(spec.rule_groups.evaluators) == set(group_names.ALL)
    assert get_args(Evaluator) == group_names.EVALUATORS
    groups = groups_of(generate.render(spec))
    assert set(groups) == set(group_names.ALL)
    for name, (path, group) in groups.items():
        on_ruler = spec.rule_groups.evaluator(name) == group_names.THANOS_RULER
        assert path.startswith("thanos-ruler/") == on_ruler == (name == group_names.FLEET), name
        # Thanos Ruler's groups abort on a partial response; Prometheus refuses the key, so the shards'
        # groups must not carry it.
        assert group.get("partial_response_strategy") == ("abort" if on_ruler else None), name


def test_the_fleet_group_records_the_names_of_names_py():
    spec = load()
    recorded = [r["record"] for r in fleet.recording_rules(spec)]
    assert recorded == [
        N.SHARD_TARGETS, N.SHARD_TARGETS_UP, N.SHARD_TARGETS_DOWN,
        N.RuleNames.from_spec(spec).fleet_tempdb,
        N.FLEET_POOLS, N.FLEET_POOLS_OVER_RATING, N.FLEET_POOLS_OVER_BUDGET, N.FLEET_MEMORY_PRESSURE,
    ]
    assert N.RuleNames.from_spec(spec).fleet_tempdb == "fleet:mssql_tempdb_written_bytes:rate5m"
    # Every series the group reads is one the shards record or scrape: none of its own records.
    shard_records = {
        r["record"] for name, (_, g) in groups_of(generate.render(spec)).items() if name != group_names.FLEET
        for r in g["rules"] if "record" in r
    }
    for rule in fleet.recording_rules(spec):
        for other in recorded:
            assert other not in rule["expr"], f"{rule['record']} reads {other}: the ruler would read it late"
    assert N.SHARE in shard_records and N.PRESSURE_EXTERNAL in shard_records


def test_the_ruler_prometheusrule_is_selected_by_no_shard():
    shard = yaml.safe_load(prometheusrule.OUTPUT.read_text())
    ruler_path = prometheusrule.OUTPUT.parent / prometheusrule.RULER_NAME / prometheusrule.OUTPUT.name
    ruler = yaml.safe_load(ruler_path.read_text())
    assert shard["metadata"]["labels"]["release"] == "prometheus"
    assert "release" not in ruler["metadata"]["labels"]
    assert ruler["metadata"]["labels"][prometheusrule.RULER_LABEL] == "thanos-ruler"
    assert [g["name"] for g in ruler["spec"]["groups"]] == [group_names.FLEET]
    assert group_names.FLEET not in [g["name"] for g in shard["spec"]["groups"]]
    assert all(g["partial_response_strategy"] == "abort" for g in ruler["spec"]["groups"])
    kustomization = yaml.safe_load((prometheusrule.OUTPUT.parent / "kustomization.yaml").read_text())
    assert not any("thanos-ruler" in r for r in kustomization["resources"])


def test_a_site_with_one_prometheus_keeps_the_fleet_group_there(tmp_path: Path):
    site = tmp_path / "site.yml"
    site.write_text("rule_groups:\n  evaluators:\n    mssql.fleet: prometheus\n")
    files = generate.render(load_site(site))
    assert not any(path.startswith("thanos-ruler/") for path in files)
    path, group = groups_of(files)[group_names.FLEET]
    assert path == fleet.FILE_NAME and "partial_response_strategy" not in group
    # The shards' other files are as shipped.
    shipped = generate.render(load())
    for name in ("mssql.recording.rules.yml", "mssql.alerts.rules.yml"):
        assert files[name] == shipped[name]


def test_a_site_can_move_a_per_target_group_to_the_ruler(tmp_path: Path):
    site = tmp_path / "site.yml"
    site.write_text("rule_groups:\n  evaluators:\n    mssql.alerts: thanos_ruler\n")
    files = generate.render(load_site(site))
    assert "mssql.alerts.rules.yml" not in files  # a file left with no shard group is not written
    path, group = groups_of(files)[group_names.ALERTS]
    assert path == "thanos-ruler/mssql.alerts.rules.yml" and group["partial_response_strategy"] == "abort"


@pytest.mark.parametrize(
    ("site", "named"),
    [
        ("rule_groups: {evaluators: {mssql.fleet: thanos}}", "rule_groups.evaluators.mssql.fleet"),
        ("rule_groups: {evaluators: {mssql.fleeet: prometheus}}", "mssql.fleeet: not a rule group"),
        ("fleet: {shard_label: shard-id}", "fleet.shard_label: 'shard-id' is not a label name"),
        ("fleet: {interval: 1 minute}", "fleet.interval"),
        # The watch on the ruler must not run in the ruler it watches.
        ("rule_groups: {evaluators: {mssql.thanos_ruler: thanos_ruler}}",
         "mssql.thanos_ruler: must be evaluated by prometheus"),
        ("fleet: {failing_share: 1.5}", "fleet.failing_share"),
        ("fleet: {failing_window: ten minutes}", "fleet.failing_window"),
    ],
)
def test_a_bad_evaluator_or_fleet_setting_is_refused_by_name(tmp_path: Path, site: str, named: str):
    path = tmp_path / "site.yml"
    path.write_text(site + "\n")
    with pytest.raises(SpecError, match=named.replace(".", r"\.").replace("(", r"\(")):
        load_site(path)


def test_the_docs_tables_are_written_from_the_spec():
    assert where_rules_run.main(["--check"]) == 0, "stale: run `make generate`"
    table = where_rules_run.table(load())
    for page in where_rules_run.PAGES:
        assert table in page.read_text(), page.name
    assert "`alerts/rules/thanos-ruler/mssql.fleet.rules.yml` | Thanos Ruler" in table


# --- the ruler's file, read by the real tools -----------------------------------------------------------


def test_thanos_reads_the_ruler_file():
    tools.check_thanos()
    result = subprocess.run(
        [tools.THANOS.path, "tools", "rules-check", f"--rules={RULER_FILE}"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "result=SUCCESS rulesfound=8" in result.stderr


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_promtool_refuses_the_thanos_key_and_accepts_the_rest(promtool, tmp_path: Path):
    tools.check_binary(promtool)
    refused = subprocess.run(
        [promtool.path, "check", "rules", str(RULER_FILE)], capture_output=True, text=True, timeout=60
    )
    # Why the shards must never load this directory: Prometheus would refuse its whole rule set.
    assert refused.returncode != 0 and "partial_response_strategy" in refused.stdout + refused.stderr
    copy = tmp_path / "fleet.rules.yml"
    copy.write_text(stripped(RULER_FILE.read_text()))
    accepted = subprocess.run(
        [promtool.path, "check", "rules", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr


def _series(name: str, value: str, **labels: str) -> dict[str, str]:
    shown = ", ".join(f'{k}="{v}"' for k, v in {"job": "mssql", **labels}.items())
    return {"series": f"{name}{{{shown}}}", "values": value}


# Three shards' series as Thanos Query hands them to the ruler, each with its shard's external label:
#   shard 0: sql-a answering; sql-b's exporter answering but SQL Server not (mssql_up 0)
#   shard 1: sql-c's exporter unreachable (up 0, no mssql_up); sql-d answering
#   shard 2: sql-e answering
# tempdb writes 1 + 2.5 + 0.5 MB/s = 4 MB/s. Pools: sql-a tempdb (sqlserver 1.2, host 0.9: one pool,
# over its rating and its 0.8 budget), sql-a data (0.85: over the budget only), sql-d tempdb (0.3).
# Memory pressure: sql-a from outside, sql-b from inside, sql-d and sql-e none: 2 instances.
HAND_WORKED_INPUT = [
    _series("up", "1x10", instance="sql-a", shard="0"),
    _series("mssql_up", "1x10", instance="sql-a", shard="0"),
    _series("up", "1x10", instance="sql-b", shard="0"),
    _series("mssql_up", "0x10", instance="sql-b", shard="0"),
    _series("up", "0x10", instance="sql-c", shard="1"),
    _series("up", "1x10", instance="sql-d", shard="1"),
    _series("mssql_up", "1x10", instance="sql-d", shard="1"),
    _series("up", "1x10", instance="sql-e", shard="2"),
    _series("mssql_up", "1x10", instance="sql-e", shard="2"),
    _series("instance:mssql_tempdb_written_bytes:rate5m", "1000000x10", instance="sql-a", shard="0"),
    _series("instance:mssql_tempdb_written_bytes:rate5m", "2500000x10", instance="sql-b", shard="0"),
    _series("instance:mssql_tempdb_written_bytes:rate5m", "500000x10", instance="sql-d", shard="1"),
    _series(N.SHARE, "1.2x10", instance="sql-a", shard="0", pool="tempdb", source="sqlserver"),
    _series(N.SHARE, "0.9x10", instance="sql-a", shard="0", pool="tempdb", source="host"),
    _series(N.SHARE, "0.85x10", instance="sql-a", shard="0", pool="data", source="sqlserver"),
    _series(N.SHARE, "0.3x10", instance="sql-d", shard="1", pool="tempdb", source="sqlserver"),
    _series(N.PRESSURE_EXTERNAL, "1x10", instance="sql-a", shard="0"),
    _series(N.PRESSURE_INTERNAL, "0x10", instance="sql-a", shard="0"),
    _series(N.PRESSURE_EXTERNAL, "0x10", instance="sql-b", shard="0"),
    _series(N.PRESSURE_INTERNAL, "1x10", instance="sql-b", shard="0"),
    _series(N.PRESSURE_EXTERNAL, "0x10", instance="sql-d", shard="1"),
    _series(N.PRESSURE_INTERNAL, "0x10", instance="sql-d", shard="1"),
]


def _per_shard(record: str, values: dict[str, float]) -> dict[str, Any]:
    samples = [{"labels": f'{record}{{shard="{s}"}}', "value": v} for s, v in values.items()]
    return {"expr": record, "eval_time": "5m", "exp_samples": samples}


def _fleet(record: str, value: float) -> dict[str, Any]:
    return {"expr": record, "eval_time": "5m", "exp_samples": [{"labels": record, "value": value}]}


HAND_WORKED = [
    _per_shard(N.SHARD_TARGETS, {"0": 2, "1": 2, "2": 1}),
    _per_shard(N.SHARD_TARGETS_UP, {"0": 1, "1": 1, "2": 1}),
    _per_shard(N.SHARD_TARGETS_DOWN, {"0": 1, "1": 1, "2": 0}),  # 0 recorded, not absent
    _fleet("fleet:mssql_tempdb_written_bytes:rate5m", 4_000_000),
    _fleet(N.FLEET_POOLS, 3),
    _fleet(N.FLEET_POOLS_OVER_RATING, 1),
    _fleet(N.FLEET_POOLS_OVER_BUDGET, 2),
    _fleet(N.FLEET_MEMORY_PRESSURE, 2),
]


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_the_fleet_figures_equal_the_hand_worked_ones(promtool, tmp_path: Path):
    tools.check_binary(promtool)
    rules = tmp_path / "fleet.rules.yml"
    rules.write_text(stripped(RULER_FILE.read_text()))
    case = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": HAND_WORKED_INPUT, "promql_expr_test": HAND_WORKED}],
    }
    (tmp_path / "fleet.test.yml").write_text(yaml.safe_dump(case, sort_keys=False))
    result = subprocess.run(
        [promtool.path, "test", "rules", "fleet.test.yml"], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_none_over_the_rating_records_zero_not_nothing():
    """The zero of a count is part of its meaning: an absent series would read as "no answer"."""
    spec = load()
    for rule in fleet.recording_rules(spec):
        if rule["record"] in (N.FLEET_POOLS_OVER_RATING, N.FLEET_POOLS_OVER_BUDGET, N.FLEET_MEMORY_PRESSURE):
            assert rule["expr"].endswith("or vector(0)"), rule["record"]
