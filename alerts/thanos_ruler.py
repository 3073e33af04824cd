"""The watch on Thanos Ruler: alerts for the fleet group's evaluations failing, and for the ruler itself
not being scraped (docs/scaling.md, "When the fleet rules fail").

The fleet group runs with `partial_response_strategy: abort` (alerts/evaluators.py): a shard that does
not answer fails every rule of the group and nothing is recorded, which is right for the totals but
silent. These alerts read the ruler's own /metrics, as a shard's Prometheus scrapes it (the spec's
fleet.ruler_selector), so they are evaluated there and still fire when Query or the ruler is down; the
ruler cannot page about itself. Opt-in like the smartctl_exporter rules: only a deployment that runs the
ruler loads alerts/rules/optional/mssql.thanos-ruler-watch.rules.yml, on the Prometheus that scrapes it.

What the ruler exports (Thanos 0.42.4, read from the real binary): per group, with `strategy="abort"`,
prometheus_rule_evaluations_total and prometheus_rule_evaluation_failures_total (one evaluation per
rule per step), under rule_group="<data-dir>/.tmp-rules/ABORT/<rule file>;<group>": the path is the
ruler's rewritten copy, so only the group name after the `;` is matched.
"""

from __future__ import annotations

import re
from typing import Any

from . import group_names
from . import names as N
from .rule_parts import alert
from .spec import Spec, number

FILE_NAME = "optional/mssql.thanos-ruler-watch.rules.yml"
# The ruler labels each group's counters with its partial-response strategy; the group name says it already.
PARTIAL_RESPONSE_LABEL = "strategy"


def _group_matcher() -> str:
    # A raw (backtick) PromQL string: the group name's dots are escaped for the regex only.
    return f"rule_group=~`.*;{re.escape(group_names.FLEET)}`"


def _evaluations(spec: Spec, metric: str, window: str) -> str:
    series = f"{metric}{{{spec.fleet.ruler_selector}, {_group_matcher()}}}"
    # `without`, not `by`: the labels a site's scrape config puts on the ruler (env, team) reach the alert
    # and its routing, as every target's labels do (tests/promtool/test_rules_labelled.py).
    return f"sum without ({PARTIAL_RESPONSE_LABEL}) (\n  increase({series}[{window}])\n)"


def failing_share(spec: Spec, window: str | None = None) -> str:
    """The share of the fleet group's rule evaluations that failed over the window, per ruler."""
    w = window or spec.window(spec.fleet.failing_window)
    return (
        f"{_evaluations(spec, 'prometheus_rule_evaluation_failures_total', w)}\n/\n"
        f"{_evaluations(spec, 'prometheus_rule_evaluations_total', w)}"
    )


def failing_expr(spec: Spec, window: str | None = None) -> str:
    """MSSQLFleetRulesFailing's condition (the end-to-end test evaluates it with a window of its own)."""
    return f"{failing_share(spec, window)}\n> {number(spec.fleet.failing_share)}"


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    fleet = spec.fleet
    window = spec.window(fleet.failing_window)
    up = f"up{{{fleet.ruler_selector}}}"
    return [
        alert(
            spec,
            N.FLEET_RULES_FAILING,
            failing_expr(spec),
            fleet.failing_for,
            "warning",
            "Thanos Ruler records no fleet figures: the fleet group's evaluations fail",
            "{{ $value | humanizePercentage }} of the evaluations of the fleet group"
            f" ({group_names.FLEET}) on ruler {{{{ $labels.instance }}}} failed over the last {window}"
            f" (limit: {number(fleet.failing_share * 100)}%). With partial_response_strategy abort a shard"
            " that does not answer fails every fleet rule: the fleet series have a gap, never a low total."
            " The ruler's log names the store that did not answer.",
        ),
        alert(
            spec,
            N.THANOS_RULER_DOWN,
            f"{up} == 0\nor\nabsent({up})",
            fleet.ruler_down_for,
            "warning",
            "Thanos Ruler is not scraped: nobody would see the fleet rules fail",
            "{{ if $labels.instance }}Scraping Thanos Ruler {{ $labels.instance }} failed"
            f" for {fleet.ruler_down_for} (up {{{{ $value }}}}){{{{ else }}}}No Thanos Ruler is scraped"
            f" (no up series of {fleet.ruler_selector}){{{{ end }}}}: the fleet group is evaluated by"
            " nobody, or its failures go unseen.",
        ),
    ]


def groups(spec: Spec) -> dict[str, Any]:
    return {"groups": [{"name": group_names.THANOS_RULER_WATCH, "rules": alert_rules(spec)}]}
