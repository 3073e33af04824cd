"""The memory dashboard's diagnosis rows, beside the diagnosis alerts (alerts/diagnosis.py): who holds
SQL Server's memory, and pressure from outside it."""

from __future__ import annotations

from mssql_memory_exporter.collectors import (
    memory_clerks,
    memory_config,
    memory_manager,
    memory_node,
    os_memory,
    plan_cache,
    sql_statistics,
    wait_stats,
)

from alerts.names import (
    EXTERNAL_PRESSURE,
    GRANT_TIMEOUTS,
    GRANT_WAITS,
    GRANTS_PENDING,
    MAX_MEMORY_DEFAULT,
    MEMORY_PRESSURE,
    TARGET_PULLED_DOWN,
)
from alerts.spec import number as num

from .empty import off
from .grafana import Panel, Query, Row, Thresholds, override
from .limits import Limits, pct
from .panels import ANY, STACKED, UNSTACKED
from .queries import m, rate


def memory_row_who_holds(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Who holds the memory"."""
    parts = {
        "database cache": memory_manager.DATABASE_CACHE.name,
        "plan cache (SQL cache)": memory_manager.SQL_CACHE.name,
        "locks": memory_manager.LOCK.name,
        "log pool": memory_manager.LOG_POOL.name,
        "optimizer": memory_manager.OPTIMIZER.name,
        "connections": memory_manager.CONNECTION.name,
        "free": memory_manager.FREE.name,
    }
    # Stolen memory is everything but database pages and free memory; what the named parts of it leave.
    # Query workspace is not one of them: a grant is memory promised, stolen only as the query uses it
    # (granted can exceed what is stolen), so it has its own panel below.
    named_stolen = " + ".join(m(parts[k]) for k in list(parts)[1:-1])
    return [
        Row("Who holds the memory"),
        Panel(
            "timeseries",
            "What SQL Server's memory holds, against target and total",
            "Memory Manager's committed memory split by use, stacked: database pages, the plan cache, "
            "locks, the log pool, the optimizer, connections, other stolen memory (query workspace in use "
            "among it) and free; target and total as lines. Healthy: the stack reaches total, "
            "total sits at target, and database cache is most of it. A plan cache or workspace growing "
            "at the database cache's expense is internal pressure; total falling with the target is "
            "pressure from outside (row below).",
            "bytes",
            [
                *(Query(m(metric), name) for name, metric in parts.items() if name != "free"),
                Query(
                    f"clamp_min(\n  {m(memory_manager.STOLEN.name)}\n  - ({named_stolen}),\n  0\n)",
                    "other stolen",
                ),
                Query(m(parts["free"]), "free"),
                Query(m(memory_manager.TARGET.name), "target"),
                Query(m(memory_manager.TOTAL.name), "total"),
            ],
            width=24,
            min=0,
            custom=STACKED,
            overrides=[override("target", *UNSTACKED), override("total", *UNSTACKED)],
            no_value=off(memory_manager),
        ),
        Panel(
            "timeseries",
            "Memory clerks",
            "sys.dm_os_memory_clerks, pages summed per clerk type (the fixed list in docs/metrics.md, the "
            "rest as other), stacked against Total Server Memory. Healthy: MEMORYCLERK_SQLBUFFERPOOL (the "
            "buffer pool) is most of it. A plan cache (CACHESTORE_SQLCP) of gigabytes with many "
            "compilations per batch is plan-cache bloat; MEMORYCLERK_SQLQERESERVATIONS holds query grants; "
            "OBJECTSTORE_LOCK_MANAGER grows with lock escalation turned off; MEMORYCLERK_XTP is In-Memory "
            "OLTP.",
            "bytes",
            [
                Query(f"{m(memory_clerks.CLERK_BYTES.name)} > 0", "{{clerk}}"),
                Query(m(memory_manager.TOTAL.name), "Total Server Memory"),
            ],
            width=24,
            height=10,  # sixteen clerk names: the legend needs three lines
            min=0,
            custom=STACKED,
            overrides=[override("Total Server Memory", *UNSTACKED)],
            no_value=off(memory_clerks),
        ),
        Panel(
            "timeseries",
            "Plan cache by type: size and re-use",
            "SQL Server:Plan Cache per cache type: the memory its plans hold (stacked; sql_plans is the "
            "CACHESTORE_SQLCP clerk above) and the share of lookups that found a cached plan (right axis, "
            "since start). Healthy: object and SQL plans found again, hit ratios near the top. Gigabytes of "
            "sql_plans with a low hit ratio are single-use ad hoc plans: plan-cache bloat, taking memory "
            "from the buffer pool; consider 'optimize for ad hoc workloads' or parameterisation.",
            "bytes",
            [
                Query(m(plan_cache.BYTES.name), "{{cache}}"),
                Query(m(plan_cache.HIT_RATIO.name), "{{cache}} hit ratio"),
            ],
            width=24,
            min=0,
            custom=STACKED,
            overrides=[
                override(
                    ".* hit ratio",
                    *UNSTACKED,
                    ("unit", "percentunit"),
                    ("max", 1),
                    ("custom.axisPlacement", "right"),
                    regex=True,
                )
            ],
            no_value=off(plan_cache),
        ),
        Panel(
            "timeseries",
            "Waits for memory and I/O",
            "Seconds spent waiting per second, per wait type (sys.dm_os_wait_stats, the fixed list in "
            "docs/metrics.md): on average, how many tasks wait at once. Healthy: low and steady. "
            "RESOURCE_SEMAPHORE: queries waiting for workspace memory (grant waits, alerted from "
            f"{num(lim.memory.grant_waits.max_waiting_queries)} at once); PAGEIOLATCH_*: reads of pages "
            "not in the buffer pool; WRITELOG: the log disk; CMEMTHREAD and SOS_VIRTUALMEMORY_LOW: memory "
            "allocation itself; THREADPOOL: no worker threads.",
            "suffix: s/s",
            [Query(f"{rate(wait_stats.SECONDS.name)} > 0", "{{wait_type}}")],
            width=24,
            min=0,
            custom={"axisLabel": "seconds waited per second"},
            links=[lim.runbook(GRANT_WAITS)],
            no_value=off(wait_stats, also="No memory or I/O waits in this range"),
        ),
        Panel(
            "timeseries",
            "Query workspace: granted vs maximum",
            "Workspace memory granted to running queries (sorts, hashes) against the most the memory "
            'manager will grant (Memory Manager "Granted" and "Maximum Workspace Memory"). Healthy: '
            "granted well under maximum. Near it, new queries queue for grants (pending grants, "
            "RESOURCE_SEMAPHORE waits) and may time out.",
            "bytes",
            [
                Query(m(memory_manager.WORKSPACE_GRANTED.name), "granted"),
                Query(m(memory_manager.WORKSPACE_MAXIMUM.name), "maximum"),
            ],
            width=8,
            min=0,
            links=[lim.runbook(GRANTS_PENDING), lim.runbook(GRANT_TIMEOUTS)],
            no_value=off(memory_manager),
        ),
        Panel(
            "timeseries",
            "Compilations per batch",
            "SQL Statistics compilations and re-compilations per batch request. Healthy: a small share on "
            "an OLTP server (plans are reused). Near 1, almost every batch compiles: an ad hoc workload "
            "filling the plan cache (CACHESTORE_SQLCP) at the buffer pool's expense; consider "
            "'optimize for ad hoc workloads' or parameterisation.",
            "percentunit",
            [
                Query(m(lim.rule("compilations_per_batch")), f"compilations ({lim.window} average)"),
                Query(
                    f"{rate(sql_statistics.RECOMPILATIONS.name)}\n"
                    f"/ ({rate(sql_statistics.BATCH_REQUESTS.name)} > 0)",
                    "re-compilations",
                ),
            ],
            width=8,
            min=0,
            no_value=off(sql_statistics, also="No batch requests in this range"),
        ),
        Panel(
            "timeseries",
            "Foreign memory per NUMA node",
            'Memory each node uses from other nodes (Memory Node "Foreign Node Memory (KB)"). Healthy: near '
            "0. Growth means the node ran short of local memory; every access to it pays the cross-node "
            "latency (compare the remote page lookups of the NUMA row).",
            "bytes",
            [Query(m(memory_node.FOREIGN.name), "node {{node}}")],
            width=8,
            min=0,
            no_value=off(memory_node),
        ),
    ]


def memory_row_pressure_from_outside(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Pressure from outside"."""
    signals = {
        "OS low-memory signal": m(os_memory.OS_MEMORY_LOW_SIGNAL.name),
        "process physical memory low": m(os_memory.PROCESS_PHYSICAL_MEMORY_LOW.name),
        "committed target under committed": (
            f"{m(memory_config.COMMITTED_TARGET.name)}\n< bool {m(memory_config.COMMITTED.name)}"
        ),
    }
    return [
        Row("Pressure from outside"),
        Panel(
            "timeseries",
            "The box's memory and who uses it",
            "Physical memory of the box split into what SQL Server's process holds (working set, locked "
            "and large pages), what everything else holds (other processes, the OS, a VM balloon) and "
            "what is available. Healthy: available comfortably above zero and the other processes "
            "steady. Available falling while SQL Server is not growing means something else takes memory.",
            "bytes",
            [
                Query(m(os_memory.PROCESS_PHYSICAL_MEMORY_BYTES.name), "SQL Server"),
                Query(
                    f"clamp_min(\n  {m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name)}\n"
                    f"  - {m(os_memory.OS_AVAILABLE_PHYSICAL_MEMORY_BYTES.name)}\n"
                    f"  - {m(os_memory.PROCESS_PHYSICAL_MEMORY_BYTES.name)},\n  0\n)",
                    "other processes",
                ),
                Query(m(os_memory.OS_AVAILABLE_PHYSICAL_MEMORY_BYTES.name), "available"),
                Query(m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name), "physical memory"),
            ],
            width=8,
            min=0,
            custom=STACKED,
            overrides=[override("physical memory", *UNSTACKED)],
            links=[lim.runbook(EXTERNAL_PRESSURE), lim.runbook(MAX_MEMORY_DEFAULT)],
            no_value=off(os_memory),
        ),
        Panel(
            "timeseries",
            "Signals of pressure from outside",
            "Each signal 1 while on: the OS low-memory signal (sys.dm_os_sys_memory), SQL Server's "
            "process-physical-memory-low flag (sys.dm_os_process_memory), and the memory manager's "
            "committed target under what it has committed (sys.dm_os_sys_info). Healthy: all 0. "
            f"{EXTERNAL_PRESSURE} fires after {lim.memory.external_pressure.for_} with any of them on; "
            f"{MEMORY_PRESSURE}'s description then says the pressure comes from outside.",
            "none",
            [Query(expr, name) for name, expr in signals.items()],
            thresholds=Thresholds.healthy_below(ANY),
            width=8,
            min=0,
            max=1,
            custom={"axisLabel": "on (1), off (0)"},
            links=[lim.runbook(EXTERNAL_PRESSURE)],
            no_value=off(os_memory, memory_config),
        ),
        Panel(
            "timeseries",
            "Target vs max server memory",
            "What SQL Server would like (target), holds (total) and may commit (committed target), against "
            "max server memory when it is set under physical memory (the default, 2147483647 MB, is not "
            "drawn) and the box's physical memory. Healthy: target steady at max server memory (or near "
            f"physical memory). {TARGET_PULLED_DOWN} fires when target falls under "
            f"{pct(lim.memory.target_pulled_down.share)} of its {lim.memory.target_pulled_down.lookback} "
            "maximum or of max server memory.",
            "bytes",
            [
                Query(m(memory_manager.TARGET.name), "target"),
                Query(m(memory_manager.TOTAL.name), "total"),
                Query(m(memory_config.COMMITTED_TARGET.name), "committed target"),
                Query(
                    f"{m(memory_config.MAX_SERVER_MEMORY.name)}\n"
                    f"< {m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name)}",
                    "max server memory",
                ),
                Query(m(os_memory.OS_PHYSICAL_MEMORY_BYTES.name), "physical memory"),
            ],
            width=8,
            min=0,
            links=[lim.runbook(TARGET_PULLED_DOWN)],
            no_value=off(memory_manager, memory_config),
        ),
    ]
