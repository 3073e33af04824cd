"""The pieces every rule generator builds with: a selected metric, an alert rule, the instance labels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mssql_memory_exporter.collectors import endurance

from .spec import Spec

INSTANCE = "job, instance"


def metric(spec: Spec, name: str, extra: str = "") -> str:
    """`name{<the SQL Server targets' selector>[, extra]}`."""
    return _selected(spec.selector, name, extra)


def exporter_metric(spec: Spec, name: str, extra: str = "") -> str:
    """`name{<the exporter's own /metrics selector>[, extra]}`: drive health, host metrics."""
    return _selected(spec.exporter_selector, name, extra)


def _selected(selector: str, name: str, extra: str) -> str:
    return f"{name}{{{selector}{', ' + extra if extra else ''}}}"


def alert(
    spec: Spec,
    name: str,
    expr: str,
    for_: str | None,
    severity: str,
    summary: str,
    description: str,
    keep_firing: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`labels`: the rule's own labels beyond severity, for two rules of one alert name that must differ
    in their label sets (promtool refuses duplicate rules); they win over a site label of the same name."""
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ is not None:
        rule["for"] = spec.duration(for_)
    if keep_firing is not None:
        rule["keep_firing_for"] = spec.duration(keep_firing)
    # The site's own labels (team, routing: docs/mixin.md) after the severity, which they cannot replace.
    rule["labels"] = {"severity": severity, **spec.alert_labels, **(labels or {})}
    rule["annotations"] = {"summary": summary, "description": description, "runbook_url": spec.runbook(name)}
    return rule


def with_instance_series(rule: str) -> str:
    """Template text opening a `with` block over the alerting instance's own series of `rule`, looked up
    when the alert is sent; the caller closes it with `{{ end }}` (an `{{ else }}` runs without one)."""
    return f"{{{{ with printf \"{rule}{{job='%s',instance='%s'}}\" $labels.job $labels.instance | query }}}}"


def instance_value(rule: str, fmt: str, unit: str = "") -> str:
    """Template text quoting the instance's own value of `rule`, or "unknown" when it has no such series."""
    shown = f"{{{{ . | first | value | {fmt} }}}}{unit}"
    return f"{with_instance_series(rule)}{shown}{{{{ else }}}}unknown{{{{ end }}}}"


def life_left(series: Callable[[str], str]) -> str:
    """Seconds until each SSD pool's planned retirement (in-service date + planned life - now), negative
    once the pool is kept past it: what the remaining alert and the dashboards' time-left verdict weigh a
    pool's time left against. `series(name)` selects a pool metric."""
    return (
        f"(\n    {series(endurance.IN_SERVICE.name)}\n"
        f"    + on ({INSTANCE}, pool) group_left () {series(endurance.PLANNED_LIFETIME.name)}\n"
        "    - time()\n  )"
    )
