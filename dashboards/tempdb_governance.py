"""The tempdb space row's panels for SQL Server 2025's tempdb space resource governance: each workload
group's use against its limit, and the requests its limit stopped (alerts/tempdb_governance.py)."""

from __future__ import annotations

from mssql_memory_exporter.collectors import tempdb_governance as gov

from alerts import names as names_

from .grafana import GREEN, ORANGE, RED, Panel, Query, Step, Thresholds, override_query
from .limits import Limits, pct
from .queries import m

# Why a governance panel can be empty, said in each one's own words.
ONLY_2025 = f"SQL Server 2025 with tempdb governance and collector {gov.COLLECTOR.name} on only"
# A group's space divided by its own limit: at 100 % its next request that needs more fails (error 1138).
AT_LIMIT = 1.0


def governance_panels(lim: Limits) -> list[Panel]:
    t = lim.spec.tempdb
    share = t.workload_group_near_limit_share
    return [
        Panel(
            "timeseries",
            "tempdb per workload group",
            "tempdb data-file space each resource governor workload group holds "
            "(sys.dm_resource_governor_workload_groups), against its limit where one is in effect (dashed: "
            "GROUP_MAX_TEMPDB_DATA_MB, or GROUP_MAX_TEMPDB_DATA_PERCENT of tempdb's maximum size when the "
            "data files are all capped or all pregrown). Healthy: every group well under its own limit. A "
            "group at its limit has its next request fail with error 1138; tempdb and the other groups keep "
            "their room. The version stores and tempdb's log are not governed.",
            "bytes",
            [
                Query(m(gov.SPACE_BYTES.name), "{{workload_group}}"),
                Query(m(gov.LIMIT_BYTES.name), "{{workload_group}} limit"),
            ],
            width=12,
            height=8,
            min=0,
            # The limits by query (refId B): a group's own legend could end in " limit" too.
            overrides=[
                override_query(
                    "B",
                    ("custom.lineStyle", {"fill": "dash", "dash": [10, 10]}),
                    ("custom.fillOpacity", 0),
                )
            ],
            no_value=f"No workload group figures: {ONLY_2025} (the view's tempdb columns arrive in 17.x)",
            links=[lim.runbook(names_.TEMPDB_GROUP_NEAR_LIMIT)],
        ),
        Panel(
            "bargauge",
            "Share of tempdb limit used",
            "Each governed workload group's tempdb space as a share of its limit. Healthy: under "
            f"{pct(share)} (orange from there, the alert after {t.workload_group_near_limit_for}; red at the "
            "limit itself, where requests fail with error 1138). Groups without a limit in effect are not "
            "listed.",
            "percentunit",
            [Query(m(names_.TEMPDB_GROUP_LIMIT_USED), "{{workload_group}}", instant=True)],
            width=6,
            height=8,
            min=0,
            max=1,
            thresholds=Thresholds((Step(GREEN, None), Step(ORANGE, share), Step(RED, AT_LIMIT))),
            # A bar gauge draws its text as one bar's name, cut at the panel's width: kept short.
            no_value=f"No limit in effect, or {gov.COLLECTOR.name} off",
            links=[lim.runbook(names_.TEMPDB_GROUP_NEAR_LIMIT)],
        ),
        Panel(
            "timeseries",
            "Requests stopped by tempdb limits",
            "Requests each workload group had aborted with error 1138 for going over its tempdb limit, per "
            "interval (total_tempdb_data_limit_violation_count; a RESET STATISTICS is a counter reset, not "
            "a violation). Healthy: none. Any warns, never pages: the limit kept tempdb's room for the "
            "other groups.",
            "none",
            [Query(f"increase({m(gov.VIOLATIONS.name)}[$__rate_interval])", "{{workload_group}}")],
            width=6,
            height=8,
            min=0,
            custom={"drawStyle": "bars", "fillOpacity": 60, "axisLabel": "requests aborted"},
            no_value=f"Nothing counted: {ONLY_2025}",
            links=[lim.runbook(names_.TEMPDB_GROUP_LIMIT_HIT)],
        ),
    ]
