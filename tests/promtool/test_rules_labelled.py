"""Every promtool rule test again, on series shaped like a real deployment's.

The hand-written rule tests (alerts/tests/*.test.yml) use series that carry only `job` and `instance`. A
real target carries more: the config's per-target `labels:` (`env`, `team`, ...) reach every series of the
target, and Alertmanager routes on them. A rule whose vector matching drops them (a one-to-one `on (...)`
keeps only the `on` labels) still passes the hand-written tests but loses `env` on its output, and a later
join against a series that kept it finds nothing: that is how the time-left rule went empty for every
labelled target while its tests passed.

Here each test file is rewritten before promtool runs it:
- every input series gets a target label (`env="prod"`), and every expected sample or alert of a target
  (one with an `instance` label) must carry it too;
- every input series is copied under the exporter's self-scrape job, which the spec's SQL Server selector
  must not match: those copies must change no result (no duplicated alert, no extra sample).
The rewritten files must pass exactly as the originals do.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import load
from tests import tools
from tests.background import BACKGROUND, Job, runs_ahead
from tests.promtool.test_alerting import RULE_TESTS, output, rule_test_files, run

TARGET_LABEL = ("env", "prod")
_JOB = re.compile(r'job\s*=\s*"[^"]*"')


def _self_scrape_job() -> str:
    """The job value of the spec's exporter selector (`job="mssql-exporter"` by default)."""
    match = re.fullmatch(r'\s*job\s*=\s*"([^"]+)"\s*', load().exporter_selector)
    assert match, "exporter_selector must be a single job=\"...\" matcher for this test"
    return match.group(1)


def with_label(series: str, name: str, value: str) -> str:
    """`metric{a="b"}` -> `metric{name="value",a="b"}`; a bare name gets braces."""
    if "{" not in series:
        return f'{series}{{{name}="{value}"}}'
    head, rest = series.split("{", 1)
    sep = "" if rest.lstrip().startswith("}") else ","
    return f'{head}{{{name}="{value}"{sep}{rest}'


def with_job(series: str, job: str) -> str:
    if _JOB.search(series):
        return _JOB.sub(f'job="{job}"', series, count=1)
    return with_label(series, "job", job)


def _is_target_series(labels: str) -> bool:
    return re.search(r'(^|[{,\s])instance\s*=', labels) is not None


def labelled(test_file: dict[str, Any], base_dir: Path, self_job: str) -> dict[str, Any]:
    name, value = TARGET_LABEL
    out = dict(test_file)
    out["rule_files"] = [str((base_dir / f).resolve()) for f in test_file["rule_files"]]
    tests = []
    for test in test_file["tests"]:
        test = dict(test)
        series = []
        for item in test.get("input_series", []):
            tagged = dict(item, series=with_label(item["series"], name, value))
            copy = dict(tagged, series=with_job(tagged["series"], self_job))
            # A series of the exporter's own /metrics (drive health) is its own copy.
            series += [tagged] if copy == tagged else [tagged, copy]
        test["input_series"] = series
        expr_tests = []
        for case in test.get("promql_expr_test", []):
            case = dict(case)
            samples = []
            for sample in case.get("exp_samples", []) or []:
                labels = sample.get("labels", "")
                if _is_target_series(labels):
                    sample = dict(sample, labels=with_label(labels, name, value))
                samples.append(sample)
            case["exp_samples"] = samples
            expr_tests.append(case)
        if expr_tests:
            test["promql_expr_test"] = expr_tests
        alert_tests = []
        for case in test.get("alert_rule_test", []):
            case = dict(case)
            alerts = []
            for alert in case.get("exp_alerts", []) or []:
                labels = dict(alert.get("exp_labels", {}))
                if "instance" in labels:
                    labels[name] = value
                alerts.append(dict(alert, exp_labels=labels))
            case["exp_alerts"] = alerts
            alert_tests.append(case)
        if alert_tests:
            test["alert_rule_test"] = alert_tests
        tests.append(test)
    out["tests"] = tests
    return out


def test_the_rewrite_adds_the_label_and_the_self_scrape_copy():
    """The rewrite itself, so a rewrite that changed nothing could not pass the promtool test below."""
    original = {
        "rule_files": ["../rules/x.yml"],
        "tests": [
            {
                "input_series": [{"series": 'mssql_up{job="mssql",instance="a"}', "values": "1"}],
                "promql_expr_test": [
                    {"expr": "x", "exp_samples": [{"labels": 'x{job="mssql",instance="a"}', "value": 1}]},
                    {"expr": "sum(x)", "exp_samples": [{"labels": "{}", "value": 1}]},
                ],
                "alert_rule_test": [{"alertname": "A", "exp_alerts": [{"exp_labels": {"instance": "a"}}]}],
            }
        ],
    }
    new = labelled(original, Path("/r/alerts/tests"), "mssql-exporter")
    assert new["rule_files"] == ["/r/alerts/rules/x.yml"]
    test = new["tests"][0]
    assert [s["series"] for s in test["input_series"]] == [
        'mssql_up{env="prod",job="mssql",instance="a"}',
        'mssql_up{env="prod",job="mssql-exporter",instance="a"}',
    ]
    assert test["promql_expr_test"][0]["exp_samples"][0]["labels"] == 'x{env="prod",job="mssql",instance="a"}'
    assert test["promql_expr_test"][1]["exp_samples"][0]["labels"] == "{}"
    assert test["alert_rule_test"][0]["exp_alerts"][0]["exp_labels"] == {"instance": "a", "env": "prod"}


@pytest.mark.parametrize(
    ("path", "promtool"),
    [(path, p) for p in tools.promtool_versions() for path in rule_test_files()],
    ids=lambda value: value.name if isinstance(value, Path) else str(value),
)
@runs_ahead(lambda path, promtool: labelled_run(path, promtool))
def test_rule_tests_pass_with_target_labels_and_a_self_scrape_job(path, promtool):
    tools.check_binary(promtool)
    result = BACKGROUND.result(*labelled_run(path, promtool))
    assert result.returncode == 0, output(result)


def labelled_run(path: Path, promtool: tools.Versioned) -> tuple[str, Job]:
    def job() -> subprocess.CompletedProcess[str]:
        rewritten = labelled(yaml.safe_load(path.read_text()), RULE_TESTS, _self_scrape_job())
        with tempfile.TemporaryDirectory(prefix="labelled-") as directory:
            target = Path(directory) / path.name
            target.write_text(yaml.safe_dump(rewritten, sort_keys=False, width=1000))
            return run([promtool.path, "test", "rules", str(target)], timeout=240)

    return f"labelled {promtool} {path.name}", job
