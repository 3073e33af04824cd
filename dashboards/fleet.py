"""Dashboard 3, the fleet capacity review: every instance in one sortable table, every SSD pool, and
the trends under them."""

from __future__ import annotations

from mssql_memory_exporter.collectors import buffer_manager, buffer_node, server_properties
from mssql_memory_exporter.collectors.server_properties import BUILD_INFO
from mssql_memory_exporter.scrape import scrape_metrics

from alerts.names import ENDURANCE_BUDGET, ENDURANCE_EXHAUSTION, LAZY_WRITES, MEMORY_PRESSURE, PLE_LOW
from alerts.spec import number as num

from .empty import off, waits
from .frame import FLEET_UID, TAGS, alert_annotations, header_links, instance_links, variables
from .grafana import (
    GREEN,
    HIDDEN_COLUMN,
    RED,
    Dashboard,
    Panel,
    Query,
    Row,
    Thresholds,
    cell_colour,
    merge_and_organize,
    override,
    value_map,
)
from .limits import Limits, duration, pct, ple_floor_text
from .panels import ANY, AT_FLOOR, GAUGE_HEADROOM, UNIT_PAGES, UNIT_STALLS
from .pools import enough_data, enough_instance_data, no_pool_yet, pool_table, share_ranges, shown_after
from .queries import instance, m

FLEET_POOLS_TITLE = "SSD pools of every instance"

EDITION_COLUMN_PX = 200
# SERVERPROPERTY('Edition') without the words every value repeats: "Enterprise Edition: Core-based
# Licensing (64-bit)" is "Enterprise core-based", "Standard Edition (64-bit)" is "Standard".
SHORT_EDITIONS = [  # Grafana anchors a pattern without slashes at both ends
    {
        "type": "regex",
        "options": {"pattern": "(.*) Edition: Core-based Licensing.*", "result": {"text": "$1 core-based"}},
    },
    {"type": "regex", "options": {"pattern": r"(.*) Edition\b.*", "result": {"text": "$1"}}},
]


def fleet_ple_ratio(lim: Limits) -> str:
    """Each instance's worst NUMA node's PLE over that node's floor."""
    return (
        f"min by (job, instance) (\n  {m(buffer_node.PLE.name)}\n"
        f"  / on (job, instance, node) {m(lim.rule('ple_floor'))}\n)"
    )


# (header, expr, unit, thresholds colouring the cell or None)
FleetColumn = tuple[str, str, str, Thresholds | None]


def fleet_columns(lim: Limits) -> list[FleetColumn]:
    """The instances table's columns, one query each."""
    w = lim.window
    by = "max by (job, instance)"
    pressure = (
        f'count_over_time(\n  (max by (job, instance) (ALERTS{{alertname="{MEMORY_PRESSURE}", '
        f'alertstate="firing", {instance()}}}))[$__range:$__interval]\n)\n* $__interval_ms / 60000\n'
        f"or on (job, instance) 0 * {by} ({m(scrape_metrics.UP.name)})"
    )
    oltp_targets = m(server_properties.TARGET_INFO.name, 'workload="oltp"')
    return [
        ("Up", f"{by} ({m(scrape_metrics.UP.name)})", "bool_yes_no", None),
        (
            "Build",
            f"max by (job, instance, version, edition, update_level) ({m(BUILD_INFO.name)})",
            "none",
            None,
        ),
        ("Worst node PLE", f"{by} ({m(lim.rule('ple_min'))})", "s", None),
        ("PLE ÷ floor", fleet_ple_ratio(lim), "percentunit", Thresholds.healthy_above(AT_FLOOR)),
        ("Under pressure", pressure, "m", Thresholds.healthy_below(ANY)),
        (
            f"Lazy writes ({w})",
            f"{by} ({m(lim.rule('lazy'))})",
            UNIT_PAGES,
            Thresholds.healthy_below(lim.memory.lazy_writes_per_second.max),
        ),
        (
            f"Stalls ({w})",
            f"{by} ({m(lim.rule('stalls'))})",
            UNIT_STALLS,
            Thresholds.healthy_below(lim.memory.free_list_stalls_per_second.max),
        ),
        (
            f"Lookups ({w})",
            # Dell's range and the alert are for OLTP targets: an analytic target's cell stays empty.
            f"{by} (\n  {m(lim.rule('lookups_ratio'))}\n  and on (job, instance) {oltp_targets}\n)",
            "suffix: /batch",  # "lookups/batch" in header and cell did not fit an 80 px column
            Thresholds.healthy_below(lim.memory.page_lookups_per_batch_request.max),
        ),
        (
            f"tempdb ({lim.tempdb_long_window})",
            f"{by} (\n  {enough_instance_data(lim, m(lim.rule('tempdb_long')))}\n)",
            "Bps",
            None,
        ),
        (
            "Worst pool share",
            f"{by} (\n  {enough_data(lim, m(lim.rule('share')), '')}\n)",
            "percentunit",
            share_ranges(lim),
        ),
        ("Uptime", f"{by} ({m(lim.rule('uptime'))})", "s", None),
    ]


def fleet_instances_table(lim: Limits) -> Panel:
    """One sortable row per instance: the fleet's front page."""
    w = lim.window
    columns = fleet_columns(lim)
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _, _, _) in enumerate(columns)}
    build_value = next(ref for ref, name in renames.items() if name == "Build")
    del renames[build_value]
    order = ["instance", "job", "version", "edition", "update_level"]
    order += [name for name, _, _, _ in columns if name != "Build"]
    overrides = []
    for name, _, unit, thresholds in columns:
        if name == "Build":
            continue
        props: list[tuple[str, object]] = [("unit", unit)]
        if thresholds is not None:
            props += [("thresholds", thresholds.json()), cell_colour(background=True)]
        overrides.append(override(name, *props))
    overrides.append(override("Up", ("mappings", value_map({0: ("down", RED), 1: ("up", GREEN)}))))
    # "Standard Edition (64-bit)" and "Enterprise Edition: Core-based Licensing (64-bit)": 12.4 clipped them.
    # Shown as "Standard", "Enterprise core-based", in a column of its own width: a minimum on top of the
    # equal share 12.4 gives every other column pushed "Uptime" past the right edge.
    overrides.append(override("edition", ("custom.width", EDITION_COLUMN_PX), ("mappings", SHORT_EDITIONS)))
    overrides.append(instance_links())
    overrides.append(override("job", HIDDEN_COLUMN))  # the links use it; one job is usual
    return Panel(
        "table",
        "Instances",
        "One row per SQL Server instance; click a column to sort, an instance to open its dashboards. "
        "PLE ÷ floor: the worst node's PLE over its floor, healthy at 100% or more "
        f"(floor: {ple_floor_text(lim)}). Under "
        f"pressure: minutes in the selected range that {MEMORY_PRESSURE} was firing; healthy 0. Lazy writes "
        f"under {num(lim.memory.lazy_writes_per_second.max)}/s, free list stalls under "
        f"{num(lim.memory.free_list_stalls_per_second.max)}/s and lookups per batch "
        f"under {num(lim.memory.page_lookups_per_batch_request.max)} (Dell Table 4, {w} averages; lookups of "
        "OLTP targets only, as the "
        "alert: an OLAP target's cell is empty). tempdb: writes to tempdb, "
        f"{lim.tempdb_long_window} average, shown (as every long-window figure) once it rests on "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of data. Worst pool share: the "
        "projected share of rated endurance "
        f"of the instance's worst SSD pool; healthy under {pct(lim.endurance.budget_high_share)}, red from "
        f"{pct(lim.endurance.exhaustion_share)}, once its rate rests on "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of "
        f"data. Which pool that is: the next table, {FLEET_POOLS_TITLE!r}, lists "
        "every pool by instance, worst share first. Build and edition from SERVERPROPERTY.",
        "short",
        [Query(expr, instant=True, table=True) for _, expr, _, _ in columns],
        width=24,
        height=8,  # the header and six instances; at 10, a few instances left half of it empty in 12.4
        overrides=overrides,
        transformations=merge_and_organize(renames, order, ("Time", "__name__", build_value)),
        options={"sortBy": [{"desc": False, "displayName": "PLE ÷ floor"}]},
        links=[lim.runbook(MEMORY_PRESSURE)],
        no_value="No SQL Server instance scraped by the selected jobs",
    )


def fleet_trends(lim: Limits) -> list[Panel | Row]:
    """Under the tables: each instance's PLE, lazy writes and tempdb writes over time, and every pool."""
    w = lim.window
    share_thresholds = share_ranges(lim)
    return [
        Panel(
            "timeseries",
            "Lowest node PLE ÷ floor, per instance",
            "For each instance, its worst NUMA node's page life expectancy divided by that node's floor "
            f"({ple_floor_text(lim)}). Healthy: above 100% (the red area is under it). Instances that dip "
            "under it regularly need memory, or fewer scans.",
            "percentunit",
            [Query(fleet_ple_ratio(lim), "{{instance}}")],
            thresholds=Thresholds.healthy_above(AT_FLOOR),
            min=0,
            links=[lim.runbook(PLE_LOW)],
            no_value=off(buffer_node),
        ),
        Panel(
            "timeseries",
            f"Lazy writes per instance ({w})",
            f"Pages per second flushed by each instance's lazy writer, {w} averages. Desired range (Dell "
            f"Table 4): under {num(lim.memory.lazy_writes_per_second.max)}/s, the red area above it.",
            UNIT_PAGES,
            [Query(m(lim.rule("lazy")), "{{instance}}")],
            thresholds=Thresholds.healthy_below(lim.memory.lazy_writes_per_second.max),
            min=0,
            links=[lim.runbook(LAZY_WRITES)],
            no_value=waits(w, buffer_manager),
        ),
        Panel(
            "timeseries",
            f"tempdb writes per instance ({lim.tempdb_long_window} average)",
            f"Bytes per second written to tempdb by each instance, averaged over {lim.tempdb_long_window}: "
            "the steady wear each puts on its tempdb drives. No desired range of its own; compare with the "
            "pools' ratings.",
            "Bps",
            [Query(enough_instance_data(lim, m(lim.rule("tempdb_long"))), "{{instance}}")],
            min=0,
            no_value=shown_after(lim),
        ),
        Panel(
            "bargauge",
            "Projected share of rated endurance, per pool",
            f"Every SSD pool of the fleet: {lim.pool_long_window} write rate x planned life ÷ rated "
            f"endurance. Healthy: under {pct(lim.endurance.budget_high_share)}; red from "
            f"{pct(lim.endurance.exhaustion_share)}, where "
            "the drives wear out before the planned life ends.",
            "percentunit",
            [
                Query(
                    # No pool variable on the fleet: every pool.
                    enough_data(lim, m(lim.rule("share")), pool=""),
                    "{{instance}} {{pool}} ({{source}})",
                    instant=True,
                )
            ],
            thresholds=share_thresholds,
            min=0,
            max=lim.endurance.exhaustion_share * GAUGE_HEADROOM,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
            no_value=no_pool_yet(lim),
        ),
    ]


def fleet_dashboard(lim: Limits) -> Dashboard:
    items: list[Panel | Row] = [
        fleet_instances_table(lim),
        pool_table(lim, FLEET_POOLS_TITLE, per_instance=True),
        *fleet_trends(lim),
    ]
    return Dashboard(
        uid=FLEET_UID,
        title="SQL Server fleet capacity review",
        description="Every SQL Server instance in one sortable table: worst node PLE, time under memory "
        "pressure, Dell Table 4 churn rates, tempdb writes, SSD endurance, build and edition.",
        tags=[*TAGS, "capacity"],
        items=items,
        variables=variables(lim, multi=True),
        annotations=alert_annotations(),
        links=header_links(lim, FLEET_UID),
        time_from="now-7d",
    )
