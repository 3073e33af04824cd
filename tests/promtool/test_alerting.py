"""Alerting rules: promtool unit tests of the rules, and a rule lint (Alertmanager's routing and delivery
are in test_alertmanager.py).

- alerts/tests/*.test.yml are promtool unit tests of the GENERATED rules; every alert must have a firing
  and a silent case there (including scrape gaps and counter resets).
- The lint stands in for pint (not installable here): labels, annotations, rule names, counters under
  rate(), and that every raw metric exists in the exporter and is filtered by the spec's selector.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.smartctl_exporter import selector_job
from alerts.spec import load as load_spec
from tests import tools
from tests.background import BACKGROUND, Job, runs_ahead
from tests.lint.rules import (
    NAMED_BY_THE_ISSUE,
    RECORD_NAME,
    alert_lint,
    exported_metric_names,
    expression_lint,
)

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
AM_CONFIG = ALERTS / "alertmanager.yml"
TEMPLATES = ALERTS / "templates"
RULES_DIR = ALERTS / "rules"
ALERT_RULES = RULES_DIR / "mssql.alerts.rules.yml"
RECORDING_RULES = RULES_DIR / "mssql.recording.rules.yml"
RULE_TESTS = ALERTS / "tests"

AMTOOL = "amtool"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"

# Where each severity must go; anything else (missing or misspelt) gets the root receiver, `ticket`: a
# human sees it, nobody is paged for an alert nobody could rank.
RECEIVER_OF_SEVERITY = {"critical": "pager", "warning": "ticket", "info": "blackhole"}
DEFAULT_RECEIVER = "ticket"

needs_amtool = tools.needs({AMTOOL: "prometheus-alertmanager"})
needs_alertmanager = tools.needs({ALERTMANAGER: "prometheus-alertmanager"})


def run(args: list[str], timeout: float, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    # Every external tool gets a deadline: a hung amtool must fail the test, not the whole run.
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout}{result.stderr}"


def alert_rules() -> list[dict[str, Any]]:
    """The bundle's alerts, and those of the opt-in files (alerts/rules/optional/) that have any."""
    paths = [ALERT_RULES, *sorted((RULES_DIR / "optional").glob("*.rules.yml"))]
    groups = [g for p in paths for g in yaml.safe_load(p.read_text())["groups"]]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def recording_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RECORDING_RULES.read_text())["groups"] for r in g["rules"]]


# --------------------------------------------------------------------------------------------------
# promtool unit tests of the generated rules


def rule_test_files() -> list[Path]:
    return sorted(RULE_TESTS.glob("*.test.yml"))


def test_there_are_rule_tests() -> None:
    assert rule_test_files(), "no alerts/tests/*.test.yml"


# One run per file and release, so a failure names both: under Debian's 2.42 and under 3.13.3, the
# release compose pins. 3.x reads range windows as left-open, so a file can pass under one and fail under
# the other (docs/alerts.md, "Testing the rules").
def promtool_run(promtool: tools.Versioned, path: Path) -> tuple[str, Job]:
    def job() -> subprocess.CompletedProcess[str]:
        return run([promtool.path, "test", "rules", str(path.relative_to(ROOT))], timeout=240)

    return f"plain {promtool} {path.name}", job


@pytest.mark.parametrize(
    ("promtool", "path"),
    [(p, path) for p in tools.promtool_versions() for path in rule_test_files()],
    ids=lambda v: v.name.removesuffix(".test.yml") if isinstance(v, Path) else str(v),
)
@runs_ahead(promtool_run)
def test_promtool_unit_tests_pass(promtool: tools.Versioned, path: Path) -> None:
    tools.check_binary(promtool)
    result = BACKGROUND.result(*promtool_run(promtool, path))
    assert result.returncode == 0, output(result)


def load_rule_tests(paths: list[Path]) -> list[dict[str, Any]]:
    return [test for p in paths for test in yaml.safe_load(p.read_text())["tests"]]


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for test in load_rule_tests(rule_test_files()):
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {r["alert"] for r in alert_rules()}
    assert names - firing == set(), "alerts without a firing case in alerts/tests"
    assert names - silent == set(), "alerts without a silent case (exp_alerts: []) in alerts/tests"
    assert (firing | silent) - names == set(), "cases for alerts that do not exist"


def test_every_recording_rule_is_evaluated_by_a_unit_test() -> None:
    exprs = " ".join(
        case["expr"]
        for test in load_rule_tests(rule_test_files())
        for case in test.get("promql_expr_test", [])
    )
    missing = [r["record"] for r in recording_rules() if r["record"] not in exprs]
    assert missing == [], "recording rules no promql_expr_test looks at"


# Jobs of other exporters, used on purpose to prove that the selector ignores them.
# The exporter's own job (the spec's exporter_selector) is one of them: its /metrics must never count as
# a SQL Server target.
FOREIGN_JOBS = {"node", "other", "windows", "perfmon", "sqlagent", "mssql-exporter"}
SERIES = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)\{(?P<labels>.*)\}$")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def test_input_series_carry_job_and_instance() -> None:
    spec = load_spec()
    # smartctl_exporter's job feeds the optional translation rules (alerts/tests/smartctl_exporter.test.yml).
    foreign = FOREIGN_JOBS | {selector_job(spec.smartctl_exporter_selector, "smartctl_exporter_selector")}
    # Thanos Ruler's job feeds the optional watch on the fleet group (alerts/tests/thanos_ruler.test.yml).
    foreign |= {selector_job(spec.fleet.ruler_selector, "fleet.ruler_selector")}
    selector = re.fullmatch(r'job(=~|=)"(.*)"', spec.selector)
    assert selector, "the lint expects the spec's selector to be one job matcher"
    job_regex = re.compile(selector.group(2) if selector.group(1) == "=~" else re.escape(selector.group(2)))
    paths = rule_test_files()
    for test in load_rule_tests(paths):
        for item in test.get("input_series", []):
            match = SERIES.match(item["series"])
            assert match, item["series"]
            labels = dict(LABEL.findall(match.group("labels")))
            assert "instance" in labels, item["series"]
            assert "job" in labels, item["series"]
            assert job_regex.fullmatch(labels["job"]) or labels["job"] in foreign, item["series"]


# --------------------------------------------------------------------------------------------------
# Rule lint


def test_exported_metric_names_are_collected() -> None:
    names = exported_metric_names()
    # From the golden files and from the collectors' literals respectively.
    assert {"mssql_lazy_writes_total", "mssql_target_info", "mssql_start_time_seconds"} <= names
    assert {"mssql_up", "mssql_ssd_pool_written_bytes_total", "mssql_host_disk_written_bytes_total"} <= names


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: f"{r['alert']}-{r['labels']['severity']}")
def test_alert_rule_lint(rule: dict[str, Any]) -> None:
    assert alert_lint(rule) == []
    spec = load_spec()
    assert expression_lint(rule["expr"], spec.selector, exported_metric_names(), spec.exporter_selector) == []


@pytest.mark.parametrize("rule", recording_rules(), ids=lambda r: r["record"])
def test_recording_rule_lint(rule: dict[str, Any]) -> None:
    spec = load_spec()
    assert expression_lint(rule["expr"], spec.selector, exported_metric_names(), spec.exporter_selector) == []
    assert RECORD_NAME.match(rule["record"]) or rule["record"] in NAMED_BY_THE_ISSUE, (
        f"{rule['record']} is not level:metric:operations"
    )


def test_named_exceptions_exist() -> None:
    # An exception for a name that is no longer generated would hide nothing and rot.
    assert {r["record"] for r in recording_rules()} >= NAMED_BY_THE_ISSUE


def test_lint_catches_what_it_should() -> None:
    # The lint is only worth something if it fails on bad rules.
    selector = 'job=~".*mssql.*"'
    exported = {"mssql_lazy_writes_total", "mssql_memory_free_bytes"}
    assert expression_lint(f"rate(mssql_lazy_writes_total{{{selector}}}[5m])", selector, exported) == []
    assert expression_lint("instance:mssql_lazy_writes:rate5m > 20", selector, exported) == []
    assert expression_lint(f"rate(mssql_memory_free_bytes{{{selector}}}[5m])", selector, exported) == [
        "rate() over mssql_memory_free_bytes, which is not a counter (_total)"
    ]
    assert expression_lint("mssql_memory_free_bytes < 1", selector, exported) == [
        f"mssql_memory_free_bytes is not filtered by the spec's selector {selector}"
    ]
    assert expression_lint(f'mssql_memory_free_byte{{{selector}, x="1"}} < 1', selector, exported) == [
        "mssql_memory_free_byte is not exported by the exporter"
    ]
    # The exporter's own drive series take the exporter's selector, not the targets'.
    own, drive = 'job="mssql-exporter"', "mssql_drive_life_used_ratio"
    assert expression_lint(f"{drive}{{{own}}} > 0.8", selector, {drive}, own) == []
    assert expression_lint(f"{drive}{{{selector}}} > 0.8", selector, {drive}, own) == [
        f"{drive} is not filtered by the spec's selector {own}"
    ]
    bad = {
        "alert": "MSSQLX",
        "expr": "1",
        "labels": {"severity": "page"},
        "annotations": {"summary": "s", "description": "no value", "runbook_url": "https://x/MSSQLY.md"},
    }
    assert len(alert_lint(bad)) == 3
    assert not RECORD_NAME.match("pool:mssql_ssd_endurance_remaining_seconds")


# --------------------------------------------------------------------------------------------------
# Comments and docs that restate the rules


def header_comment(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# "))
    return " ".join(lines)


STALE_FAILURE_CLAIM = re.compile(r"known issue|expected to fail", re.I)


def test_rule_test_headers_do_not_announce_a_failure() -> None:
    # test_promtool_unit_tests_pass runs every file and must pass: a header saying a file is expected
    # to fail is stale, and sends a reader looking for a bug that was fixed.
    for path in rule_test_files():
        header = header_comment(path)
        assert header, f"{path.name}: no header saying what it tests"
        assert not STALE_FAILURE_CLAIM.search(header), f"{path.name}: {header[:120]}"
        for doc in re.findall(r"see (\S+\.md)", header):
            assert (path.parent / doc).exists(), f"{path.name} points to {doc}, which does not exist"
    assert STALE_FAILURE_CLAIM.search("# KNOWN ISSUE (expected to fail until ...)")


def comment_text(path: Path) -> str:
    return " ".join(line.split("#", 1)[1] for line in path.read_text().splitlines() if "#" in line)


def test_alertmanager_comments_quote_the_specs_limits() -> None:
    spec = load_spec()
    comments = comment_text(AM_CONFIG)
    days = {float(d) for d in re.findall(r"\b(\d+) days\b", comments)}
    limits = {
        spec.endurance.remaining_warning_seconds / 86400,
        spec.endurance.remaining_critical_seconds / 86400,
    }
    assert days == limits, f"alertmanager.yml's comments say {sorted(days)} days; the spec {sorted(limits)}"
    shares = {float(p) / 100 for p in re.findall(r"\b(\d+)%", comments)}
    shares |= {float(s) for s in re.findall(r"share > ([\d.]+)", comments)}
    assert shares and shares <= {
        spec.endurance.budget_high_share,
        spec.endurance.exhaustion_share,
    }


# Sentences the docs once carried while MSSQLTargetDown did not cover a dead exporter.
DENIES_EXPORTER_DOWN = re.compile(
    r"no rule of this bundle fires|this bundle has no rule|does \*\*not\*\* cover the exporter|"
    r"this alert does not fire then|the bundle does not ship one",
    re.I,
)


def test_target_down_docs_say_what_the_rule_covers() -> None:
    [rule] = [r for r in alert_rules() if r["alert"] == "MSSQLTargetDown"]
    selector = load_spec().selector
    assert f"up{{{selector}}} == 0" in rule["expr"] and f"absent(up{{{selector}}})" in rule["expr"]
    for path in (ROOT / "docs" / "alerts.md", ROOT / "docs" / "runbooks" / "MSSQLTargetDown.md"):
        text = " ".join(path.read_text().split())
        denial = DENIES_EXPORTER_DOWN.search(text)
        assert denial is None, f"{path.name}: {denial.group(0)!r}, but the rule has up == 0 or absent(up)"
        assert "absent(up{" in text and "up == 0" in text.replace("`", ""), path.name


def test_the_checks_docs_alerts_md_lists_exist() -> None:
    # The doc stands in for pint: every test it names as a check must exist, or the table rots.
    text = (ROOT / "docs" / "alerts.md").read_text()
    named = re.findall(r"`(tests/(?:\w+/)?test_\w+\.py)::(test_\w+)`", text)
    assert len(named) >= 10
    for path, test in named:
        source = (ROOT / path).read_text()
        assert re.search(rf"^def {test}\(", source, re.M), (
            f"docs/alerts.md names {path}::{test}, which does not exist"
        )
    assert "cloudflare/pint" in text and "403" in text
