"""The fleet group: counts and sums across every target of every shard, for the capacity review and the
SRE's view of the fleet (docs/scaling.md, "Where rules run").

No shard's Prometheus can evaluate these: each holds only its own slice of the targets. Thanos Ruler
evaluates them through Thanos Query (`rule_groups.evaluators` in alerts/thresholds.yml), and
alerts/evaluators.py gives the group `partial_response_strategy: abort`: a shard that does not answer
fails the evaluation, so the ruler records nothing for that step rather than a total that is silently low
(the series go stale and the panels show a gap; the ruler's /api/v1/rules names the missing store).

Every rule reads series the shards already have (their `up`, `mssql_up` and per-target records) and keeps
the shard label (`fleet.shard_label`) where it counts per shard. Counts that may rightly be zero say 0
(`or vector(0)`, `or 0 * count ...`) instead of disappearing, so "no pool over its rating" and "no shard
answered" never look alike: the second is a failed evaluation, not a zero.
"""

from __future__ import annotations

from typing import Any

from mssql_memory_exporter.scrape import scrape_metrics

from . import group_names
from . import names as N
from .rule_parts import INSTANCE, metric
from .spec import Spec, number

FILE_NAME = "mssql.fleet.rules.yml"


def _count_with_zero(spec: Spec, counted: str) -> str:
    """`count by (shard) (counted)`, with 0 for a shard that scrapes targets but has none counted."""
    shard = spec.fleet.shard_label
    return (
        f"count by ({shard}) (\n  {counted}\n)\n"
        f"or\n0 * count by ({shard}) ({metric(spec, 'up')})"
    )


def _pools(spec: Spec, condition: str = "") -> str:
    """How many SSD pools have a projection (any source), optionally only those meeting `condition`."""
    share = metric(spec, N.SHARE)
    per_pool = f"count by ({INSTANCE}, {spec.fleet.shard_label}, pool) ({share}{condition})"
    return f"count(\n  {per_pool}\n)\nor vector(0)"


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    shard = spec.fleet.shard_label
    up, mssql_up = metric(spec, "up"), metric(spec, scrape_metrics.UP.name)
    pressure = (
        f"{metric(spec, N.PRESSURE_EXTERNAL)} == 1\n    or {metric(spec, N.PRESSURE_INTERNAL)} == 1"
    )
    return [
        # Targets each shard scrapes (its `up` series of the SQL Server job), and of those the ones
        # answering (the exporter reached SQL Server) and the ones down (either hop failed): the
        # per-target MSSQLTargetDown pages for each; these say how much of the fleet is dark, per shard.
        {"record": N.SHARD_TARGETS, "expr": f"count by ({shard}) ({up})"},
        {"record": N.SHARD_TARGETS_UP, "expr": _count_with_zero(spec, f"{mssql_up} == 1")},
        {"record": N.SHARD_TARGETS_DOWN, "expr": _count_with_zero(spec, f"{up} == 0\n  or {mssql_up} == 0")},
        {
            # Bytes per second the whole fleet writes to tempdb: the figure Micron's brief sizes drives by.
            "record": N.RuleNames.from_spec(spec).fleet_tempdb,
            "expr": f"sum({metric(spec, N.RuleNames.from_spec(spec).tempdb(spec.tempdb.short_rate_window))})",
        },
        {"record": N.FLEET_POOLS, "expr": _pools(spec)},
        {
            "record": N.FLEET_POOLS_OVER_RATING,
            "expr": _pools(spec, f" > {number(spec.endurance.exhaustion_share)}"),
        },
        {
            "record": N.FLEET_POOLS_OVER_BUDGET,
            "expr": _pools(spec, f" > {number(spec.endurance.budget_high_share)}"),
        },
        {
            # Instances whose buffer pool is under pressure now, from outside SQL Server or inside it
            # (alerts/diagnosis.py's 0/1 records; one of the two at most is 1 per instance).
            "record": N.FLEET_MEMORY_PRESSURE,
            "expr": (
                f"count(\n  count by ({INSTANCE}, {shard}) (\n    {pressure}\n  )\n)\nor vector(0)"
            ),
        },
    ]


def groups(spec: Spec) -> dict[str, Any]:
    group = {"name": group_names.FLEET, "interval": spec.fleet.interval, "rules": recording_rules(spec)}
    return {"groups": [group]}
