"""The recording rules split by what they cost a Prometheus to evaluate.

Rules over a short window (the rate window's rates, per-target gauges) stay in `mssql.recording`, evaluated
at the global evaluation interval (the scrape cadence). Rules whose expression reads a range or subquery of
the spec's `rule_groups.long_window` or more (a day, three days, a week) re-read days of every pool and
volume series; they go to `mssql.recording.long_window`, evaluated every `rule_groups.long_window_interval`
(at most four minutes, see spec.py). Every rule built on one of them goes with it, after it in the same
group: Prometheus evaluates a group's rules in order, so a chain never reads a step of its own input that is
one interval old, and no rule at the scrape cadence waits on a slow one. promtool ignores a group's interval
(it evaluates every group at the test's own), so the split is checked on a real Prometheus
(bench/rule_groups.py).
"""

from __future__ import annotations

import re
from typing import Any

from . import group_names
from .spec import Spec, duration_seconds

FAST_GROUP = group_names.RECORDING
LONG_WINDOW_GROUP = group_names.RECORDING_LONG_WINDOW
# Prometheus evaluates groups at the same instant in no fixed order; the promtool tests list them so.
EVAL_ORDER = (FAST_GROUP, LONG_WINDOW_GROUP)

# A range `[7d]` or a subquery `[7d1h:1h]`: the window is the part before the colon.
_RANGE = re.compile(r"\[([0-9smhdwy]+)(?::[0-9smhdwy]*)?\]")
_COMPOUND = re.compile(r"(\d+)([smhdwy])")


def window_seconds(expr: str) -> float:
    """The longest range or subquery window `expr` reads, in seconds (0 for none)."""
    longest = 0.0
    for match in _RANGE.finditer(expr):
        total = sum(duration_seconds(f"{n}{unit}") for n, unit in _COMPOUND.findall(match.group(1)))
        longest = max(longest, total)
    return longest


def long_window_records(rules: list[dict[str, Any]], long_window: str) -> set[str]:
    """Records reading `long_window` or more, and every record that reads one of those (transitively)."""
    limit = duration_seconds(long_window)
    slow = {rule["record"] for rule in rules if window_seconds(rule["expr"]) >= limit}
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule["record"] not in slow and any(_reads(rule["expr"], name) for name in slow):
                slow.add(rule["record"])
                changed = True
    return slow


def _reads(expr: str, record: str) -> bool:
    return re.search(rf"(?<![\w:]){re.escape(record)}(?![\w:])", expr) is not None


def recording_groups(spec: Spec, rules: list[dict[str, Any]], spec_rules: list[dict[str, Any]]) -> list[dict]:
    """The two groups. `spec_rules` are the same rules with the spec's own windows: the end-to-end tests
    shorten every window (`--window`), and the split must not change with them. With windows shortened,
    the long group keeps no interval of its own, so those tests need not wait minutes for its results."""
    slow = long_window_records(spec_rules, spec.rule_groups.long_window)
    fast_rules = [rule for rule in rules if rule["record"] not in slow]
    slow_rules = [rule for rule in rules if rule["record"] in slow]
    long_group: dict[str, Any] = {"name": LONG_WINDOW_GROUP}
    if spec.window_override is None:
        long_group["interval"] = spec.rule_groups.long_window_interval
    long_group["rules"] = slow_rules
    return [{"name": FAST_GROUP, "rules": fast_rules}, long_group]
