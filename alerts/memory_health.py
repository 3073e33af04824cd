"""Alerts on SQL Server 2025's own memory health verdict (the exporter's memory_health collector, from
sys.dm_os_memory_health_history). Thresholds: alerts/thresholds.yml `memory.health.*`.

The page reads the latest snapshot's severity: 3 (HIGH, "available memory is likely insufficient") held
for `high_for`. The warning reads the time-at-level counter rather than the severity gauge, so that
"MEDIUM or worse for most of the window" is not reset by one LOW snapshot the way a `for:` on the gauge
would be. Where the view is missing the collector is left out and neither rule has a series to fire on;
a target whose severity series disappears (a restart emptied the view) resolves the page, as it should:
SQL Server has no verdict yet.
"""

from __future__ import annotations

from typing import Any

from mssql_memory_exporter.collectors import memory_health as collector

from . import names as N
from .rule_parts import alert, metric
from .spec import Spec, number

HIGH = 3  # severity_level 3: HIGH (Microsoft's page for sys.dm_os_memory_health_history)
DEGRADED_LEVELS = "medium|high"  # the `level` label values of severity 2 and 3


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    health = spec.memory.health
    window = spec.window(health.degraded_window)
    seconds = collector.SECONDS.name

    def observed(levels: str = "") -> str:
        selected = metric(spec, seconds, f'level=~"{levels}"' if levels else "")
        # `without`: the target's own labels (env, team, ...) stay on the result for routing.
        return f"sum without (level) (increase({selected}[{window}]))"

    share = f"{observed(DEGRADED_LEVELS)}\n/\n{observed()}"
    return [
        alert(
            spec,
            N.MEMORY_HEALTH_HIGH,
            f"{metric(spec, collector.SEVERITY.name)} >= {HIGH}",
            health.high_for,
            "critical",
            "SQL Server reports memory health HIGH on {{ $labels.instance }}",
            "SQL Server's own memory health snapshots (sys.dm_os_memory_health_history) have said severity"
            " {{ $value }} (HIGH) for "
            + spec.duration(health.high_for)
            + ": high confidence that available memory is insufficient, new allocations can fail and"
            " disk I/O rises because the data cache left is too small.",
        ),
        alert(
            spec,
            N.MEMORY_HEALTH_DEGRADED,
            f"(\n  {share.replace(chr(10), chr(10) + '  ')}\n) >= {number(health.degraded_share)}",
            health.degraded_for,
            "warning",
            "SQL Server memory health MEDIUM or worse on {{ $labels.instance }}",
            "For {{ $value | humanizePercentage }} of the last "
            + health.degraded_window
            + ", SQL Server's memory health snapshots said MEDIUM or HIGH (limit: "
            + f"{number(health.degraded_share)} of the time): allocations may fail, the data cache is"
            " shrinking and disk reads are rising. Not yet HIGH for long; find what is taking the memory"
            " before it is.",
        ),
    ]
