"""Rules a capacity review reads beside tempdb's writes: when memory changed, and how large the buffer
pool was.

Micron's brief shows tempdb writes rising when SQL Server gets more memory. On a user's own servers that
shows only if memory changes are marked next to the write rate: these rules give the marks (max server
memory, physical memory and target memory, each by how many bytes it moved) and the buffer pool's size
averaged over the same window as tempdb's long write rate. Thresholds: alerts/thresholds.yml `tempdb.*`.
"""

from __future__ import annotations

from typing import Any

from mssql_memory_exporter.collectors import memory_config, memory_manager, os_memory

from .names import RuleNames
from .rule_parts import metric
from .spec import Spec, number

# What the `memory` label of the change rule says, and the metric it follows.
SIZING = {
    "max_server_memory": memory_config.MAX_SERVER_MEMORY.name,
    "physical": os_memory.OS_PHYSICAL_MEMORY_BYTES.name,
    "target": memory_manager.TARGET.name,
}


def _moved(spec: Spec, name: str) -> str:
    """The metric's change over the rate window, as a difference of two instants: delta() would
    extrapolate a step it saw half-way into a change that never happened."""
    series = metric(spec, name)
    return f"({series} - {series} offset {spec.window(spec.rate_window)})"


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    names = RuleNames.from_spec(spec)
    target_then = f"{metric(spec, SIZING['target'])} offset {spec.window(spec.rate_window)}"
    share = number(spec.tempdb.memory_change_target_share)
    parts = [
        # Configuration and the machine's RAM: every change is a decision someone made.
        f'label_replace(\n  {_moved(spec, SIZING["max_server_memory"])} != 0,\n'
        '  "memory", "max_server_memory", "", ""\n)',
        f'label_replace(\n  {_moved(spec, SIZING["physical"])} != 0,\n  "memory", "physical", "", ""\n)',
        # Target memory also moves by itself as the OS's free memory does: only a large move is marked.
        f"label_replace(\n  {_moved(spec, SIZING['target'])}\n"
        f"  and abs{_moved(spec, SIZING['target'])} > {target_then} * {share},\n"
        '  "memory", "target", "", ""\n)',
    ]
    return [
        {
            # One series per instance and kind of memory while the change is within the rate window; the
            # value is the change in bytes (negative: memory taken away). Dashboards mark it.
            "record": names.memory_sizing_change,
            "expr": "\nor\n".join(parts),
        },
        {
            # What the buffer pool held, on average, over the window of tempdb's long write rate: the
            # pair a capacity review plots over weeks.
            "record": names.buffer_pool_long,
            "expr": (
                f"avg_over_time({metric(spec, memory_manager.DATABASE_CACHE.name)}"
                f"[{spec.window(spec.tempdb.long_rate_window)}])"
            ),
        },
    ]
