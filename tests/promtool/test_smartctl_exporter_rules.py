"""The optional rules that translate prometheus-community/smartctl_exporter's series into the bundle's drive
series (alerts/smartctl_exporter.py, alerts/rules/optional/): linted like the bundle's own rules, every
translated series looked at by a promtool case, opt-in everywhere the bundle loads rules, and refused when
the spec's selectors cannot be set as a job label. The promtool cases themselves
(alerts/tests/smartctl_exporter.test.yml) run under both promtools with the other files (test_alerting.py,
test_rules_labelled.py).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import generate, smartctl_exporter
from alerts.names import SMARTCTL_EXPORTER_GROUP
from alerts.smartctl_exporter import selector_job
from alerts.spec import Spec, SpecError, load
from tests import tools
from tests.lint.rules import exported_metric_names, expression_lint

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = generate.RULES_DIR / smartctl_exporter.FILE_NAME
RULE_TEST = ROOT / "alerts" / "tests" / "smartctl_exporter.test.yml"
COMPOSE_PROMETHEUS = ROOT / "compose" / "prometheus" / "prometheus.yml"


def optional_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(OPTIONAL.read_text())["groups"] for r in g["rules"]]


@pytest.mark.parametrize("rule", optional_rules(), ids=lambda r: r["record"])
def test_optional_rule_lint(rule: dict[str, Any]) -> None:
    spec = load()
    problems = expression_lint(
        rule["expr"],
        spec.selector,
        exported_metric_names(),
        spec.exporter_selector,
        spec.smartctl_exporter_selector,
    )
    assert problems == []
    # Deliberately not level:metric:operations: each records a series the exporter exports, under its
    # name, so the drive alerts and dashboards read it unchanged. A typo would make a series nobody reads.
    assert rule["record"] in exported_metric_names(), f"{rule['record']} is not one of the exporter's series"


def test_the_lint_catches_smartctl_exporter_mistakes() -> None:
    ours, own, smart = 'job="mssql"', 'job="mssql-exporter"', 'job="smartctl"'
    good = f"smartctl_device_percentage_used{{{smart}}} / 100"
    assert expression_lint(good, ours, set(), own, smart) == []
    # In the bundle's own rules (no smartctl selector given) another exporter's series is a mistake.
    assert expression_lint(good, ours, set(), own) == [
        "smartctl_device_percentage_used is smartctl_exporter's: only its optional rules may read it"
    ]
    assert expression_lint(f"smartctl_device_percent_used{{{smart}}}", ours, set(), own, smart) == [
        "smartctl_device_percent_used is not exported by smartctl_exporter"
    ]
    assert expression_lint(f"smartctl_device_smart_status{{{ours}}}", ours, set(), own, smart) == [
        f"smartctl_device_smart_status is not filtered by the spec's selector {smart}"
    ]
    # A label value that happens to start like a metric is not one.
    assert expression_lint('label_replace(1, "reader", "smartctl_exporter", "", "")', ours, set(), own) == []


def test_every_translated_series_is_evaluated_by_the_promtool_cases() -> None:
    tests = yaml.safe_load(RULE_TEST.read_text())["tests"]
    cases = [case for test in tests for case in test["promql_expr_test"]]
    looked_at = {case["expr"].split("{")[0] for case in cases}
    missing = [r["record"] for r in optional_rules() if r["record"] not in looked_at]
    assert missing == []
    header = yaml.safe_load(RULE_TEST.read_text())
    assert header["group_eval_order"][0] == SMARTCTL_EXPORTER_GROUP
    assert f"../rules/{smartctl_exporter.FILE_NAME}" in header["rule_files"]


def test_the_optional_file_is_loaded_nowhere_by_default() -> None:
    """Opt-in: the compose Prometheus and the Kubernetes PrometheusRule take rules/*.rules.yml, which must
    not reach rules/optional/ (a site's smartctl_exporter may watch drives that are no SQL Server's)."""
    from deploy import prometheusrule

    assert OPTIONAL.exists()
    patterns = yaml.safe_load(COMPOSE_PROMETHEUS.read_text())["rule_files"]
    relative = f"rules/{smartctl_exporter.FILE_NAME}"
    assert patterns
    # Prometheus globs with Go's filepath.Glob, whose * stops at "/": a pattern reaches the file only if
    # its directory part matches the file's directory.
    for pattern in patterns:
        assert not fnmatch.fnmatchcase(str(Path(relative).parent), str(Path(pattern).parent)), pattern
    assert fnmatch.fnmatchcase("rules", str(Path(patterns[0]).parent)), "the check above would catch nothing"
    assert OPTIONAL not in prometheusrule.rule_files()
    names = {g["name"] for g in prometheusrule.groups()}
    assert SMARTCTL_EXPORTER_GROUP not in names and "mssql.recording" in names


@pytest.mark.parametrize("key", ["selector", "exporter_selector", "smartctl_exporter_selector"])
def test_a_selector_the_rules_cannot_set_as_a_job_is_refused(key: str) -> None:
    raw = load().raw
    raw[key] = 'job=~"mssql.*"'
    with pytest.raises(SpecError, match=key):
        generate.render(Spec.parse(raw))


def test_the_jobs_come_from_the_spec() -> None:
    raw = load().raw
    raw |= {"selector": 'job="sql"', "exporter_selector": 'job="sql-self"'}
    raw["smartctl_exporter_selector"] = 'job="s"'
    text = generate.render(Spec.parse(raw))[smartctl_exporter.FILE_NAME]
    assert 'smartctl_device_percentage_used{job="s"}' in text
    assert '"job", "sql-self", "", ""' in text and '"job", "sql", "", ""' in text
    assert 'job="smartctl"' not in text and "mssql-exporter" not in text


def test_kubernetes_users_get_it_as_a_prometheusrule_of_its_own() -> None:
    from deploy import prometheusrule

    path = prometheusrule.OUTPUT.parent / "optional" / "smartctl-exporter.prometheusrule.yaml"
    resource = yaml.safe_load(path.read_text())
    assert resource["kind"] == "PrometheusRule"
    assert resource["spec"]["groups"] == yaml.safe_load(OPTIONAL.read_text())["groups"]
    # Not applied with the bundle: kustomization.yaml lists only files beside it.
    kustomization = yaml.safe_load((prometheusrule.OUTPUT.parent / "kustomization.yaml").read_text())
    assert not any("optional" in resource for resource in kustomization["resources"])
    assert resource["metadata"]["name"] != "mssql-memory-exporter"
    assert prometheusrule.main(["--check"]) == 0


def docs_scrape_config() -> dict[str, Any]:
    """The scrape job docs/endurance.md shows for linking smartctl_exporter's drives to a pool."""
    text = (ROOT / "docs" / "endurance.md").read_text()
    section = text.split("## Drives read by smartctl_exporter", 1)[1].split("\n## ", 1)[0]
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", section, re.S) if "scrape_configs" in b]
    return yaml.safe_load(block)


def test_the_docs_relabelling_links_drives_as_the_rules_read_them() -> None:
    [job] = docs_scrape_config()["scrape_configs"]
    assert job["job_name"] == selector_job(load().smartctl_exporter_selector, "smartctl_exporter_selector")
    added = {relabel["target_label"] for relabel in job["metric_relabel_configs"]}
    assert added == {"pool", smartctl_exporter.LINK}
    # Prometheus anchors the regex and joins source labels with ";".
    [target] = [t for static in job["static_configs"] for t in static["targets"]]
    for relabel in job["metric_relabel_configs"]:
        assert re.fullmatch(relabel["regex"], f"{target};nvme0")
        assert not re.fullmatch(relabel["regex"], f"{target};nvme4")


@tools.needs(tools.PROMTOOL)
def test_the_docs_scrape_config_is_one_prometheus_accepts(tmp_path: Path) -> None:
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(docs_scrape_config()))
    result = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
