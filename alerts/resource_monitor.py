"""Rules on the resource monitor's own verdicts (the resource_monitor collector, sys.dm_os_ring_buffers):
repeated LOW notifications told apart by where the pressure came from, and out-of-memory records.
Thresholds: alerts/thresholds.yml `memory.low_notifications`, `memory.out_of_memory`."""

from __future__ import annotations

from typing import Any

from mssql_memory_exporter.collectors import resource_monitor

from . import names as N
from .rule_parts import alert, metric
from .spec import Spec, number

LOW = 'notification=~"physical_low|virtual_low"'
PER_TARGET = "sum without (notification, source, node)"


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    low = spec.memory.low_notifications
    window = spec.window(low.window)
    oom = spec.memory.out_of_memory
    oom_total = metric(spec, resource_monitor.OOM_TOTAL.name)

    def repeated(sources: str) -> str:
        series = metric(spec, resource_monitor.NOTIFICATIONS_TOTAL.name, f'{LOW}, source=~"{sources}"')
        return f"{PER_TARGET} (increase({series}[{window}])) >= {number(low.min_count)}"

    times = f'{{{{ $value | printf "%.0f" }}}} times in {low.window}'
    return [
        alert(
            spec,
            N.MEMORY_LOW_INTERNAL,
            repeated("process|both"),
            None,
            "warning",
            "SQL Server signalled low memory from inside on {{ $labels.instance }}",
            f"SQL Server's resource monitor on {{{{ $labels.instance }}}} broadcast LOW memory {times},"
            " with the pressure from inside the process (IndicatorsProcess): its caches shrink because"
            " something in SQL Server takes memory (grants, a cache, a lowered max server memory). Who holds"
            " it is on the diagnosis board (memory clerks, grants).",
        ),
        alert(
            spec,
            N.MEMORY_LOW_EXTERNAL,
            repeated("system|both"),
            None,
            "warning",
            "The OS signalled low memory to SQL Server on {{ $labels.instance }}",
            f"SQL Server's resource monitor on {{{{ $labels.instance }}}} broadcast LOW memory {times}"
            " because the OS said memory was low (IndicatorsSystem): something else on the host takes"
            " memory, or max server memory is set too high for what the host has left.",
        ),
        alert(
            spec,
            N.OUT_OF_MEMORY,
            f"{PER_TARGET} (increase({oom_total}[{spec.window(oom.window)}])) > 0",
            None,
            "critical",
            "SQL Server ran out of memory on {{ $labels.instance }}",
            'SQL Server on {{ $labels.instance }} wrote {{ $value | printf "%.0f" }} out-of-memory'
            f" record(s) in the last {oom.window}: an allocation failed (error 701 territory), so queries"
            " or internal tasks failed with it.",
        ),
    ]
