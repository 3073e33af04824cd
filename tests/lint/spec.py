"""Reading and moving the thresholds spec by the dotted paths tests parametrize over."""

from __future__ import annotations

from typing import Any

from alerts.spec import Spec


def spec_value(spec: Spec, dotted: str) -> Any:
    """The value at a dotted path of the spec as YAML spells it ("memory.lazy_writes_per_second.max")."""
    node: Any = spec.raw
    for part in dotted.split("."):
        node = node[part]
    return node


def moved_number(value: float) -> float:
    """A value no other setting has, still valid where it stood: a ratio (0..1] stays a ratio."""
    if 0 < value <= 1:
        return round(float(value) * 0.73 + 0.0123, 6)
    return round(float(value) * 1.37 + 0.123, 6)


def perturbed(node: Any) -> Any:
    """The spec with every number moved to a value no setting has (durations and strings unchanged)."""
    if isinstance(node, dict):
        return {key: perturbed(value) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return [perturbed(value) for value in node]
    if isinstance(node, int | float) and not isinstance(node, bool):
        return moved_number(node)
    return node
