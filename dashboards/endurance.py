"""Dashboard 2, tempdb and SSD endurance (one instance): its top row and its variables; the rows come
from dashboards/tempdb.py, capacity.py, pools.py and drives.py."""

from __future__ import annotations

from mssql_memory_exporter.collectors import endurance as pool_endurance
from mssql_memory_exporter.collectors import tempdb
from mssql_memory_exporter.host import collector as host_collector
from mssql_memory_exporter.host import drive_metrics

from alerts.names import ENDURANCE_BUDGET, ENDURANCE_EXHAUSTION, ENDURANCE_REMAINING

from .capacity import endurance_row_capacity, memory_change_annotation
from .drives import endurance_row_drives
from .empty import waits
from .frame import ENDURANCE_UID, TAGS, alert_annotations, failover_annotation, header_links, variables
from .grafana import Dashboard, Panel, Query, Row, query_variable
from .limits import Limits, pct
from .pools import (
    POOL,
    RETIRED_FIRST,
    endurance_row_ssd_pools,
    enough_data,
    enough_instance_data,
    no_pool_yet,
    share_ranges,
    shown_after,
    worn_apart,
    worn_pools,
    worn_ranges,
    worn_share_ranges,
    worn_text,
)
from .queries import NO_HOST, m
from .tempdb import endurance_row_latency, endurance_row_tempdb, endurance_row_tempdb_space

INSTANCE_LABELS = "job, instance"


def endurance_row_now(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "Now"."""
    share_thresholds = share_ranges(lim)
    remaining, share = m(lim.rule("remaining"), POOL), m(lim.rule("share"), POOL)
    # Per instance: the pools that wear out in service, and every pool.
    worn = f"min without (pool, source) (\n{worn_pools(lim)}\n)"
    highest = f"max without (pool, source) ({enough_data(lim, share)})"
    shares, share_overrides = worn_apart(
        Query(f"{highest}\nand on (job, instance) (\n{worn}\n)", instant=True),
        Query(f"{highest}\nunless on (job, instance) (\n{worn}\n)", instant=True),
        worn_share_ranges(lim),
    )
    shortest = f"min without (pool, source) ({enough_data(lim, remaining)})"
    times, time_overrides = worn_apart(
        Query(worn, instant=True),
        Query(f"{shortest}\nunless on (job, instance) (\n{worn}\n)", instant=True),
        worn_ranges(lim),
    )
    short_w = lim.tempdb_short_window
    share_text = (
        f"Healthy: under {pct(lim.endurance.budget_high_share)} of the rating (orange from there; the budget "
        "alert), "
        f"and never past {pct(lim.endurance.exhaustion_share)} (red: the drives wear out before the planned "
        "life ends)."
    )
    return [
        Row("Now"),
        Panel(
            "stat",
            f"tempdb writes ({short_w})",
            f"Bytes per second written to all tempdb files of this instance, averaged over {short_w}. No "
            "desired range of its own: it is the wear tempdb puts on its drives; see the pools below.",
            "Bps",
            [Query(m(lim.rule("tempdb_short")), instant=True)],
            width=6,
            height=4,
            no_value=waits(short_w, tempdb),
        ),
        Panel(
            "stat",
            f"tempdb writes ({lim.tempdb_long_window} average)",
            f"tempdb write rate averaged over {lim.tempdb_long_window}: the steady figure to compare with "
            "the drives' rating (no desired range of its own; the pools below weigh it). Adding memory can "
            "raise it rather than lower it (Micron measured exactly that).",
            "Bps",
            # The same minimum of data as the pools' projections: a few minutes of a young Prometheus read
            # 13 % high in the demo (increase() extrapolates over the first scrape interval).
            [Query(enough_instance_data(lim, m(lim.rule("tempdb_long"))), instant=True)],
            width=6,
            height=4,
            no_value=shown_after(lim),
        ),
        Panel(
            "stat",
            "Highest projected share",
            f"The worst pool's projected share of its rated endurance over its planned life, at the "
            f"{lim.pool_long_window} write rate. {share_text} Never green while a pool wears out in service "
            "(the time left beside says which): the bytes already written can use a rating up before "
            "retirement even where the rate alone would not.",
            "percentunit",
            shares,
            width=6,
            height=4,
            no_value=no_pool_yet(lim),
            thresholds=share_thresholds,
            overrides=share_overrides,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
        ),
        Panel(
            "stat",
            "Time until a rating is used up",
            f"At the {lim.pool_long_window} rate, given the bytes written so far: the soonest of the pools "
            "that wear out in service, when any does; otherwise the shortest of all. "
            f"{worn_text(lim)} Healthy: green.",
            "s",
            times,
            width=6,
            height=4,
            no_value=no_pool_yet(lim),
            thresholds=RETIRED_FIRST,
            overrides=time_overrides,
            links=[lim.runbook(ENDURANCE_REMAINING)],
        ),
    ]


def endurance_dashboard(lim: Limits) -> Dashboard:
    items: list[Panel | Row] = [
        *endurance_row_now(lim),
        *endurance_row_tempdb(lim),
        *endurance_row_tempdb_space(lim),
        *endurance_row_latency(lim),
        *endurance_row_capacity(lim),
        *endurance_row_ssd_pools(lim),
        *endurance_row_drives(lim),
    ]
    pool_variable = query_variable(
        "pool",
        "SSD pool",
        f'label_values({pool_endurance.RATED_ENDURANCE.name}{{job=~"$job", instance=~"$instance"}}, pool)',
        "SSD pools of this instance (ssd_pools in the exporter's config).",
        multi=True,
        all_value=".+",
    )
    # No metric says which exporter runs on the chosen instance's host, so nothing ties the two: the
    # variable offers every exporter with host metrics (one per host is the usual layout, and then it is
    # the right one) and falls back to NO_HOST only where there is none. An unconditional fallback was
    # always offered, sorted first and so always chosen: the host panel opened empty.
    # Host disk counters (--collector.host) or drive readings (drive_health, or smartctl_exporter through
    # the optional rules): either makes the source worth offering.
    sel = lim.spec.exporter_selector
    host_metric = f"({host_collector.DISK_WRITTEN}{{{sel}}} or {drive_metrics.SMART_PASSED}{{{sel}}})"
    host_variable = query_variable(
        "host",
        "Host (exporter)",
        # One line: Grafana 9.3 recognises query_result(...) only on a single line; a multi-line one
        # went to the series API (HTTP 400, a red toast on every load, the variable empty).
        f"query_result(count by (instance) ({host_metric})"
        f' or (label_replace(vector(1), "instance", "{NO_HOST}", "", "") unless on () count({host_metric})))',
        "The exporter (its /metrics scrape) that runs with --collector.host or reads drives on this SQL "
        "Server's host. Not tied to the chosen instance (no metric links them): with several, pick the "
        f"exporter on this instance's host; {NO_HOST} when no exporter reports host or drive metrics.",
        regex='/instance="([^"]+)"/',
    )
    return Dashboard(
        uid=ENDURANCE_UID,
        title="SQL Server tempdb and SSD endurance",
        description="One SQL Server instance: tempdb writes per file and volume, host disk writes, and per "
        "SSD pool the write rate, the projected share of rated endurance and the time left.",
        tags=[*TAGS, "endurance"],
        items=items,
        variables=variables(lim, multi=False, extra=[pool_variable, host_variable], pools_first=True),
        annotations=[*alert_annotations(), memory_change_annotation(lim), failover_annotation(lim)],
        links=header_links(lim, ENDURANCE_UID),
        time_from="now-7d",
    )
