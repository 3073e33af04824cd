"""Alertmanager's label matchers and inhibit rules, read the way Alertmanager reads them, so a test can
tell whether the shipped config mutes one alert under another (tests/e2e/test_alert_e2e.py)."""

from __future__ import annotations

import json
import re
from typing import Any

_MATCHER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$")


def _matcher_holds(text: str, labels: dict[str, str]) -> bool:
    match = _MATCHER.match(text.strip().strip("{}"))
    if match is None:
        raise AssertionError(f"cannot read Alertmanager matcher {text!r}")
    name, op, raw = match.groups()
    value = json.loads(raw) if raw.startswith('"') else raw
    have = labels.get(name, "")
    if op == "=":
        return have == value
    if op == "!=":
        return have != value
    found = re.fullmatch(value, have) is not None  # Alertmanager anchors its regexes
    return found if op == "=~" else not found


def _side_holds(rule: dict[str, Any], side: str, labels: dict[str, str]) -> bool:
    checks = [_matcher_holds(m, labels) for m in rule.get(f"{side}_matchers") or []]
    checks += [labels.get(k, "") == str(v) for k, v in (rule.get(f"{side}_match") or {}).items()]
    checks += [
        re.fullmatch(str(v), labels.get(k, "")) is not None
        for k, v in (rule.get(f"{side}_match_re") or {}).items()
    ]
    return all(checks)


def inhibits(config: dict[str, Any], source: dict[str, str], target: dict[str, str]) -> bool:
    """Whether an inhibit rule of `config` lets an alert with `source` labels mute one with `target`."""
    return any(
        _side_holds(rule, "source", source)
        and _side_holds(rule, "target", target)
        and all(source.get(k, "") == target.get(k, "") for k in rule.get("equal") or [])
        for rule in config.get("inhibit_rules") or []
    )
