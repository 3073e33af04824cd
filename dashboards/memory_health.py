"""The memory dashboard's SQL Server 2025 memory health panels, beside the Dell Table 4 counters: SQL Server's
own verdict (sys.dm_os_memory_health_history) next to the counters this bundle judges by Dell's ranges.

Colours come from the levels themselves (value mappings and fixed series colours), not from thresholds:
LOW, MEDIUM and HIGH are Microsoft's levels, not limits a site tunes; the alerts' own limits are named in
the descriptions."""

from __future__ import annotations

from mssql_memory_exporter.collectors import memory_health

from alerts.names import MEMORY_HEALTH_DEGRADED, MEMORY_HEALTH_HIGH

from .grafana import GREEN, ORANGE, RED, Panel, Query, override, value_map
from .limits import Limits, pct
from .queries import m, rate

# Why the panels are empty where they are: the view's platforms, or the collector turned off. Short: the
# stat is narrow, and Grafana shrinks a long text there until it cannot be read.
NO_VIEW = (
    "Only on SQL Server 2025, Azure SQL Database, Managed Instance with the 2025 policy, or collector "
    f"{memory_health.COLLECTOR.name} off"
)
# The stat's own: Grafana sizes a stat's text to fit its box, so the long one above would be unreadable.
NO_VIEW_SHORT = f"2025 only, or collector {memory_health.COLLECTOR.name} off"
# The counter's `level` label values, severity 1 to 3, in the colours a DBA reads them by.
LEVEL_COLOURS = {"low": GREEN, "medium": ORANGE, "high": RED}


def memory_health_panels(lim: Limits) -> list[Panel]:
    health = lim.spec.memory.health
    alerts = (
        f"HIGH for {health.high_for} pages; MEDIUM or worse for {pct(health.degraded_share)} of "
        f"{health.degraded_window} warns."
    )
    return [
        Panel(
            "stat",
            "SQL Server memory health (2025)",
            "SQL Server's own verdict on its memory, from its newest memory health snapshot (one about every "
            "15 s): LOW, no issue; MEDIUM, allocations may fail and the data cache may shrink; HIGH, memory "
            "likely insufficient and disk reads rising. Healthy: LOW. It judges by its own view of "
            f"allocations and caches, so read it beside the Dell counters, which may disagree. {alerts}",
            "none",
            [Query(m(memory_health.SEVERITY.name), instant=True)],
            width=8,
            mappings=value_map({1: ("LOW", GREEN), 2: ("MEDIUM", ORANGE), 3: ("HIGH", RED)}),
            links=[lim.runbook(MEMORY_HEALTH_HIGH), lim.runbook(MEMORY_HEALTH_DEGRADED)],
            no_value=NO_VIEW_SHORT,
        ),
        Panel(
            "timeseries",
            "Share of time at each memory health level",
            "Of each moment's wall-clock time, the share SQL Server's memory health snapshots spent at LOW, "
            "MEDIUM and HIGH (stacked; the exporter counts the snapshots, which the view itself keeps for "
            f"only about an hour). Healthy: all LOW. {alerts}",
            "percentunit",
            [
                Query(rate(memory_health.SECONDS.name, f'level="{level}"'), level.upper())
                for level in LEVEL_COLOURS
            ],
            width=16,
            min=0,
            max=1,
            custom={"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 60},
            overrides=[
                override(level.upper(), ("color", {"mode": "fixed", "fixedColor": colour}))
                for level, colour in LEVEL_COLOURS.items()
            ],
            links=[lim.runbook(MEMORY_HEALTH_DEGRADED)],
            no_value=NO_VIEW,
        ),
    ]
