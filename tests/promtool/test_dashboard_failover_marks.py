"""The availability-group failover marks of the memory and endurance dashboards, as Grafana draws them.

Grafana 12.4 turns a Prometheus annotation query's samples into marks, and drops every sample whose value
is not above 0 (packages/grafana-prometheus/src/annotations.ts: `value > 0`). The first form of the
failover mark returned the replica's role, 0 for the old primary: the replica that lost the primary role
got no mark at all (rendered in 12.4 on sqlag1 of the demo's availability-group pair, issue 26). Here
promtool evaluates the mark's query over a failover and the samples go through that filter.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import duration_seconds
from dashboards import frame
from tests import tools
from tests.lint.dashboards import BOARDS, substitute
from tests.unit.test_dashboards import PLACEHOLDERS

STEP_S = 15
FAILOVER_S = 600  # sqlag1 hands the primary role of ag1 to sqlag2 here


def _mark(uid: str) -> dict[str, Any]:
    [annotation] = [
        a for a in BOARDS[uid]["annotations"]["list"] if a["name"] == "Availability group role changes"
    ]
    return annotation


def _series(replica: str, before: int, after: int) -> dict[str, str]:
    labels = f'job="mssql",instance="{replica}",availability_group="ag1",replica="{replica}"'
    values = f"{before}x{FAILOVER_S // STEP_S - 1} {after}x80"  # the new role from FAILOVER_S on
    return {"series": f"mssql_ag_replica_is_primary{{{labels}}}", "values": values}


def _expected(replica: str, now: str, name: str = "") -> dict[str, Any]:
    labels = f'job="mssql",instance="{replica}",availability_group="ag1",replica="{replica}",now="{now}"'
    return {"labels": f"{name}{{{labels}}}", "value": 1}


@pytest.mark.parametrize("uid", [frame.MEMORY_UID, frame.ENDURANCE_UID])
def test_both_replicas_are_marked_with_what_they_are_now(uid):
    mark = _mark(uid)
    assert mark["useValueForTime"] is False
    assert "{{now}}" in mark["titleFormat"] and "{{now}}" in mark["textFormat"]


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_a_failover_marks_the_old_and_the_new_primary_for_one_window(tmp_path: Path, promtool):
    tools.check_binary(promtool)
    expr = substitute(_mark(frame.MEMORY_UID)["expr"], {**PLACEHOLDERS, "job": "mssql", "instance": ".+"})
    window = int(duration_seconds(expr.rsplit("[", 1)[1].split("]", 1)[0]))
    new = _expected("sqlag2", "the primary", "mssql_ag_replica_is_primary")
    both = [new, _expected("sqlag1", "a secondary")]
    # Every sample has a value above 0, so Grafana keeps it: a band from the change over the window.
    cases = [
        {"expr": expr, "eval_time": f"{FAILOVER_S - STEP_S}s", "exp_samples": []},
        {"expr": expr, "eval_time": f"{FAILOVER_S}s", "exp_samples": both},
        # The last step whose window still holds the sample before the change.
        {"expr": expr, "eval_time": f"{FAILOVER_S + window - 2 * STEP_S}s", "exp_samples": both},
        {"expr": expr, "eval_time": f"{FAILOVER_S + window + STEP_S}s", "exp_samples": []},
        # The first form, for contrast: the old primary's sample is 0, which Grafana drops.
        {
            "expr": 'mssql_ag_replica_is_primary{instance="sqlag1"}\n'
            f'and changes(mssql_ag_replica_is_primary{{instance="sqlag1"}}[{window}s]) > 0',
            "eval_time": f"{FAILOVER_S}s",
            "exp_samples": [
                {
                    "labels": 'mssql_ag_replica_is_primary{job="mssql",instance="sqlag1",'
                    'availability_group="ag1",replica="sqlag1"}',
                    "value": 0,
                }
            ],
        },
    ]
    test_file = tmp_path / "failover-marks.test.yml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [],
                "evaluation_interval": f"{STEP_S}s",
                "tests": [
                    {
                        "interval": f"{STEP_S}s",
                        "input_series": [_series("sqlag1", 1, 0), _series("sqlag2", 0, 1)],
                        "promql_expr_test": cases,
                    }
                ],
            }
        )
    )
    result = subprocess.run(
        [promtool.path, "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
