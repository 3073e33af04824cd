"""SSD pools and their endurance projections (the endurance alerts of alerts/generate.py): the pool
row of the endurance dashboard and the per-pool table the fleet shows too."""

from __future__ import annotations

from mssql_memory_exporter.collectors import endurance as pool_endurance
from mssql_memory_exporter.collectors import ssd_pools

from alerts.names import ENDURANCE_BUDGET, ENDURANCE_EXHAUSTION, ENDURANCE_REMAINING
from alerts.rule_parts import life_left
from alerts.spec import number as num

from .empty import off
from .frame import instance_links
from .grafana import (
    GREEN,
    HIDDEN_COLUMN,
    ORANGE,
    RED,
    TEXT,
    Json,
    Panel,
    Query,
    Row,
    Step,
    Thresholds,
    cell_colour,
    merge_and_organize,
    override,
    override_query,
)
from .limits import Limits, duration, pct
from .panels import GAUGE_HEADROOM
from .queries import m

POOL = 'pool=~"$pool"'

NO_POOLS = "No SSD pools (ssd_pools in the exporter's config)"

NO_POOLS_ANYWHERE = "No SSD pools on the selected instances (ssd_pools in the exporter's config)"

POOL_LABELS = "job, instance, pool, source"


def enough_data(lim: Limits, expr: str, pool: str = POOL) -> str:
    """`expr` only where its rate rests on endurance.projection_min_coverage of data: a projection from a
    few minutes of a young Prometheus is noise, and must never read as a healthy green."""
    return (
        f"{expr}\nand on ({POOL_LABELS}) {m(lim.rule('pool_long_coverage'), pool)}"
        f" >= {num(lim.endurance.projection_min_coverage_seconds)}"
    )


def enough_instance_data(lim: Limits, expr: str) -> str:
    """An instance's long-window figure (tempdb's or the buffer pool's day average) under the same rule
    as the pools' `enough_data`: shown where the instance's data covers endurance.projection_min_coverage.
    Drawn from the first minutes, a day's average of a young Prometheus spiked and decayed while the stat
    beside it waited."""
    return (
        f"{expr}\nand on (job, instance) {m(lim.rule('tempdb_long_coverage'))}"
        f" >= {num(lim.endurance.projection_min_coverage_seconds)}"
    )


def shown_after(lim: Limits) -> str:
    """What a long-window figure says while its data is too young (its panel's no-data text)."""
    return f"Shown after {duration(lim.endurance.projection_min_coverage_seconds)} of data"


def no_pool_yet(lim: Limits) -> str:
    """No-data text of a pool projection: no pool has the coverage yet, or the collector is off."""
    return off(
        ssd_pools, also=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet"
    )


def young_pools(lim: Limits) -> str:
    """No-data text of a pool figure that waits for the coverage: young pools, or none configured."""
    return (
        f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet "
        "(pools: ssd_pools in the exporter's config)"
    )


def coverage_thresholds(lim: Limits) -> Thresholds:
    # Orange, not red: a young pool is not a fault, only too new to project.
    return Thresholds((Step(ORANGE, None), Step(GREEN, lim.endurance.projection_min_coverage_seconds)))


def share_ranges(lim: Limits) -> Thresholds:
    """A pool's projected share of its rating: orange from the budget, red from exhaustion."""
    return Thresholds.healthy_below(lim.endurance.exhaustion_share, warn=lim.endurance.budget_high_share)


# --- wearing out in service: the one verdict behind every time-left and share figure -----------------
# A time left is not good news on its own: 1.8 years is plenty for a pool retired next year and a problem
# for one planned to serve four more. The time-left figures are therefore judged against the planned life
# that remains, and the share figures beside them by the same verdict, so the two never disagree.


def worn_in_service(lim: Limits, remaining: str, share: str, labels: str, pool: str = POOL) -> str:
    """The series of `remaining` (seconds until a pool's rating is used up) whose pool wears out while it
    is still in service: the rating is used up before the planned retirement; or, once the pool is kept
    past it, within endurance.remaining_warning (the remaining alert's own rule); or its projected `share`
    (matched on `labels`) reaches the rating (the exhaustion alert's). The other pools are retired first,
    or kept past retirement with time to spare."""
    left = life_left(lambda name: m(name, pool))  # the remaining alert's own expression
    e = lim.endurance
    return (
        f"(\n  (\n    {remaining}\n    < on (job, instance, pool) group_left () {left}\n  )\n"
        f"  or (\n    {remaining} < {num(e.remaining_warning_seconds)}\n"
        f"    and on (job, instance, pool) {left} <= 0\n  )\n"
        f"  or (\n    {remaining}\n    and on ({labels}) {share} >= {num(e.exhaustion_share)}\n  )\n)"
    )


def worn_pools(lim: Limits) -> str:
    """The chosen pools' time left (per pool and source, with enough data) where they wear out in service."""
    remaining, share = m(lim.rule("remaining"), POOL), m(lim.rule("share"), POOL)
    return enough_data(lim, f"(\n{worn_in_service(lim, remaining, share, POOL_LABELS)}\n)")


def worn_ranges(lim: Limits) -> Thresholds:
    """Time left of a pool that wears out in service: red under the critical, orange above it; never
    green, however long, since the drives must be replaced before they were planned to be."""
    return Thresholds((Step(RED, None), Step(ORANGE, lim.endurance.remaining_critical_seconds)))


def worn_share_ranges(lim: Limits) -> Thresholds:
    """The share of a pool that wears out in service: red from the rating, orange under it; never green,
    since the bytes already written use the rating up before retirement even where the rate alone would
    not."""
    return Thresholds((Step(ORANGE, None), Step(RED, lim.endurance.exhaustion_share)))


# Time left of a pool retired before its rating is used up (or kept past retirement with time to spare):
# healthy however short, as the remaining alert stays silent for it.
RETIRED_FIRST = Thresholds((Step(GREEN, None),))


def soon_ranges(lim: Limits) -> Thresholds:
    """Time left where the retirement is not beside it (a table cell): red and orange when soon, and no
    verdict beyond the warning, where only the planned life that remains can tell good from bad."""
    e = lim.endurance
    return Thresholds(
        (Step(RED, None), Step(ORANGE, e.remaining_critical_seconds), Step(TEXT, e.remaining_warning_seconds))
    )


def worn_text(lim: Limits) -> str:
    """How the time-left and share figures are judged, for their descriptions."""
    e = lim.endurance
    return (
        "Judged against the planned life that remains (in service date + planned life - now): a pool "
        "whose rating is used up before its planned retirement, or whose projected share reaches "
        f"{pct(e.exhaustion_share)}, or that is kept past its retirement with under "
        f"{duration(e.remaining_warning_seconds)} left, wears out in service and is never green "
        f"(orange; red under {duration(e.remaining_critical_seconds)} left or from "
        f"{pct(e.exhaustion_share)} of the rating). A pool retired before its rating is used up is green "
        "however little time is left, as the remaining alert stays silent for it."
    )


def worn_apart(worn: Query, rest: Query, worn_thresholds: Thresholds) -> tuple[list[Query], list[Json]]:
    """A panel's two queries, A the pools that wear out in service and B the rest, with A's own
    thresholds (the panel's thresholds judge B)."""
    return [worn, rest], [override_query("A", ("thresholds", worn_thresholds.json()))]


def pool_table(lim: Limits, title: str, per_instance: bool) -> Panel:
    """Micron's Table 4 per pool: write rate, projected bytes over the planned life, rated bytes, share.
    Per instance (the fleet) it lists every pool of the selected instances; otherwise the chosen pools."""
    pool = "" if per_instance else POOL
    long_rate = m(lim.rule("pool_long"), pool)
    coverage = m(lim.rule("pool_long_coverage"), pool)

    def per_source(config_metric: str, factor: str = "") -> str:
        # A pool's configured figure on each of its sources' rows: the rate's labels, the config's value.
        return (
            f"max by ({POOL_LABELS}) (\n  {long_rate} * 0\n"
            f"  + on (job, instance, pool) group_left () {m(config_metric, pool)}{factor}\n)"
        )

    columns = [
        ("Write rate", f"max by ({POOL_LABELS}) ({enough_data(lim, long_rate, pool)})", "Bps"),
        ("Planned life", per_source(pool_endurance.PLANNED_LIFETIME.name), "s"),
        (
            "Projected writes",  # over the planned life: the full header was cut at 1,600 px
            f"max by ({POOL_LABELS}) (\n  {long_rate}\n"
            "  * on (job, instance, pool) group_left () "
            f"{m(pool_endurance.PLANNED_LIFETIME.name, pool)}\n"
            f"  and on ({POOL_LABELS}) {coverage} >= {num(lim.endurance.projection_min_coverage_seconds)}\n)",
            "decbytes",
        ),
        ("Rated endurance", per_source(pool_endurance.RATED_ENDURANCE.name), "decbytes"),
        (
            "Share of rating",
            f"max by ({POOL_LABELS}) ({enough_data(lim, m(lim.rule('share'), pool), pool)})",
            "percentunit",
        ),
        (
            "Rating used up in",
            f"max by ({POOL_LABELS}) ({enough_data(lim, m(lim.rule('remaining'), pool), pool)})",
            "s",
        ),
        ("Rate rests on", f"max by ({POOL_LABELS}) ({coverage})", "s"),
        # What the pool's drives say (drive_health): per pool, shown on each of its sources' rows.
        ("Drives imply", per_source(lim.rule("drive_implied")), "decbytes"),
        ("Drives at 100% in", per_source(lim.rule("drive_remaining")), "s"),
        (
            "In service since",
            per_source(pool_endurance.IN_SERVICE.name, " * 1000"),
            "time:YYYY-MM-DD",  # a calendar day, as configured: no 00:00:00
        ),
    ]
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _, _) in enumerate(columns)}
    labels = ["instance", "job", "pool", "source"] if per_instance else ["pool", "source"]
    hidden = ("Time", "__name__") if per_instance else ("Time", "__name__", "job", "instance")
    overrides = [override(name, ("unit", unit)) for name, _, unit in columns]
    overrides.append(
        override(
            "Share of rating",
            ("thresholds", share_ranges(lim).json()),
            cell_colour(background=True),
        )
    )
    overrides.append(
        override(
            "Rating used up in",
            ("thresholds", soon_ranges(lim).json()),
            cell_colour(background=False),
        )
    )
    overrides.append(
        override(
            "Rate rests on",
            ("thresholds", coverage_thresholds(lim).json()),
            cell_colour(background=False),
        )
    )
    if per_instance:
        overrides.append(instance_links())
        overrides.append(override("job", HIDDEN_COLUMN))  # kept for the links, not shown
    description = (
        "Micron's Table 4, per pool and source, in decimal units (1 TB = 10^12 B): the "
        f"{lim.pool_long_window} write rate, the bytes it projects over the pool's planned life (rate x "
        "planned life), the rated endurance (drives x TBW, or DWPD x capacity x 365 x warranty years) and "
        "their ratio. Healthy share: "
        f"under {pct(lim.endurance.budget_high_share)} (orange from there, red from "
        f"{pct(lim.endurance.exhaustion_share)}: the drives "
        'wear out before the planned life ends). "Rating used up in" counts the bytes written so far as '
        "the drives' known reading (when configured) plus what the exporter counted plus the "
        f"{lim.pool_long_window} rate over the time nobody counted; red under "
        f"{duration(lim.endurance.remaining_critical_seconds)}, orange under "
        f"{duration(lim.endurance.remaining_warning_seconds)}, and no colour beyond: a cell cannot weigh it "
        "against the planned life that remains (the time-left stats of the endurance dashboard do). Host "
        "writes are not NAND writes: where the "
        "exporter reads the drives (drive_health), 'Drives imply' is the endurance their own wear implies "
        "(host bytes ÷ life used) and 'Drives at 100% in' when they will say they are worn out, at the "
        f"{lim.pool_long_window} rate of their own counters; empty without drive health. The write rate "
        "and the figures from it stay empty until the rate rests on "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of data ('Rate rests on')."
    )
    return Panel(
        "table",
        title,
        description,
        "decbytes",
        [Query(expr, instant=True, table=True) for _, expr, _ in columns],
        width=24,
        height=8,
        overrides=overrides,
        transformations=merge_and_organize(renames, labels + [name for name, _, _ in columns], hidden),
        links=[lim.runbook(ENDURANCE_EXHAUSTION), lim.runbook(ENDURANCE_REMAINING)],
        options={"sortBy": [{"desc": True, "displayName": "Share of rating"}]},
        # Rows show from the first scrape (planned life, rating): empty only without pools.
        no_value=NO_POOLS_ANYWHERE if per_instance else NO_POOLS,
    )


def endurance_row_ssd_pools(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "SSD pools"."""
    share_thresholds = share_ranges(lim)
    share_text = (
        f"Healthy: under {pct(lim.endurance.budget_high_share)} of the rating (orange from there; the budget "
        "alert), "
        f"and never past {pct(lim.endurance.exhaustion_share)} (red: the drives wear out before the planned "
        "life ends)."
    )
    legend = "{{pool}} ({{source}})"
    remaining, share = m(lim.rule("remaining"), POOL), m(lim.rule("share"), POOL)
    worn = worn_pools(lim)
    shares, share_overrides = worn_apart(
        Query(f"{enough_data(lim, share)}\nand on ({POOL_LABELS}) (\n{worn}\n)", legend, instant=True),
        Query(f"{enough_data(lim, share)}\nunless on ({POOL_LABELS}) (\n{worn}\n)", legend, instant=True),
        worn_share_ranges(lim),
    )
    times, time_overrides = worn_apart(
        Query(worn, legend, instant=True),
        Query(f"{enough_data(lim, remaining)}\nunless on ({POOL_LABELS}) (\n{worn}\n)", legend, instant=True),
        worn_ranges(lim),
    )
    return [
        Row("SSD pools"),
        Panel(
            "timeseries",
            f"Pool write rate, {lim.pool_short_window} and {lim.pool_long_window} averages",
            f"Bytes per second written to each SSD pool, per source (sqlserver: SQL Server's database files "
            f"on the pool's volumes; host: the host's counters of the pool's disks), averaged over "
            f"{lim.pool_short_window} and {lim.pool_long_window}. The {lim.pool_long_window} rate drives the "
            f"projection; a short window overstates bursty loads. Each average is drawn once it rests on "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} of data, as every long-window figure "
            f"of these dashboards (see 'Data the projection rests on'). Healthy: a rate the gauge beside it "
            f"keeps under {pct(lim.endurance.budget_high_share)} of the rating.",
            "Bps",
            [
                Query(
                    enough_data(lim, m(lim.rule("pool_short"), POOL)),
                    f"{{{{pool}}}} {{{{source}}}}, {lim.pool_short_window}",
                ),
                Query(
                    enough_data(lim, m(lim.rule("pool_long"), POOL)),
                    f"{{{{pool}}}} {{{{source}}}}, {lim.pool_long_window}",
                ),
            ],
            width=8,
            min=0,
            no_value=young_pools(lim),
        ),
        Panel(
            # A bar gauge, not 12.4's flot gauge: that one drew nothing in the Grafana we render in, not
            # even its no-data text (grafana.PanelType).
            "bargauge",
            "Projected share of the rating",
            f"Per pool and source: {lim.pool_long_window} write rate x planned lifetime ÷ rated endurance. "
            f"{share_text} A bar is orange from {pct(lim.endurance.budget_high_share)} and red from "
            f"{pct(lim.endurance.exhaustion_share)}; the scale ends at "
            f"{pct(lim.endurance.exhaustion_share * GAUGE_HEADROOM)}. "
            f"Shown once the rate rests on {duration(lim.endurance.projection_min_coverage_seconds)} of "
            "data. Never green for a pool that wears out in service, as the time left beside says: the "
            "bytes already written can use the rating up before retirement even where this rate alone "
            "would not.",
            "percentunit",
            shares,
            width=6,
            no_value=no_pool_yet(lim),
            thresholds=share_thresholds,
            overrides=share_overrides,
            min=0,
            max=lim.endurance.exhaustion_share * GAUGE_HEADROOM,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
            # One colour per bar, its value's: LCD cells drew a full grey bar beside the no-data text.
            options={"displayMode": "basic"},
        ),
        Panel(
            "stat",
            "Rating used up in",
            "Per pool and source: (rated endurance - bytes written so far: known reading + counted + "
            "extrapolated over the gaps) ÷ the "
            f"{lim.pool_long_window} write rate. {worn_text(lim)} Healthy: green. Infinite when "
            "nothing is written. Shown once the rate rests on "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} of "
            "data.",
            "s",
            times,
            width=5,
            thresholds=RETIRED_FIRST,
            overrides=time_overrides,
            options={"textMode": "value_and_name"},
            links=[lim.runbook(ENDURANCE_REMAINING)],
            no_value=no_pool_yet(lim),
        ),
        Panel(
            "stat",
            "Data the projection rests on",
            f"Per pool and source: the span of data the {lim.pool_long_window} write rate averages over, "
            f"from the pool's first sample in Prometheus (at most {lim.pool_long_window}). A young "
            "Prometheus or a new pool holds less; the rate is then over what it holds, never spread over "
            "the whole window. Projections show from "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} (orange "
            "under it); the endurance alerts wait for "
            f"{duration(lim.endurance.alert_min_coverage_seconds)}. Healthy: at least "
            f"{duration(lim.endurance.projection_min_coverage_seconds)}; the full {lim.pool_long_window} "
            "once the pool has "
            "been watched that long.",
            "s",
            [Query(m(lim.rule("pool_long_coverage"), POOL), "{{pool}} ({{source}})", instant=True)],
            width=5,
            thresholds=coverage_thresholds(lim),
            options={"textMode": "value_and_name"},
            no_value=NO_POOLS,
        ),
        Panel(
            "timeseries",
            "Projected share of rated endurance, over time",
            f"The projection of the gauge as it moved: {share_text} Drawn once its rate rests on "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} of data.",
            "percentunit",
            [Query(enough_data(lim, m(lim.rule("share"), POOL)), "{{pool}} ({{source}})")],
            width=24,
            thresholds=share_thresholds,
            min=0,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
            no_value=no_pool_yet(lim),
        ),
        pool_table(lim, "Endurance per pool, in the shape of Micron's Table 4", per_instance=False),
    ]
