"""Named moments of a scenario: step times that a schedule may bring forward.

`moments: {failover: 300}` in a scenario file names scenario times; a view cell's `steps` may use the
name instead of a number (`role: {gauge: 1, steps: [[failover, 2]]}`). Instance.reach moves a moment to
"now" (schedule.py `--moment failover@40` calls it), so a test fails an availability group over when
its own conditions are met, and the file still says what happens and when by default.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def _step_moments(node: Any) -> Iterator[str]:
    """The moment names used as step times anywhere under a view's rows."""
    if isinstance(node, dict):
        for step in node.get("steps", []) if isinstance(node.get("steps"), list) else []:
            if isinstance(step, list | tuple) and step and isinstance(step[0], str):
                yield step[0]
        for value in node.values():
            yield from _step_moments(value)
    elif isinstance(node, list):
        for item in node:
            yield from _step_moments(item)


def check_moments(views: Mapping[str, Any], moments: Mapping[str, float], file: str) -> None:
    unknown = sorted(set(_step_moments(views)) - set(moments))
    if unknown:
        known = ", ".join(sorted(moments)) or "none"
        raise ValueError(
            f"{file}: steps name moment(s) {', '.join(unknown)} that `moments:` lacks (has: {known})"
        )


def at_moments(raw: object, moments: Mapping[str, float], where: str) -> object:
    """A cell spec with each named step time (`[[failover, 2]]`) replaced by the moment's scenario time."""
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        return raw
    steps = []
    for step in raw["steps"]:
        if isinstance(step, list | tuple) and step and isinstance(step[0], str):
            if step[0] not in moments:
                raise ValueError(f"{where}: no moment {step[0]!r} (moments: {', '.join(sorted(moments))})")
            step = [moments[step[0]], *step[1:]]
        steps.append(step)
    return {**raw, "steps": steps}
