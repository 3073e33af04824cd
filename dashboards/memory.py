"""Dashboard 1, memory pressure (one instance): Dell Table 4 counters against their desired ranges, page
life expectancy per NUMA node against its scaled floor, the memory manager, NUMA, Hybrid Buffer Pool and the
exporter; the diagnosis rows come from dashboards/diagnosis.py."""

from __future__ import annotations

from mssql_memory_exporter.collectors import (
    buffer_manager,
    buffer_node,
    hybrid_buffer_pool,
    memory_manager,
    sql_statistics,
    sys_info,
)
from mssql_memory_exporter.scrape import scrape_metrics

from alerts.names import (
    COLLECTOR_FAILING,
    FREE_LIST_STALLS,
    FREE_MEMORY_LOW,
    GRANTS_PENDING,
    HIT_RATIO_LOW,
    LAZY_WRITES,
    LOOKUPS_PER_BATCH,
    MEMORY_PRESSURE,
    PLE_LOW,
    TARGET_DOWN,
)
from alerts.spec import number as num

from .availability import memory_row_availability
from .diagnosis import memory_row_pressure_from_outside, memory_row_who_holds
from .empty import AZURE_SQL_DATABASE, NO_SCRAPE, off, waits
from .frame import (
    MEMORY_UID,
    TAGS,
    alert_annotations,
    failover_annotation,
    header_links,
    low_memory_annotation,
    variables,
)
from .grafana import (
    GREEN,
    ORANGE,
    RED,
    Dashboard,
    Panel,
    Query,
    Row,
    Step,
    Thresholds,
    override,
    override_query,
    value_map,
)
from .limits import Limits, pct, ple_floor_text
from .memory_health import memory_health_panels
from .panels import ANY, AT_FLOOR, NOW_WIDTH, UNIT_PAGES, UNIT_STALLS, now_stat, per_workload
from .queries import instance, m, rate, with_workload
from .shipped import memory_row_shipped


def alert_input(lim: Limits) -> str:
    """The legend of the series an alert reads: the rate averaged over the alerts' window."""
    return f"{lim.window} average (what the alert reads)"


def rate_vs_limit(
    lim: Limits,
    title: str,
    description: str,
    unit: str,
    counter: tuple[str, str],
    rule: str,
    limit: float,
    alert: str,
    no_value: str,
) -> Panel:
    """A Dell Table 4 rate against its upper limit: the live rate of `counter` (metric, legend), the
    recording rule the alert reads, the unhealthy side painted, and runbook links to the alert and to
    memory pressure (which these rates add up to)."""
    return Panel(
        "timeseries",
        title,
        description,
        unit,
        [Query(rate(counter[0]), counter[1]), Query(m(lim.rule(rule)), alert_input(lim))],
        thresholds=Thresholds.healthy_below(limit),
        min=0,
        links=[lim.runbook(alert), lim.runbook(MEMORY_PRESSURE)],
        no_value=no_value,
    )


def ple_ratio_expr(lim: Limits) -> str:
    """Each node's page life expectancy over its own floor (1 = at the floor)."""
    return f"{m(buffer_node.PLE.name)}\n/ on (job, instance, node) {m(lim.rule('ple_floor'))}"


def lookups_per_batch_expr() -> str:
    return f"{rate(buffer_manager.PAGE_LOOKUPS.name)}\n/ ({rate(sql_statistics.BATCH_REQUESTS.name)} > 0)"


# Alerts of an instance: orange while some are pending and none fires, red from the first firing one.
PENDING_OR_FIRING = Thresholds((Step(ORANGE, None), Step(RED, ANY)))


def memory_row_now(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Now"."""
    w = lim.window
    ple_ratio = ple_ratio_expr(lim)
    # The nodes the PLE alert judges: the instance has been up longer than the node's floor.
    warm_ratio = (
        f"min without (node) (\n{ple_ratio}\nand on (job, instance, node) (\n  {m(lim.rule('ple_floor'))}\n"
        f"  < on (job, instance) group_left () {m(lim.rule('uptime'))}\n)\n)"
    )
    return [
        Row("Now"),
        Panel(
            "stat",
            "Target up",
            f"Whether the exporter could read this SQL Server at the last scrape ({scrape_metrics.UP.name})."
            " Healthy: up. "
            "While it is down no other panel gets new data, and every other alert of the target is silenced.",
            "bool_yes_no",
            [Query(m(scrape_metrics.UP.name), instant=True)],
            width=NOW_WIDTH,
            height=4,
            mappings=value_map({0: ("down", RED), 1: ("up", GREEN)}),
            links=[lim.runbook(TARGET_DOWN)],
            no_value=NO_SCRAPE,
        ),
        now_stat(
            "Uptime",
            f"Time since SQL Server started (from {sys_info.START_TIME.name}). Right after a start the"
            " buffer pool is empty: page life expectancy can be no higher than the uptime, so the PLE alerts"
            " wait until the instance has been up longer than each node's floor. Healthy: steady growth; a"
            " reset is a restart (marked on the time series).",
            "s",
            m(lim.rule("uptime")),
            no_value=off(sys_info),
        ),
        Panel(
            "stat",
            "Worst PLE ÷ floor",
            "Page life expectancy of the worst NUMA node divided by that node's floor "
            f"({ple_floor_text(lim)}). Healthy: 100% or more. Under 100% one node is evicting pages faster "
            "than the floor allows, even when the instance-wide PLE looks fine. Right after a restart a "
            "node's PLE can be no higher than the uptime: until the instance has been up longer than a "
            "node's floor, that node is not judged (as the alert waits for it too), and while no node is "
            "judged yet the figure shows without a colour.",
            "percentunit",
            [
                # A: while no node has been up longer than its floor; B: the nodes that have.
                Query(
                    f"min without (node) (\n{ple_ratio}\n)\nunless on (job, instance) (\n{warm_ratio}\n)",
                    instant=True,
                ),
                Query(warm_ratio, instant=True),
            ],
            width=NOW_WIDTH,
            height=4,
            thresholds=Thresholds.healthy_above(AT_FLOOR),
            overrides=[override_query("A", ("thresholds", Thresholds.neutral().json()))],
            links=[lim.runbook(PLE_LOW)],
            no_value=off(buffer_node),
        ),
        now_stat(
            f"Lazy writes ({w})",
            f"Pages the lazy writer flushed per second, averaged over {w}. Healthy (Dell Table 4): under "
            f"{num(lim.memory.lazy_writes_per_second.max)}/s.",
            UNIT_PAGES,
            m(lim.rule("lazy")),
            thresholds=Thresholds.healthy_below(lim.memory.lazy_writes_per_second.max),
            links=[lim.runbook(LAZY_WRITES)],
            no_value=waits(w, buffer_manager),
        ),
        now_stat(
            f"Free list stalls ({w})",
            f"Requests per second that waited for a free buffer page, averaged over {w}. Healthy (Dell Table "
            f"4): under {num(lim.memory.free_list_stalls_per_second.max)}/s; any sustained value above 0 "
            "means free pages run out.",
            UNIT_STALLS,
            m(lim.rule("stalls")),
            thresholds=Thresholds.healthy_below(lim.memory.free_list_stalls_per_second.max),
            links=[lim.runbook(FREE_LIST_STALLS)],
            no_value=waits(w, buffer_manager),
        ),
        Panel(
            "stat",
            f"Lookups/batch ({w})",
            f"Buffer pool page lookups per batch request, averaged over {w}. Healthy (Dell Table 4, OLTP): "
            f"under {num(lim.memory.page_lookups_per_batch_request.max)}; red from there on an OLTP target "
            "only, since analytic (OLAP) "
            "targets scan by design and the alert ignores them. Empty while the instance runs no batches.",
            "short",
            [Query(with_workload(m(lim.rule("lookups_ratio"))), "{{workload}} target", instant=True)],
            width=NOW_WIDTH,
            height=4,
            thresholds=Thresholds.healthy_below(lim.memory.page_lookups_per_batch_request.max),
            overrides=per_workload("{{workload}} target", lim.lookups_by_workload),
            links=[lim.runbook(LOOKUPS_PER_BATCH)],
            no_value=off(sql_statistics, also=f"No batches in the last {w}"),
        ),
        now_stat(
            "Grants pending",
            "Queries waiting for a workspace memory grant now. Healthy: "
            f"{num(lim.memory.memory_grants_pending.max)}; the alert "
            f"fires when more than {num(lim.memory.memory_grants_pending.max)} wait for "
            f"{lim.memory.memory_grants_pending.for_}.",
            "short",
            m(memory_manager.GRANTS_PENDING.name),
            thresholds=Thresholds.healthy_below(lim.grants_alarm),
            links=[lim.runbook(GRANTS_PENDING)],
            no_value=off(memory_manager),
        ),
        Panel(
            "stat",
            "Firing alerts",
            "Alerts of this instance firing in Prometheus now (ALERTS). Healthy: 0 in green. An orange 0: "
            "none fires yet, but some are pending (their condition holds while they wait out their for: "
            "time), which is what a red stat beside this one means until its alert fires; a green 0 beside "
            "a red stat would tell the opposite story. The red marks on the time series show when each "
            "fired; the runbooks are linked in the dashboard header.",
            "short",
            [
                # A: firing alerts, or 0 while some are only pending; B: 0 when none is even pending.
                Query(
                    f'count(ALERTS{{alertstate="firing", {instance()}}})\n'
                    f'or count(ALERTS{{alertstate="pending", {instance()}}}) * 0',
                    instant=True,
                ),
                Query(f"vector(0) unless on () count(ALERTS{{{instance()}}})", instant=True),
            ],
            width=NOW_WIDTH,
            height=4,
            thresholds=Thresholds.healthy_below(ANY),
            overrides=[override_query("A", ("thresholds", PENDING_OR_FIRING.json()))],
            no_value="No alert state: this Prometheus evaluates none of the bundle's alert rules",
        ),
    ]


def memory_row_dell_table_4(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Dell Table 4: each counter against its desired range"."""
    w = lim.window
    reads = alert_input(lim)
    lookups_per_batch = lookups_per_batch_expr()
    return [
        Row("Dell Table 4: each counter against its desired range"),
        rate_vs_limit(
            lim,
            "Free list stalls",
            'Requests per second that had to wait for a free page (Buffer Manager "Free list stalls/sec"). '
            f"Desired range (Dell Table 4): under {num(lim.memory.free_list_stalls_per_second.max)}/s, drawn "
            "as the red area; the alert "
            f"fires after {lim.memory.free_list_stalls_per_second.for_} over it. Stalls with low page "
            "life expectancy are memory pressure.",
            UNIT_STALLS,
            (buffer_manager.FREE_LIST_STALLS.name, "stalls/s"),
            "stalls",
            lim.memory.free_list_stalls_per_second.max,
            FREE_LIST_STALLS,
            no_value=off(buffer_manager),
        ),
        rate_vs_limit(
            lim,
            "Lazy writes",
            'Pages per second the lazy writer flushes to make room in the buffer pool ("Lazy writes/sec"). '
            f"Desired range (Dell Table 4): under {num(lim.memory.lazy_writes_per_second.max)}/s; the alert "
            "fires after "
            f"{lim.memory.lazy_writes_per_second.for_} over it. Checkpoints, not the lazy writer, "
            "should do most writing.",
            UNIT_PAGES,
            (buffer_manager.LAZY_WRITES.name, "lazy writes/s"),
            "lazy",
            lim.memory.lazy_writes_per_second.max,
            LAZY_WRITES,
            no_value=off(buffer_manager),
        ),
        Panel(
            "timeseries",
            "Page life expectancy per NUMA node vs its floor",
            'Seconds a page stays in each node\'s buffer pool (Buffer Node "Page life expectancy"), with the '
            f"node's own floor dashed: {ple_floor_text(lim)}. Healthy: every node above its floor; the red "
            f"area is under Dell's {num(lim.memory.page_life_expectancy.floor_seconds)} s. The instance-wide "
            "value is a harmonic mean that "
            "hides one starved node.",
            "s",
            [
                Query(m(buffer_node.PLE.name), "node {{node}}"),
                Query(m(lim.rule("ple_floor")), "node {{node}} floor"),
                Query(m(buffer_manager.PAGE_LIFE_EXPECTANCY.name), "instance (harmonic mean of the nodes)"),
            ],
            thresholds=Thresholds.healthy_above(lim.memory.page_life_expectancy.floor_seconds),
            min=0,
            overrides=[
                override(
                    ".* floor$",
                    ("custom.lineStyle", {"dash": [10, 10], "fill": "dash"}),
                    ("custom.fillOpacity", 0),
                    regex=True,
                )
            ],
            links=[lim.runbook(PLE_LOW), lim.runbook(MEMORY_PRESSURE)],
            no_value=off(buffer_node),
        ),
        Panel(
            "timeseries",
            "Page lookups per batch request",
            'Buffer pool page lookups per batch request ("Page lookups/sec" ÷ "Batch Requests/sec"). '
            "Desired range (Dell Table 4, OLTP): under "
            f"{num(lim.memory.page_lookups_per_batch_request.max)}, drawn for OLTP targets only. "
            "High values point at scans and missing indexes that churn the buffer pool; analytic (OLAP) "
            "targets are expected to be higher, so no range is drawn for them, and the alert ignores them "
            "and instances under "
            f"{num(lim.memory.page_lookups_per_batch_request.min_batch_requests_per_second)} batch/s.",
            "suffix: lookups/batch",
            [
                Query(
                    with_workload(f"(\n{lookups_per_batch}\n)"),
                    "lookups per batch ({{workload}} target)",
                ),
                Query(with_workload(m(lim.rule("lookups_ratio"))), f"{reads} ({{{{workload}}}} target)"),
            ],
            thresholds=Thresholds.healthy_below(lim.memory.page_lookups_per_batch_request.max),
            overrides=[
                *per_workload(
                    "lookups per batch ({{workload}} target)",
                    lim.lookups_by_workload,
                ),
                *per_workload(
                    f"{reads} ({{{{workload}}}} target)",
                    lim.lookups_by_workload,
                ),
            ],
            min=0,
            links=[lim.runbook(LOOKUPS_PER_BATCH)],
            no_value=off(buffer_manager, sql_statistics, also="No batch requests in this range"),
        ),
        Panel(
            "timeseries",
            "Page reads and writes",
            'Physical page I/O of the buffer pool ("Page reads/sec", "Page writes/sec"). Desired range '
            f"(Dell Table 4): reads plus writes under {num(lim.memory.page_io_per_second.max)}/s, a figure "
            "from Dell's 2010 "
            "test array: a starting point to adjust to your storage (no alert uses it). A buffer pool too "
            "small for the working set shows here first, as reads.",
            UNIT_PAGES,
            [
                Query(rate(buffer_manager.PAGE_READS.name), "reads/s"),
                Query(rate(buffer_manager.PAGE_WRITES.name), "writes/s"),
                Query(m(lim.rule("page_io")), f"reads + writes, {w} average"),
            ],
            thresholds=Thresholds.healthy_below(lim.memory.page_io_per_second.max),
            min=0,
            no_value=off(buffer_manager),
        ),
        Panel(
            "timeseries",
            f"Free memory vs Dell's {num(lim.free_pages)}-page floor",
            'Committed memory SQL Server is not using (Memory Manager "Free Memory (KB)", which replaced '
            f'"Free pages"). Desired range (Dell Table 4): more than {num(lim.free_pages)} pages of '
            f"{num(lim.page_bytes / 1024)} KiB = "
            f"{num(lim.memory.free_memory_bytes.min / 2**20)} MiB; the red area is under it. "
            "Near zero is common on a server at its memory target: read it with stalls and PLE.",
            "bytes",
            [Query(m(memory_manager.FREE.name), "free memory")],
            thresholds=Thresholds.healthy_above(lim.memory.free_memory_bytes.min),
            min=0,
            links=[lim.runbook(FREE_MEMORY_LOW)],
            no_value=off(memory_manager),
        ),
        Panel(
            "timeseries",
            "Buffer cache hit ratio",
            "Share of page requests served from memory. Desired range (Dell Table 4): over "
            f"{pct(lim.memory.buffer_cache_hit_ratio.oltp)} for OLTP targets, over "
            f"{pct(lim.memory.buffer_cache_hit_ratio.olap)} for OLAP; each series is "
            "coloured by its own target's workload (the legend names it). Read-ahead counts as hits, so this "
            "stays high under real pressure: never judge memory by it alone.",
            "percentunit",
            [Query(with_workload(m(buffer_manager.HIT_RATIO.name)), "hit ratio ({{workload}} target)")],
            # The default only shows before a series' workload is known; each workload has its own floor.
            thresholds=Thresholds.healthy_above(
                lim.memory.buffer_cache_hit_ratio.olap, warn=lim.memory.buffer_cache_hit_ratio.oltp
            ),
            overrides=per_workload(
                "hit ratio ({{workload}} target)",
                {
                    "oltp": Thresholds.healthy_above(lim.memory.buffer_cache_hit_ratio.oltp),
                    "olap": Thresholds.healthy_above(lim.memory.buffer_cache_hit_ratio.olap),
                },
            ),
            max=1,
            links=[lim.runbook(HIT_RATIO_LOW)],
            no_value=off(buffer_manager),
        ),
        Panel(
            "timeseries",
            "Batch requests",
            'Batch requests per second (SQL Statistics "Batch Requests/sec"): the workload the other '
            "counters are measured against. No desired range; the lookups-per-batch alert counts only above "
            f"{num(lim.memory.page_lookups_per_batch_request.min_batch_requests_per_second)} batch/s.",
            "reqps",
            [
                Query(rate(sql_statistics.BATCH_REQUESTS.name), "batches/s"),
                Query(m(lim.rule("batches")), f"{w} average"),
            ],
            min=0,
            no_value=off(sql_statistics),
        ),
        # SQL Server 2025's own verdict beside Dell's counters (dashboards/memory_health.py).
        *memory_health_panels(lim),
    ]


def memory_row_memory_manager(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Memory manager"."""
    return [
        Row("Memory manager"),
        Panel(
            "timeseries",
            "Target vs total vs database cache memory",
            "Memory Manager: target (what SQL Server would like to use), total (what it has committed), "
            "database cache (the data pages of the buffer pool) and stolen (plans, grants, locks). Healthy: "
            "total at target with most of it database cache. Total stuck under target while the server is "
            "busy means SQL Server cannot get the memory it wants (max server memory, OS pressure).",
            "bytes",
            [
                Query(m(memory_manager.TARGET.name), "target"),
                Query(m(memory_manager.TOTAL.name), "total"),
                Query(m(memory_manager.DATABASE_CACHE.name), "database cache"),
                Query(m(memory_manager.STOLEN.name), "stolen"),
            ],
            min=0,
            no_value=off(memory_manager),
        ),
        Panel(
            "timeseries",
            "Memory grants pending and outstanding",
            "Queries waiting for a workspace memory grant (pending) and holding one (outstanding). Healthy: "
            f"{num(lim.memory.memory_grants_pending.max)} pending; the red area starts above that. Pending "
            "grants mean queries "
            "wait for memory before they can even start.",
            "suffix: queries",
            [
                Query(m(memory_manager.GRANTS_PENDING.name), "pending"),
                Query(m(memory_manager.GRANTS_OUTSTANDING.name), "outstanding"),
            ],
            thresholds=Thresholds.healthy_below(lim.grants_alarm),
            min=0,
            links=[lim.runbook(GRANTS_PENDING)],
            no_value=off(memory_manager),
        ),
    ]


def memory_row_numa_nodes(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "NUMA nodes"."""
    return [
        Row("NUMA nodes"),
        Panel(
            "timeseries",
            "Buffer pool per NUMA node",
            "Database pages held by each node, in bytes (pages x "
            f"{num(lim.page_bytes)}). This sizes each "
            f"node's PLE floor ({ple_floor_text(lim)}). Healthy: nodes of similar size; a node much smaller "
            "than the others is short of local memory.",
            "bytes",
            [Query(f"{m(buffer_node.DATABASE_PAGES.name)} * {num(lim.page_bytes)}", "node {{node}}")],
            min=0,
            no_value=off(buffer_node),
        ),
        Panel(
            "timeseries",
            "Remote page lookups per NUMA node",
            "Share of each node's page lookups served from another node's memory (\"Remote node page "
            'lookups/sec" ÷ all lookups). Healthy: near 0%. A node with a high share is short of local '
            "memory and pays the cross-node latency on every access.",
            "percentunit",
            [
                Query(
                    f"{rate(buffer_node.REMOTE_LOOKUPS.name)}\n/ (\n"
                    f"  {rate(buffer_node.LOCAL_LOOKUPS.name)}\n"
                    f"  + {rate(buffer_node.REMOTE_LOOKUPS.name)}\n  > 0\n)",
                    "node {{node}}",
                )
            ],
            min=0,
            max=1,
            no_value=off(buffer_node, also="No page lookups in this range"),
        ),
    ]


def memory_row_hybrid_buffer_pool(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Hybrid Buffer Pool"."""
    return [
        Row("Hybrid Buffer Pool"),
        Panel(
            "stat",
            "Hybrid Buffer Pool state",
            "Server-level setting (configured; takes effect at the next restart), whether it is in effect "
            "now (enabled), and how many databases have the database-level setting on (Microsoft's default, "
            "so usually nearly all). Healthy: configured and enabled agree; off before SQL Server 2019.",
            "bool_on_off",
            [
                Query(m(hybrid_buffer_pool.CONFIGURED.name), "configured", instant=True),
                Query(m(hybrid_buffer_pool.ENABLED.name), "in effect", instant=True),
                Query(m(hybrid_buffer_pool.DATABASES.name), "databases with it on", instant=True),
            ],
            width=8,
            overrides=[override("databases with it on", ("unit", "short"))],
            options={"colorMode": "none", "textMode": "value_and_name"},
            no_value=off(hybrid_buffer_pool, lacking=AZURE_SQL_DATABASE),
        ),
        Panel(
            "bargauge",
            "Data eligible for the Hybrid Buffer Pool, per PMEM volume",
            "Size of the data files on each PMEM (DAX) volume whose database has the Hybrid Buffer Pool on: "
            "an upper bound of what it may serve from persistent memory, not a measure of use (no DMV "
            "reports that). The second bar counts only while the server-level setting is in effect. No "
            "healthy range: it shows what PMEM can serve; empty when no PMEM volume is known.",
            "bytes",
            [
                Query(m(hybrid_buffer_pool.ELIGIBLE_BYTES.name), "{{volume}}: eligible", instant=True),
                Query(
                    f"{m(hybrid_buffer_pool.ELIGIBLE_BYTES.name)}\n"
                    f"* on (job, instance) group_left () {m(hybrid_buffer_pool.ENABLED.name)}",
                    "{{volume}}: eligible while in effect",
                    instant=True,
                ),
            ],
            width=16,
            min=0,
            no_value=off(hybrid_buffer_pool, also="No PMEM (DAX) volume known on this instance"),
        ),
    ]


def memory_row_exporter(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Exporter"."""
    return [
        Row("Exporter"),
        Panel(
            "timeseries",
            "Scrape duration",
            "Wall time of each scrape of this target: login when needed, the one T-SQL batch and parsing. "
            "Healthy: well under the scrape timeout; a scrape that runs into it reads as the target down.",
            "s",
            [Query(m(scrape_metrics.SCRAPE_DURATION.name), "scrape")],
            min=0,
            no_value=NO_SCRAPE,
        ),
        Panel(
            "stat",
            "Collectors",
            f"Whether each section of the last scrape succeeded ({scrape_metrics.COLLECTOR_SUCCESS.name})."
            " Healthy: "
            "all ok. A failing collector's metrics are missing (often a permission); the others still "
            "export.",
            "bool_yes_no",
            [Query(m(scrape_metrics.COLLECTOR_SUCCESS.name), "{{collector}}", instant=True)],
            mappings=value_map({0: ("failing", RED), 1: ("ok", GREEN)}),
            options={"textMode": "value_and_name", "colorMode": "background"},
            links=[lim.runbook(COLLECTOR_FAILING)],
            no_value=NO_SCRAPE,
        ),
    ]


def memory_dashboard(lim: Limits) -> Dashboard:
    items: list[Panel | Row] = [
        *memory_row_now(lim),
        *memory_row_dell_table_4(lim),
        *memory_row_memory_manager(lim),
        *memory_row_who_holds(lim),
        *memory_row_pressure_from_outside(lim),
        *memory_row_numa_nodes(lim),
        *memory_row_hybrid_buffer_pool(lim),
        *memory_row_availability(lim),
        *memory_row_exporter(lim),
        *memory_row_shipped(lim),
    ]
    return Dashboard(
        uid=MEMORY_UID,
        title="SQL Server memory pressure",
        description="One SQL Server instance: Dell Table 4 counters against their desired ranges, page life "
        "expectancy per NUMA node against its scaled floor, memory manager, who holds the memory and "
        "pressure from outside, Hybrid Buffer Pool, availability groups' recovery objectives.",
        tags=[*TAGS, "memory"],
        items=items,
        variables=variables(lim, multi=False),
        annotations=[*alert_annotations(), failover_annotation(lim), low_memory_annotation(lim)],
        links=header_links(lim, MEMORY_UID),
        refresh="1m",
    )
