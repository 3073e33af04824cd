"""Rules behind the memory alerts' diagnosis: is the pressure from outside SQL Server or from inside, is
the target pulled down, do queries starve for workspace memory, does max server memory leave room?

The exporter reads the signals (sys.dm_os_sys_memory, sys.dm_os_process_memory, sys.dm_os_sys_info,
sys.configurations, sys.dm_exec_query_resource_semaphores); these rules combine them per instance. Every
threshold comes from alerts/thresholds.yml (`memory.*`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mssql_memory_exporter.collectors import (
    memory_config,
    memory_manager,
    os_memory,
    resource_semaphores,
    sql_statistics,
    wait_stats,
)

from . import names as N
from .names import RuleNames
from .rule_parts import INSTANCE, alert, instance_value, metric, with_instance_series
from .spec import Spec, number

GRANT_WAIT = 'wait_type="RESOURCE_SEMAPHORE"'


def recording_rules(spec: Spec) -> list[dict[str, Any]]:
    names = RuleNames.from_spec(spec)
    mem = spec.memory
    m = partial(metric, spec)  # every series here under the SQL Server targets' selector
    w = spec.window(spec.rate_window)
    stalls, lazy = names.instance_rate("free_list_stalls"), names.instance_rate("lazy_writes")
    churn = (
        f"(\n    ({stalls} > bool {number(mem.free_list_stalls_per_second.max)})\n"
        f"    + ({lazy} > bool {number(mem.lazy_writes_per_second.max)})\n  )"
    )
    return [
        {
            # How many of the three signals of pressure from outside are on: the OS says memory is low,
            # SQL Server finds its process short of RAM, the memory manager's target was pulled under
            # what it holds.
            "record": N.PRESSURE_EXTERNAL_SIGNALS,
            "expr": (
                f"{m(os_memory.OS_MEMORY_LOW_SIGNAL.name)}\n"
                f"+ {m(os_memory.PROCESS_PHYSICAL_MEMORY_LOW.name)}\n"
                f"+ (\n  {m(memory_config.COMMITTED_TARGET.name)}\n"
                f"  < bool {m(memory_config.COMMITTED.name)}\n)"
            ),
        },
        {"record": N.PRESSURE_EXTERNAL, "expr": f"{N.PRESSURE_EXTERNAL_SIGNALS} > bool 0"},
        {
            # 1 while the buffer pool churns although SQL Server has the memory it asked for and nothing
            # outside squeezes it: the workload outgrew the memory SQL Server may use.
            "record": N.PRESSURE_INTERNAL,
            "expr": (
                f"(\n  {churn} > bool 0\n)\n"
                f"* ({m(memory_manager.TOTAL.name)}"
                f" >= bool {m(memory_manager.TARGET.name)} * {number(mem.internal_total_at_target_share)})\n"
                f"* ({N.PRESSURE_EXTERNAL} == bool 0)"
            ),
        },
        {
            # Seconds spent waiting for a workspace memory grant per second: on average, how many queries
            # wait for one at once.
            "record": names.grant_waits,
            "expr": (
                "sum without (wait_type) (\n"
                f"  rate({m(wait_stats.SECONDS.name, GRANT_WAIT)}[{w}])\n)"
            ),
        },
        {
            # Their share of the wait time of every wait type the exporter reads (sys.dm_os_wait_stats,
            # the fixed list in docs/metrics.md): the denominator is that list, not all of SQL Server's.
            "record": names.grant_wait_share,
            "expr": (
                f"{names.grant_waits}\n"
                f"/ (sum without (wait_type) (rate({m(wait_stats.SECONDS.name)}[{w}])) > 0)"
            ),
        },
        {
            # Compilations per batch request: near 1, almost no plan is reused (plan-cache bloat).
            "record": names.compilations_per_batch,
            "expr": (
                f"rate({m(sql_statistics.COMPILATIONS.name)}[{w}])\n"
                f"/ ({names.instance_rate('batch_requests')} > 0)"
            ),
        },
        {
            # Workspace memory granted to queries over the most the memory manager will grant.
            "record": N.WORKSPACE_GRANTED,
            "expr": (
                f"{m(memory_manager.WORKSPACE_GRANTED.name)}\n"
                f"/ ({m(memory_manager.WORKSPACE_MAXIMUM.name)} > 0)"
            ),
        },
        {
            # RAM in use by everything but SQL Server (other processes, the OS, VM balloon drivers).
            "record": N.OTHER_PROCESSES,
            "expr": (
                f"clamp_min(\n  {m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name)}\n"
                f"  - {m(os_memory.OS_AVAILABLE_PHYSICAL_MEMORY_BYTES.name)}\n"
                f"  - {m(os_memory.PROCESS_PHYSICAL_MEMORY_BYTES.name)},\n  0\n)\n"
                f"/ ({m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name)} > 0)"
            ),
        },
    ]


def pressure_source() -> str:
    """Template text for MSSQLMemoryPressure: where the pressure comes from, as the rules classify it."""
    return (
        with_instance_series(N.PRESSURE_EXTERNAL)
        + "{{ if eq (. | first | value) 1.0 }} The pressure comes from outside SQL Server: the OS"
        f" is taking memory back (see {N.EXTERNAL_PRESSURE}).{{{{ else }}}} The pressure comes from inside"
        " SQL Server: nothing outside squeezes it, the workload needs more than it may use.{{ end }}"
        "{{ end }}"
    )


def alert_rules(spec: Spec) -> list[dict[str, Any]]:
    mem = spec.memory
    m = partial(metric, spec)
    pulled = mem.target_pulled_down
    target = m(memory_manager.TARGET.name)
    max_memory = m(memory_config.MAX_SERVER_MEMORY.name)
    physical = m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name)
    default = mem.max_server_memory_default
    return [
        alert(
            spec,
            N.EXTERNAL_PRESSURE,
            f"{N.PRESSURE_EXTERNAL_SIGNALS} > 0",
            mem.external_pressure.for_,
            "warning",
            "Memory pressure from outside SQL Server on {{ $labels.instance }}",
            "The OS or the host is taking memory from SQL Server on {{ $labels.instance }}: {{ $value }} of 3"
            " signals on (the OS low-memory signal, SQL Server's process-physical-memory-low flag, its"
            " committed target under what it has committed). Available physical memory: "
            + instance_value(os_memory.OS_AVAILABLE_PHYSICAL_MEMORY_BYTES.name, "humanize1024", "B")
            + "; other processes hold "
            + instance_value(N.OTHER_PROCESSES, "humanizePercentage")
            + " of RAM. SQL Server shrinks its caches and the buffer pool churns.",
            keep_firing=spec.keep_firing_for,
        ),
        alert(
            spec,
            N.TARGET_PULLED_DOWN,
            f"{target}\n< {number(pulled.share)} * max_over_time({target}[{spec.window(pulled.lookback)}])\n"
            f"or (\n  {target}\n  < {number(pulled.share)} * {max_memory}\n"
            f"  and {max_memory}\n  < {physical}\n)",
            pulled.for_,
            "warning",
            "SQL Server's target memory pulled down on {{ $labels.instance }}",
            "Target Server Memory is {{ $value | humanize1024 }}B, under "
            f"{number(pulled.share * 100)}% of its maximum over the last {pulled.lookback} or of a max server"
            " memory set under physical memory: SQL Server has been told to use less (the OS signalled low"
            " memory, a VM balloon, or max server memory was lowered).",
        ),
        alert(
            spec,
            N.GRANT_TIMEOUTS,
            f"increase({m(resource_semaphores.TIMEOUT_ERRORS.name)}"
            f"[{spec.window(mem.grant_timeouts.window)}]) > 0",
            None,
            "warning",
            "Queries time out waiting for workspace memory on {{ $labels.instance }}",
            "About {{ $value | humanize }} queries failed with error 8645 (timeout waiting for memory) in"
            " resource pool {{ $labels.pool_id }} (semaphore {{ $labels.resource_semaphore_id }}) over the"
            f" last {mem.grant_timeouts.window}: users saw errors, not just slowness.",
        ),
        alert(
            spec,
            N.GRANT_WAITS,
            f"{RuleNames.from_spec(spec).grant_waits} > {number(mem.grant_waits.max_waiting_queries)}",
            mem.grant_waits.for_,
            "warning",
            "Queries queue for workspace memory on {{ $labels.instance }}",
            "On average {{ $value | humanize }} queries at once waited for a workspace memory grant"
            f" (RESOURCE_SEMAPHORE wait seconds per second, {spec.rate_window} average; limit:"
            f" {number(mem.grant_waits.max_waiting_queries)}): sorts and hashes cannot start until memory"
            " frees up, and may time out (error 8645).",
            keep_firing=spec.keep_firing_for,
        ),
        alert(
            spec,
            N.MAX_MEMORY_DEFAULT,
            f"{N.OTHER_PROCESSES} > {number(default.other_processes_share)}\n"
            f"and on ({INSTANCE}) {max_memory} >= {number(default.default_bytes)}",
            default.for_,
            "info",
            "max server memory left at its default on {{ $labels.instance }}",
            "max server memory is at its default (2147483647 MB, unlimited) while other processes hold"
            " {{ $value | humanizePercentage }} of physical memory (limit: "
            f"{number(default.other_processes_share * 100)}%): SQL Server and they compete for RAM, and the"
            " OS will take memory back from SQL Server under load. Set max server memory.",
        ),
    ]
