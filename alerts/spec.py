"""The thresholds spec (alerts/thresholds.yml), loaded once for the rule and dashboard generators.

Every number the rules and dashboards use comes from here; nothing else may spell a threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SPEC_PATH = Path(__file__).resolve().parent / "thresholds.yml"
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w|y)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class SpecError(ValueError):
    pass


def duration_seconds(text: str) -> float:
    match = _DURATION.match(text)
    if match is None:
        raise SpecError(f"not a Prometheus duration: {text!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def prometheus_duration(seconds: float) -> str:
    """Whole seconds as Prometheus writes a compound duration, largest unit first: 87000 -> "1d10m"."""
    left = int(seconds)
    if left != seconds or left <= 0:
        raise SpecError(f"not a whole positive number of seconds: {seconds!r}")
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


@dataclass(frozen=True)
class Spec:
    raw: dict[str, Any]
    # Overrides for tests that cannot wait minutes: every `for:` and the rate windows.
    for_override: str | None = None
    window_override: str | None = None

    def get(self, dotted: str) -> Any:
        node: Any = self.raw
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                raise SpecError(f"{SPEC_PATH.name}: missing {dotted}")
            node = node[part]
        return node

    def number(self, dotted: str) -> float:
        value = self.get(dotted)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SpecError(f"{SPEC_PATH.name}: {dotted} must be a number, got {value!r}")
        return value

    def duration(self, dotted: str) -> str:
        """A `for:` duration, or the override when one is set."""
        value = str(self.get(dotted))
        duration_seconds(value)
        return self.for_override or value

    def window(self, dotted: str) -> str:
        """A rate window, or the override when one is set."""
        value = str(self.get(dotted))
        duration_seconds(value)
        return self.window_override or value

    @property
    def selector(self) -> str:
        return str(self.get("selector"))

    @property
    def exporter_selector(self) -> str:
        return str(self.get("exporter_selector"))

    def runbook(self, alert: str) -> str:
        return f"{str(self.get('runbook_base_url')).rstrip('/')}/{alert}.md"


def load(path: Path = SPEC_PATH, for_override: str | None = None, window_override: str | None = None) -> Spec:
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: expected a mapping")
    for override in (for_override, window_override):
        if override is not None:
            duration_seconds(override)
    return Spec(raw, for_override, window_override)
