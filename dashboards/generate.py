"""Generate the Grafana dashboards from alerts/thresholds.yml, the spec the alert rules come from.

    python -m dashboards.generate              # write dashboards/*.json
    python -m dashboards.generate --check      # exit 1 if the committed files are stale
    python -m dashboards.generate --out DIR    # write elsewhere

Every threshold, window and runbook address is read from the spec (`alerts.spec.load()`); panels read the
generated recording rules (alerts/rules/mssql.recording.rules.yml) by their public names, and raw
counters only through `rate(...[$__rate_interval])`.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from alerts import names as names_
from alerts.generated import generator_main
from alerts.names import (
    COLLECTOR_FAILING,
    COVERAGE_SUFFIX,
    ENDURANCE_BUDGET,
    ENDURANCE_EXHAUSTION,
    ENDURANCE_REMAINING,
    EXTERNAL_PRESSURE,
    FREE_LIST_STALLS,
    FREE_MEMORY_LOW,
    GRANT_TIMEOUTS,
    GRANT_WAITS,
    GRANTS_PENDING,
    HIT_RATIO_LOW,
    LAZY_WRITES,
    LOOKUPS_PER_BATCH,
    MAX_MEMORY_DEFAULT,
    MEMORY_PRESSURE,
    PLE_LOW,
    TARGET_DOWN,
    TARGET_PULLED_DOWN,
    RuleNames,
)
from alerts.spec import EnduranceSpec, MemorySpec, Spec, load
from alerts.spec import number as num

from .grafana import (
    BLUE,
    GREEN,
    ORANGE,
    PURPLE,
    RED,
    Dashboard,
    Json,
    Link,
    Panel,
    Query,
    Row,
    Step,
    Thresholds,
    dashboard_link,
    datasource_variable,
    external_link,
    merge_and_organize,
    override,
    prometheus_annotation,
    query_variable,
    value_map,
)

DASHBOARDS_DIR = Path(__file__).resolve().parent
MIN_GRAFANA_VERSION = "9.3.0"  # the version the dashboards are built for: schema 37, core panels only
# The current Grafana release the compose bundle runs; one line, read by compose and the docs' tests.
GRAFANA_VERSION_FILE = DASHBOARDS_DIR / "grafana_version.txt"

MEMORY_UID = "mssql-memory-pressure"
ENDURANCE_UID = "mssql-tempdb-ssd-endurance"
FLEET_UID = "mssql-fleet-capacity"
FILES = {
    MEMORY_UID: "mssql-memory-pressure.json",
    ENDURANCE_UID: "mssql-tempdb-ssd-endurance.json",
    FLEET_UID: "mssql-fleet-capacity.json",
}
TAGS = ["mssql", "sql-server"]


# Label matchers of every per-target query: the spec's SQL Server selector first, so the Job variable's
# "All" (.+) never reaches the exporter's own job (with default_target its /metrics carries a target's
# series too, and the fleet table listed the exporter as two more instances). $host selects the exporter
# whose /metrics has the host metrics.
INSTANCE = f'{load().selector}, job=~"$job", instance=~"$instance"'
HOST = 'instance=~"$host"'
# The host variable's first choice: matches no exporter (their instance is host:port), so the host panel
# stays empty until someone picks the exporter on the chosen instance's host.
NO_HOST = "(none)"
GAUGE_HEADROOM = 1.5  # the share gauge's scale ends this far past the exhaustion mark
# The only threshold steps that are not spec numbers (tests/test_dashboards.py lists where each is used):
AT_FLOOR = 1  # a value divided by its own floor is healthy from 100%, whatever the floor is
ANY = 1  # a count of firing alerts or of minutes under pressure: one is already too many
UNIT_PAGES = "suffix: pages/s"
UNIT_STALLS = "suffix: stalls/s"  # not "reqps": Grafana would call free list stalls HTTP requests


def m(metric: str, extra: str = "") -> str:
    """A metric (or recording rule) of the selected job and instance(s)."""
    return f"{metric}{{{INSTANCE}{', ' + extra if extra else ''}}}"


def rate(counter: str, extra: str = "") -> str:
    return f"rate({m(counter, extra)}[$__rate_interval])"


def pct(ratio: float) -> str:
    """A ratio as a percentage, without trailing zeros (0.5 -> 50%, 0.125 -> 12.5%)."""
    return f"{ratio:.6%}"[:-1].rstrip("0").rstrip(".") + "%"


def duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds / size
            return f"{num(count)} {unit}{'' if count == 1 else 's'}"
    return f"{num(seconds)} s"


@dataclass(frozen=True)
class Limits:
    """The typed spec as the dashboards read it: thresholds from `memory` and `endurance`, windows and
    rule names, and figures derived from them. Holds no number of its own."""

    spec: Spec

    @classmethod
    def from_spec(cls, spec: Spec) -> Limits:
        return cls(spec)

    @property
    def memory(self) -> MemorySpec:
        return self.spec.memory

    @property
    def endurance(self) -> EnduranceSpec:
        return self.spec.endurance

    @property
    def page_bytes(self) -> float:
        return self.memory.page_life_expectancy.page_bytes

    @property
    def lookups_by_workload(self) -> dict[str, Thresholds | None]:
        """Dell's lookups-per-batch limit is for OLTP; analytic scans exceed it by design: none drawn."""
        oltp = Thresholds.healthy_below(self.memory.page_lookups_per_batch_request.max)
        return {"oltp": oltp, "olap": None}

    # windows and recording-rule names (the names keep the spec's window, as alerts/generate.py writes them)
    @property
    def window(self) -> str:
        return self.spec.rate_window

    def rule(self, name: str) -> str:
        """A recording rule's public name (alerts/names.py), by the role it plays on the dashboards."""
        n = RuleNames.from_spec(self.spec)
        names = {
            "lazy": n.instance_rate("lazy_writes"),
            "stalls": n.instance_rate("free_list_stalls"),
            "batches": n.instance_rate("batch_requests"),
            "compilations_per_batch": n.compilations_per_batch,
            "grant_waits": n.grant_waits,
            "lookups_ratio": n.lookups_ratio,
            "page_io": n.page_io,
            "volume": n.volume,
            "tempdb_short": n.tempdb(n.tempdb_short),
            "tempdb_long": n.tempdb(n.tempdb_long),
            "pool_short": n.pool(n.pool_short),
            "pool_long": n.pool(n.pool_long),
            # Seconds of data the same-named rate rests on (a young Prometheus holds less than the window).
            "pool_long_coverage": n.pool(n.pool_long) + COVERAGE_SUFFIX,
            "tempdb_long_coverage": n.tempdb(n.tempdb_long) + COVERAGE_SUFFIX,
            "memory_sizing_change": n.memory_sizing_change,
            "buffer_pool_long": n.buffer_pool_long,
            "ple_min": names_.PLE_MIN,
            "ple_floor": names_.PLE_FLOOR,
            "uptime": names_.UPTIME,
            "share": names_.SHARE,
            "tempdb_headroom": names_.TEMPDB_HEADROOM,
            "tempdb_headroom_ratio": names_.TEMPDB_HEADROOM_RATIO,
            "tempdb_room": names_.TEMPDB_GROWTH_ROOM,
            "tempdb_log_headroom_ratio": names_.TEMPDB_LOG_HEADROOM_RATIO,
            "tempdb_exhausted_in": n.tempdb_exhausted_in,
            "tempdb_version_store": names_.TEMPDB_VERSION_STORE_BYTES,
            "tempdb_layout": names_.TEMPDB_LAYOUT_PROBLEMS,
            "read_latency": n.volume_io("read_latency_seconds"),
            "write_latency": n.volume_io("write_latency_seconds"),
            "reads": n.volume_io("reads"),
            "writes": n.volume_io("writes"),
            "read_size": n.volume_io("read_size_bytes"),
            "write_size": n.volume_io("write_size_bytes"),
            "drive_implied": names_.DRIVE_IMPLIED,
            "drive_to_rated": names_.DRIVE_TO_RATED,
            "drive_remaining": names_.DRIVE_REMAINING,
            "drive_share": names_.DRIVE_SHARE,
            "remaining": names_.REMAINING,
        }
        return names[name]

    @property
    def tempdb_short_window(self) -> str:
        return self.spec.tempdb.short_rate_window

    @property
    def tempdb_long_window(self) -> str:
        return self.spec.tempdb.long_rate_window

    @property
    def pool_short_window(self) -> str:
        return self.spec.endurance.short_rate_window

    @property
    def pool_long_window(self) -> str:
        return self.spec.endurance.projection_rate_window

    @property
    def grants_alarm(self) -> float:
        # Grafana colors from a step's value upwards; a count above the limit is at least limit + 1.
        return self.memory.memory_grants_pending.max + 1

    @property
    def free_pages(self) -> float:
        return self.memory.free_memory_bytes.min / self.page_bytes

    @property
    def step_gib(self) -> str:
        return f"{num(self.memory.page_life_expectancy.buffer_pool_bytes_per_step / 2**30)} GiB"

    def runbook(self, alert: str) -> Link:
        return Link(f"Runbook: {alert}", self.spec.runbook(alert))



def with_workload(expr: str) -> str:
    """The series of `expr` with its target's workload label (oltp or olap, from mssql_target_info), for
    legends and per-workload colours."""
    return f"{expr}\n* on (job, instance) group_left (workload) {m('mssql_target_info')}"


def per_workload(legend: str, thresholds: dict[str, Thresholds | None]) -> list[Json]:
    """Overrides giving each workload's series (legend containing "{{workload}} target") its own
    thresholds; None: no desired range for that workload, so none is drawn."""
    items = []
    for workload, limits in thresholds.items():
        name = legend.replace("{{workload}}", workload)
        if limits is None:
            props: list[tuple[str, object]] = [
                ("thresholds", Thresholds.neutral().json()),
                ("custom.thresholdsStyle", {"mode": "off"}),
            ]
        else:
            props = [("thresholds", limits.json())]
        items.append(override(name, *props))
    return items


def ple_floor_text(lim: Limits) -> str:
    return (
        f"{num(lim.memory.page_life_expectancy.seconds_per_buffer_pool_bytes)} s per {lim.step_gib} of the "
        "node's buffer pool, and at least "
        f"Dell's {num(lim.memory.page_life_expectancy.floor_seconds)} s"
    )


# --- shared pieces -----------------------------------------------------------------------------------


def variables(
    lim: Limits, multi: bool, extra: list[Json] | None = None, pools_first: bool = False
) -> list[Json]:
    selector = lim.spec.selector
    all_value = ".+" if multi else None
    instance = query_variable(
        "instance",
        "Instance",
        f'label_values(mssql_up{{{selector}, job=~"$job"}}, instance)',
        "SQL Server targets, as the scrape job labels them (the exporter's target names).",
        multi=multi,
        all_value=all_value,
    )
    if pools_first:
        # Instances with SSD pools first, so the dashboard opens on one whose SSD half has data: 1 + the
        # number of pool series for those, 0 for the rest, sorted descending; one line for Grafana 9.3.
        instance = query_variable(
            "instance",
            "Instance",
            "query_result(sort_desc(count by (instance) "
            f'(mssql_ssd_pool_rated_endurance_bytes{{{selector}, job=~"$job"}}) + 1'
            f' or 0 * count by (instance) (mssql_up{{{selector}, job=~"$job"}})))',
            "SQL Server targets, as the scrape job labels them; those with SSD pools (ssd_pools in the "
            "exporter's config) are listed first.",
            regex='/instance="([^"]+)"/',
            sort=0,
        )
    return [
        datasource_variable(),
        query_variable(
            "job",
            "Job",
            f"label_values(mssql_up{{{selector}}}, job)",
            "The Prometheus job(s) scraping the exporter (those the recording rules' selector matches).",
            multi=multi,
            all_value=all_value,
        ),
        instance,
        *(extra or []),
    ]


def annotations() -> list[Json]:
    return [
        prometheus_annotation(
            "Firing alerts",
            # One mark where the condition began (ALERTS_FOR_STATE's value is that time), for alerts that
            # went on to fire; not a region, which painted every panel red while any alert fired.
            f"ALERTS_FOR_STATE{{{INSTANCE}}} * 1000\n"
            f'and ignoring (alertstate) ALERTS{{alertstate="firing", {INSTANCE}}}',
            RED,
            "{{alertname}}",
            "{{severity}} on {{instance}}: the condition began here and held for the alert's for: time",
            "alertname,severity",
            value_is_time=True,
        ),
        prometheus_annotation(
            "SQL Server restarts",
            # The start time itself, as the mark's time: one mark at the real start, also when a scrape
            # gap longer than any window hides the change (changes() over a window would miss it).
            f"{m('mssql_start_time_seconds')} * 1000",
            BLUE,
            "SQL Server started",
            "{{instance}} started: the buffer pool was empty, tempdb was recreated and every counter began"
            " again from 0.",
            "instance",
            value_is_time=True,
        ),
    ]


def memory_change_annotation(lim: Limits) -> Json:
    """Marks where max server memory, physical memory or target memory changed: Micron's brief shows
    tempdb writes rising when memory is added, so the change belongs next to the write rate."""
    share = pct(lim.spec.tempdb.memory_change_target_share)
    return prometheus_annotation(
        "Memory changes",
        m(lim.rule("memory_sizing_change")),
        PURPLE,
        "{{memory}} changed",
        f"{{{{instance}}}}: {{{{memory}}}} changed within {lim.window} (max server memory or physical "
        f"memory: any change; target memory: more than {share}). Compare tempdb's writes before and after.",
        "instance,memory",
    )


def header_links(lim: Limits, this: str) -> list[Json]:
    targets = {
        MEMORY_UID: ("Memory pressure", "Per instance: Dell Table 4 counters, PLE per NUMA node, memory"),
        ENDURANCE_UID: ("tempdb and SSD endurance", "Per instance: tempdb writes and SSD pool endurance"),
        FLEET_UID: ("Fleet capacity review", "Every instance in one sortable table"),
    }
    links = [dashboard_link(title, uid, tip) for uid, (title, tip) in targets.items() if uid != this]
    links.append(
        external_link(
            "Runbooks",
            lim.spec.runbook_base_url,
            "What each alert means, its impact, diagnosis and mitigation",
        )
    )
    return links


def dashboard_url(uid: str) -> str:
    return f"/d/{uid}"


# --- 1. memory pressure ------------------------------------------------------------------------------


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
    )


def now_stat(
    title: str,
    description: str,
    unit: str,
    expr: str,
    thresholds: Thresholds | None = None,
    links: list[Link] | None = None,
) -> Panel:
    """One figure of a dashboard's top row: the latest value of `expr`, a quarter of a half row wide."""
    return Panel(
        "stat",
        title,
        description,
        unit,
        [Query(expr, instant=True)],
        width=3,
        height=4,
        thresholds=thresholds,
        links=links or [],
    )


def ple_ratio_expr(lim: Limits) -> str:
    """Each node's page life expectancy over its own floor (1 = at the floor)."""
    return (
        f"{m('mssql_buffer_node_page_life_expectancy_seconds')}\n"
        f"/ on (job, instance, node) {m(lim.rule('ple_floor'))}"
    )


def lookups_per_batch_expr() -> str:
    return f"{rate('mssql_page_lookups_total')}\n/ ({rate('mssql_batch_requests_total')} > 0)"


def memory_row_now(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Now"."""
    w = lim.window
    ple_ratio = ple_ratio_expr(lim)
    return [
        Row("Now"),
        Panel(
            "stat",
            "Target up",
            "Whether the exporter could read this SQL Server at the last scrape (mssql_up). Healthy: up. "
            "While it is down no other panel gets new data, and every other alert of the target is silenced.",
            "bool_yes_no",
            [Query(m("mssql_up"), instant=True)],
            width=3,
            height=4,
            mappings=value_map({0: ("down", RED), 1: ("up", GREEN)}),
            links=[lim.runbook(TARGET_DOWN)],
        ),
        now_stat(
            "Uptime",
            "Time since SQL Server started (from mssql_start_time_seconds). Right after a start the buffer "
            "pool is empty: page life expectancy can be no higher than the uptime, so the PLE alerts wait "
            "until the instance has been up longer than each node's floor. Healthy: steady growth; a reset "
            "is a restart (marked on the time series).",
            "s",
            m(lim.rule("uptime")),
        ),
        now_stat(
            "Worst PLE ÷ floor",
            "Page life expectancy of the worst NUMA node divided by that node's floor "
            f"({ple_floor_text(lim)}). Healthy: 100% or more. Under 100% one node is evicting pages faster "
            "than the floor allows, even when the instance-wide PLE looks fine.",
            "percentunit",
            f"min without (node) (\n{ple_ratio}\n)",
            thresholds=Thresholds.healthy_above(AT_FLOOR),
            links=[lim.runbook(PLE_LOW)],
        ),
        now_stat(
            f"Lazy writes ({w})",
            f"Pages the lazy writer flushed per second, averaged over {w}. Healthy (Dell Table 4): under "
            f"{num(lim.memory.lazy_writes_per_second.max)}/s.",
            UNIT_PAGES,
            m(lim.rule("lazy")),
            thresholds=Thresholds.healthy_below(lim.memory.lazy_writes_per_second.max),
            links=[lim.runbook(LAZY_WRITES)],
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
            width=3,
            height=4,
            thresholds=Thresholds.healthy_below(lim.memory.page_lookups_per_batch_request.max),
            overrides=per_workload(
                "{{workload}} target", lim.lookups_by_workload
            ),
            links=[lim.runbook(LOOKUPS_PER_BATCH)],
        ),
        now_stat(
            "Grants pending",
            "Queries waiting for a workspace memory grant now. Healthy: "
            f"{num(lim.memory.memory_grants_pending.max)}; the alert "
            f"fires when more than {num(lim.memory.memory_grants_pending.max)} wait for "
            f"{lim.memory.memory_grants_pending.for_}.",
            "short",
            m("mssql_memory_grants_pending"),
            thresholds=Thresholds.healthy_below(lim.grants_alarm),
            links=[lim.runbook(GRANTS_PENDING)],
        ),
        now_stat(
            "Firing alerts",
            "Alerts of this instance firing in Prometheus now (ALERTS). Healthy: 0. The red marks on the "
            "time series show when each fired; the runbooks are linked in the dashboard header.",
            "short",
            f'count(ALERTS{{alertstate="firing", {INSTANCE}}}) or vector(0)',
            thresholds=Thresholds.healthy_below(ANY),
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
            ("mssql_free_list_stalls_total", "stalls/s"),
            "stalls",
            lim.memory.free_list_stalls_per_second.max,
            FREE_LIST_STALLS,
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
            ("mssql_lazy_writes_total", "lazy writes/s"),
            "lazy",
            lim.memory.lazy_writes_per_second.max,
            LAZY_WRITES,
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
                Query(m("mssql_buffer_node_page_life_expectancy_seconds"), "node {{node}}"),
                Query(m(lim.rule("ple_floor")), "node {{node}} floor"),
                Query(m("mssql_page_life_expectancy_seconds"), "instance (harmonic mean of the nodes)"),
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
                Query(rate("mssql_page_reads_total"), "reads/s"),
                Query(rate("mssql_page_writes_total"), "writes/s"),
                Query(m(lim.rule("page_io")), f"reads + writes, {w} average"),
            ],
            thresholds=Thresholds.healthy_below(lim.memory.page_io_per_second.max),
            min=0,
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
            [Query(m("mssql_memory_free_bytes"), "free memory")],
            thresholds=Thresholds.healthy_above(lim.memory.free_memory_bytes.min),
            min=0,
            links=[lim.runbook(FREE_MEMORY_LOW)],
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
            [Query(with_workload(m("mssql_buffer_cache_hit_ratio")), "hit ratio ({{workload}} target)")],
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
        ),
        Panel(
            "timeseries",
            "Batch requests",
            'Batch requests per second (SQL Statistics "Batch Requests/sec"): the workload the other '
            "counters are measured against. No desired range; the lookups-per-batch alert counts only above "
            f"{num(lim.memory.page_lookups_per_batch_request.min_batch_requests_per_second)} batch/s.",
            "reqps",
            [
                Query(rate("mssql_batch_requests_total"), "batches/s"),
                Query(m(lim.rule("batches")), f"{w} average"),
            ],
            min=0,
        ),
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
                Query(m("mssql_memory_target_bytes"), "target"),
                Query(m("mssql_memory_total_bytes"), "total"),
                Query(m("mssql_memory_database_cache_bytes"), "database cache"),
                Query(m("mssql_memory_stolen_bytes"), "stolen"),
            ],
            min=0,
        ),
        Panel(
            "timeseries",
            "Memory grants pending and outstanding",
            "Queries waiting for a workspace memory grant (pending) and holding one (outstanding). Healthy: "
            f"{num(lim.memory.memory_grants_pending.max)} pending; the red area starts above that. Pending "
            "grants mean queries "
            "wait for memory before they can even start.",
            "short",
            [
                Query(m("mssql_memory_grants_pending"), "pending"),
                Query(m("mssql_memory_grants_outstanding"), "outstanding"),
            ],
            thresholds=Thresholds.healthy_below(lim.grants_alarm),
            min=0,
            links=[lim.runbook(GRANTS_PENDING)],
        ),
    ]


# A reference line over a stacked panel (target, total, physical memory): not stacked and not filled, or
# its fill tints every area under it.
UNSTACKED = (
    ("custom.stacking", {"group": "A", "mode": "none"}),
    ("custom.fillOpacity", 0),
    ("custom.lineWidth", 2),
)
STACKED = {"stacking": {"group": "A", "mode": "normal"}, "fillOpacity": 60, "lineWidth": 1}


def memory_row_who_holds(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Who holds the memory"."""
    parts = {
        "database cache": "mssql_memory_database_cache_bytes",
        "plan cache (SQL cache)": "mssql_memory_sql_cache_bytes",
        "locks": "mssql_memory_lock_bytes",
        "log pool": "mssql_memory_log_pool_bytes",
        "optimizer": "mssql_memory_optimizer_bytes",
        "connections": "mssql_memory_connection_bytes",
        "free": "mssql_memory_free_bytes",
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
                    f"clamp_min(\n  {m('mssql_memory_stolen_bytes')}\n  - ({named_stolen}),\n  0\n)",
                    "other stolen",
                ),
                Query(m(parts["free"]), "free"),
                Query(m("mssql_memory_target_bytes"), "target"),
                Query(m("mssql_memory_total_bytes"), "total"),
            ],
            width=24,
            min=0,
            custom=STACKED,
            overrides=[override("target", *UNSTACKED), override("total", *UNSTACKED)],
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
                Query(f"{m('mssql_memory_clerk_bytes')} > 0", "{{clerk}}"),
                Query(m("mssql_memory_total_bytes"), "Total Server Memory"),
            ],
            width=24,
            height=10,  # sixteen clerk names: the legend needs three lines
            min=0,
            custom=STACKED,
            overrides=[override("Total Server Memory", *UNSTACKED)],
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
            "short",
            [Query(f"{rate('mssql_wait_seconds_total')} > 0", "{{wait_type}}")],
            width=24,
            min=0,
            links=[lim.runbook(GRANT_WAITS)],
        ),
        Panel(
            "timeseries",
            "Query workspace: granted vs maximum",
            "Workspace memory granted to running queries (sorts, hashes) against the most the memory "
            "manager will grant (Memory Manager \"Granted\" and \"Maximum Workspace Memory\"). Healthy: "
            "granted well under maximum. Near it, new queries queue for grants (pending grants, "
            "RESOURCE_SEMAPHORE waits) and may time out.",
            "bytes",
            [
                Query(m("mssql_memory_workspace_granted_bytes"), "granted"),
                Query(m("mssql_memory_workspace_maximum_bytes"), "maximum"),
            ],
            width=8,
            min=0,
            links=[lim.runbook(GRANTS_PENDING), lim.runbook(GRANT_TIMEOUTS)],
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
                    f"{rate('mssql_sql_recompilations_total')}\n/ ({rate('mssql_batch_requests_total')} > 0)",
                    "re-compilations",
                ),
            ],
            width=8,
            min=0,
        ),
        Panel(
            "timeseries",
            "Foreign memory per NUMA node",
            'Memory each node uses from other nodes (Memory Node "Foreign Node Memory (KB)"). Healthy: near '
            "0. Growth means the node ran short of local memory; every access to it pays the cross-node "
            "latency (compare the remote page lookups of the NUMA row).",
            "bytes",
            [Query(m("mssql_memory_node_foreign_bytes"), "node {{node}}")],
            width=8,
            min=0,
        ),
    ]


def memory_row_pressure_from_outside(lim: Limits) -> list[Panel | Row]:
    """The memory dashboard's row "Pressure from outside"."""
    signals = {
        "OS low-memory signal": m("mssql_os_memory_low_signal"),
        "process physical memory low": m("mssql_process_physical_memory_low"),
        "committed target under committed": (
            f"{m('mssql_memory_committed_target_bytes')}\n< bool {m('mssql_memory_committed_bytes')}"
        ),
    }
    return [
        Row("Pressure from outside"),
        Panel(
            "timeseries",
            "The box's memory: SQL Server, other processes, available",
            "Physical memory of the box split into what SQL Server's process holds (working set, locked "
            "and large pages), what everything else holds (other processes, the OS, a VM balloon) and "
            "what is available. Healthy: available comfortably above zero and the other processes "
            "steady. Available falling while SQL Server is not growing means something else takes memory.",
            "bytes",
            [
                Query(m("mssql_process_physical_memory_bytes"), "SQL Server"),
                Query(
                    f"clamp_min(\n  {m('mssql_os_physical_memory_bytes')}\n"
                    f"  - {m('mssql_os_available_physical_memory_bytes')}\n"
                    f"  - {m('mssql_process_physical_memory_bytes')},\n  0\n)",
                    "other processes",
                ),
                Query(m("mssql_os_available_physical_memory_bytes"), "available"),
                Query(m("mssql_os_physical_memory_bytes"), "physical memory"),
            ],
            width=8,
            min=0,
            custom=STACKED,
            overrides=[override("physical memory", *UNSTACKED)],
            links=[lim.runbook(EXTERNAL_PRESSURE), lim.runbook(MAX_MEMORY_DEFAULT)],
        ),
        Panel(
            "timeseries",
            "Signals of pressure from outside",
            "Each signal 1 while on: the OS low-memory signal (sys.dm_os_sys_memory), SQL Server's "
            "process-physical-memory-low flag (sys.dm_os_process_memory), and the memory manager's "
            "committed target under what it has committed (sys.dm_os_sys_info). Healthy: all 0. "
            f"{EXTERNAL_PRESSURE} fires after {lim.memory.external_pressure.for_} with any of them on; "
            f"{MEMORY_PRESSURE}'s description then says the pressure comes from outside.",
            "short",
            [Query(expr, name) for name, expr in signals.items()],
            thresholds=Thresholds.healthy_below(ANY),
            width=8,
            min=0,
            max=1,
            links=[lim.runbook(EXTERNAL_PRESSURE)],
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
                Query(m("mssql_memory_target_bytes"), "target"),
                Query(m("mssql_memory_total_bytes"), "total"),
                Query(m("mssql_memory_committed_target_bytes"), "committed target"),
                Query(
                    f"{m('mssql_config_max_server_memory_bytes')}\n"
                    f"< {m('mssql_os_physical_memory_bytes')}",
                    "max server memory",
                ),
                Query(m("mssql_os_physical_memory_bytes"), "physical memory"),
            ],
            width=8,
            min=0,
            links=[lim.runbook(TARGET_PULLED_DOWN)],
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
            [Query(f"{m('mssql_buffer_node_database_pages')} * {num(lim.page_bytes)}", "node {{node}}")],
            min=0,
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
                    f"{rate('mssql_buffer_node_remote_page_lookups_total')}\n/ (\n"
                    f"  {rate('mssql_buffer_node_local_page_lookups_total')}\n"
                    f"  + {rate('mssql_buffer_node_remote_page_lookups_total')}\n  > 0\n)",
                    "node {{node}}",
                )
            ],
            min=0,
            max=1,
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
                Query(m("mssql_hybrid_buffer_pool_configured"), "configured", instant=True),
                Query(m("mssql_hybrid_buffer_pool_enabled"), "in effect", instant=True),
                Query(m("mssql_hybrid_buffer_pool_databases"), "databases with it on", instant=True),
            ],
            width=8,
            overrides=[override("databases with it on", ("unit", "short"))],
            options={"colorMode": "none", "textMode": "value_and_name"},
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
                Query(m("mssql_hybrid_buffer_pool_eligible_bytes"), "{{volume}}: eligible", instant=True),
                Query(
                    f"{m('mssql_hybrid_buffer_pool_eligible_bytes')}\n"
                    f"* on (job, instance) group_left () {m('mssql_hybrid_buffer_pool_enabled')}",
                    "{{volume}}: eligible while in effect",
                    instant=True,
                ),
            ],
            width=16,
            min=0,
            no_value="No PMEM (DAX) volume known on this instance",
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
            [Query(m("mssql_scrape_duration_seconds"), "scrape")],
            min=0,
        ),
        Panel(
            "stat",
            "Collectors",
            "Whether each section of the last scrape succeeded (mssql_exporter_collector_success). Healthy: "
            "all ok. A failing collector's metrics are missing (often a permission); the others still "
            "export.",
            "bool_yes_no",
            [Query(m("mssql_exporter_collector_success"), "{{collector}}", instant=True)],
            mappings=value_map({0: ("failing", RED), 1: ("ok", GREEN)}),
            options={"textMode": "value_and_name", "colorMode": "background"},
            links=[lim.runbook(COLLECTOR_FAILING)],
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
        *memory_row_exporter(lim),
    ]
    return Dashboard(
        uid=MEMORY_UID,
        title="SQL Server memory pressure",
        description="One SQL Server instance: Dell Table 4 counters against their desired ranges, page life "
        "expectancy per NUMA node against its scaled floor, memory manager, who holds the memory and "
        "pressure from outside, Hybrid Buffer Pool.",
        tags=[*TAGS, "memory"],
        items=items,
        variables=variables(lim, multi=False),
        annotations=annotations(),
        links=header_links(lim, MEMORY_UID),
        refresh="1m",
    )


# --- 2. tempdb and SSD endurance ---------------------------------------------------------------------


POOL = 'pool=~"$pool"'
NO_POOLS = "No SSD pools configured for this instance (ssd_pools in the exporter's config)"
POOL_LABELS = "job, instance, pool, source"
INSTANCE_LABELS = "job, instance"


def enough_data(lim: Limits, expr: str, pool: str = POOL) -> str:
    """`expr` only where its rate rests on endurance.projection_min_coverage of data: a projection from a
    few minutes of a young Prometheus is noise, and must never read as a healthy green."""
    return (
        f"{expr}\nand on ({POOL_LABELS}) {m(lim.rule('pool_long_coverage'), pool)}"
        f" >= {num(lim.endurance.projection_min_coverage_seconds)}"
    )


def coverage_thresholds(lim: Limits) -> Thresholds:
    # Orange, not red: a young pool is not a fault, only too new to project.
    return Thresholds((Step(ORANGE, None), Step(GREEN, lim.endurance.projection_min_coverage_seconds)))


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
        ("Write rate", f"max by ({POOL_LABELS}) ({long_rate})", "Bps"),
        ("Planned life", per_source("mssql_ssd_pool_planned_lifetime_seconds"), "s"),
        (
            "Projected writes",  # over the planned life: the full header was cut at 1,600 px
            f"max by ({POOL_LABELS}) (\n  {long_rate}\n"
            "  * on (job, instance, pool) group_left () "
            f"{m('mssql_ssd_pool_planned_lifetime_seconds', pool)}\n"
            f"  and on ({POOL_LABELS}) {coverage} >= {num(lim.endurance.projection_min_coverage_seconds)}\n)",
            "decbytes",
        ),
        ("Rated endurance", per_source("mssql_ssd_pool_rated_endurance_bytes"), "decbytes"),
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
            per_source("mssql_ssd_pool_in_service_timestamp_seconds", " * 1000"),
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
            ("custom.displayMode", "color-background"),
        )
    )
    overrides.append(
        override(
            "Rating used up in",
            (
                "thresholds",
                remaining_ranges(lim).json(),
            ),
            ("custom.displayMode", "color-text"),
        )
    )
    overrides.append(
        override(
            "Rate rests on",
            ("thresholds", coverage_thresholds(lim).json()),
            ("custom.displayMode", "color-text"),
        )
    )
    if per_instance:
        overrides.append(instance_links())
        overrides.append(override("job", ("custom.hidden", True)))  # kept for the links, not shown
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
        f"{duration(lim.endurance.remaining_warning_seconds)}. Host writes are not NAND writes: where the "
        "exporter reads the drives (drive_health), 'Drives imply' is the endurance their own wear implies "
        "(host bytes ÷ life used) and 'Drives at 100% in' when they will say they are worn out, at the "
        f"{lim.pool_long_window} rate of their own counters; empty without drive health."
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
    )


def share_ranges(lim: Limits) -> Thresholds:
    """A pool's projected share of its rating: orange from the budget, red from exhaustion."""
    return Thresholds.healthy_below(lim.endurance.exhaustion_share, warn=lim.endurance.budget_high_share)


def remaining_ranges(lim: Limits) -> Thresholds:
    """Time until the rated bytes are written: orange under the warning, red under the critical."""
    return Thresholds.healthy_above(
        lim.endurance.remaining_critical_seconds, warn=lim.endurance.remaining_warning_seconds
    )


def endurance_row_now(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "Now"."""
    share_thresholds = share_ranges(lim)
    remaining_thresholds = remaining_ranges(lim)
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
            [
                Query(
                    f"{m(lim.rule('tempdb_long'))}\nand on ({INSTANCE_LABELS}) "
                    f"{m(lim.rule('tempdb_long_coverage'))} >= "
                    f"{num(lim.endurance.projection_min_coverage_seconds)}",
                    instant=True,
                )
            ],
            width=6,
            height=4,
            no_value=f"Shown after {duration(lim.endurance.projection_min_coverage_seconds)} of data",
        ),
        Panel(
            "stat",
            "Highest projected share of rated endurance",
            f"The worst pool's projected share of its rated endurance over its planned life, at the "
            f"{lim.pool_long_window} write rate. {share_text}",
            "percentunit",
            [
                Query(
                    f"max without (pool, source) ({enough_data(lim, m(lim.rule('share'), POOL))})",
                    instant=True,
                )
            ],
            width=6,
            height=4,
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
            thresholds=share_thresholds,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
        ),
        Panel(
            "stat",
            "Shortest time until a rating is used up",
            f"Time until the first pool has written its rated bytes at the {lim.pool_long_window} rate. "
            f"Healthy: longer than {duration(lim.endurance.remaining_warning_seconds)} (orange under it: "
            "order drives; red "
            f"under {duration(lim.endurance.remaining_critical_seconds)}), or past the planned retirement.",
            "s",
            [
                Query(
                    f"min without (pool, source) ({enough_data(lim, m(lim.rule('remaining'), POOL))})",
                    instant=True,
                )
            ],
            width=6,
            height=4,
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
            thresholds=remaining_thresholds,
            links=[lim.runbook(ENDURANCE_REMAINING)],
        ),
    ]


def endurance_row_tempdb(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "tempdb"."""
    short_w = lim.tempdb_short_window
    return [
        Row("tempdb"),
        Panel(
            "timeseries",
            "tempdb writes per file",
            "Bytes per second written to each tempdb file (sys.dm_io_virtual_file_stats). Healthy: spread "
            "evenly over the data files, which should be equal in size; one file taking most writes points "
            "at unequal sizes or autogrowth.",
            "Bps",
            [
                Query(
                    f"sum by (file, volume) ({rate('mssql_tempdb_file_written_bytes_total')})",
                    "{{file}} ({{volume}})",
                )
            ],
            min=0,
            # Stacked: evenly spread files are equal bands (eight identical lines hid each other), and the
            # top edge is tempdb's total.
            custom=STACKED,
        ),
        Panel(
            "timeseries",
            "tempdb writes per volume",
            f"tempdb writes summed per volume, with this instance's tempdb total averaged over {short_w} and "
            f"{lim.tempdb_long_window}. No healthy range of its own: the volumes are where the wear lands, "
            "so put them in SSD pools to weigh it against the drives' rating.",
            "Bps",
            [
                Query(f"sum by (volume) ({rate('mssql_tempdb_file_written_bytes_total')})", "{{volume}}"),
                Query(m(lim.rule("tempdb_short")), f"all tempdb files, {short_w} average"),
                Query(m(lim.rule("tempdb_long")), f"all tempdb files, {lim.tempdb_long_window} average"),
            ],
            min=0,
        ),
        Panel(
            "timeseries",
            "tempdb write latency per file",
            "Average wait per write to each tempdb file (write stall time ÷ writes). Healthy: flat and close "
            "to the drives' datasheet latency; rising latency with rising writes means the volume is "
            "saturated.",
            "s",
            [
                Query(
                    f"{rate('mssql_tempdb_file_write_stall_seconds_total')}\n"
                    f"/ ({rate('mssql_tempdb_file_writes_total')} > 0)",
                    "{{file}} ({{volume}})",
                )
            ],
            min=0,
        ),
        Panel(
            "timeseries",
            "Database file writes per volume",
            "Bytes per second SQL Server writes to all its database files (data, log, tempdb) per volume and "
            f"file type, and per volume over {lim.window} (the recording rule). This is the sqlserver source "
            "of the pools; the host's own counters are below. No healthy range of its own: the SSD pools "
            "below weigh it against the drives' rating.",
            "Bps",
            [
                Query(
                    f"sum by (volume, file_type) ({rate('mssql_volume_written_bytes_total')})",
                    "{{volume}} {{file_type}}",
                ),
                Query(m(lim.rule("volume")), f"{{{{volume}}}} all files, {lim.window} average"),
            ],
            min=0,
        ),
        Panel(
            "timeseries",
            "Host disk writes",
            "Bytes per second written to each physical disk of the host whose exporter is chosen as Host "
            "(mssql_host_disk_written_bytes_total, exporter started with --collector.host on the SQL Server "
            "host). The Host variable is not tied to the chosen instance, since no metric says which "
            f"exporter runs on its host: it starts at {NO_HOST} (this panel empty); choose the exporter on "
            "this instance's host. Counts every writer and each mirror member; compare with the database "
            "file writes to see what the OS, backups and RAID add. No healthy range of its own: put the "
            "disks in an SSD pool (host_disks) to weigh them against their rating. Empty when no exporter "
            "runs with --collector.host.",
            "Bps",
            [
                Query(
                    f"sum by (instance, device) (rate(mssql_host_disk_written_bytes_total"
                    f"{{{lim.spec.exporter_selector}, {HOST}}}"
                    "[$__rate_interval]))",
                    "{{device}} ({{instance}})",
                )
            ],
            width=24,
            min=0,
        ),
    ]


def endurance_row_ssd_pools(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "SSD pools"."""
    share_thresholds = share_ranges(lim)
    remaining_thresholds = remaining_ranges(lim)
    share_text = (
        f"Healthy: under {pct(lim.endurance.budget_high_share)} of the rating (orange from there; the budget "
        "alert), "
        f"and never past {pct(lim.endurance.exhaustion_share)} (red: the drives wear out before the planned "
        "life ends)."
    )
    return [
        Row("SSD pools"),
        Panel(
            "timeseries",
            f"Pool write rate, {lim.pool_short_window} and {lim.pool_long_window} averages",
            f"Bytes per second written to each SSD pool, per source (sqlserver: SQL Server's database files "
            f"on the pool's volumes; host: the host's counters of the pool's disks), averaged over "
            f"{lim.pool_short_window} and {lim.pool_long_window}. The {lim.pool_long_window} rate drives the "
            f"projection; a short window overstates bursty loads. While Prometheus holds less than the "
            f"window (a new install, a new pool), each average is over the span it does hold: see "
            f"'Data the projection rests on'. Healthy: a rate the gauge beside it keeps "
            f"under {pct(lim.endurance.budget_high_share)} of the rating.",
            "Bps",
            [
                Query(
                    m(lim.rule("pool_short"), POOL), f"{{{{pool}}}} {{{{source}}}}, {lim.pool_short_window}"
                ),
                Query(m(lim.rule("pool_long"), POOL), f"{{{{pool}}}} {{{{source}}}}, {lim.pool_long_window}"),
            ],
            width=8,
            min=0,
            no_value=NO_POOLS,
        ),
        Panel(
            "gauge",
            "Projected share of the rating",
            f"Per pool and source: {lim.pool_long_window} write rate x planned lifetime ÷ rated endurance. "
            f"{share_text} The marks sit at {pct(lim.endurance.budget_high_share)} and "
            f"{pct(lim.endurance.exhaustion_share)}. "
            f"Shown once the rate rests on {duration(lim.endurance.projection_min_coverage_seconds)} of "
            "data.",
            "percentunit",
            [Query(enough_data(lim, m(lim.rule("share"), POOL)), "{{pool}} ({{source}})", instant=True)],
            width=6,
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
            thresholds=share_thresholds,
            min=0,
            max=lim.endurance.exhaustion_share * GAUGE_HEADROOM,
            links=[lim.runbook(ENDURANCE_BUDGET), lim.runbook(ENDURANCE_EXHAUSTION)],
        ),
        Panel(
            "stat",
            "Time until the rated bytes are written",
            "Per pool and source: (rated endurance - bytes written so far: known reading + counted + "
            "extrapolated over the gaps) ÷ the "
            f"{lim.pool_long_window} write rate. Healthy: more than "
            f"{duration(lim.endurance.remaining_warning_seconds)} "
            "(orange under it: order drives; red under "
            f"{duration(lim.endurance.remaining_critical_seconds)}). Infinite when "
            "nothing is written. Shown once the rate rests on "
            f"{duration(lim.endurance.projection_min_coverage_seconds)} of "
            "data.",
            "s",
            [Query(enough_data(lim, m(lim.rule("remaining"), POOL)), "{{pool}} ({{source}})", instant=True)],
            width=5,
            thresholds=remaining_thresholds,
            options={"textMode": "value_and_name"},
            links=[lim.runbook(ENDURANCE_REMAINING)],
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
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
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
        ),
        pool_table(lim, "Endurance per pool, in the shape of Micron's Table 4", per_instance=False),
    ]


def drive_coverage(lim: Limits, expr: str) -> str:
    """`expr` (a pool figure without `source`) once the drives' own write rate rests on enough data."""
    coverage = m(lim.rule("pool_long_coverage"), f'{POOL}, source="drive"')
    return (
        f"{expr}\nand on (job, instance, pool) {coverage}"
        f" >= {num(lim.endurance.projection_min_coverage_seconds)}"
    )


def endurance_row_drives(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "Drives": what the drives say about themselves (drive_health)."""
    d = lim.spec.drives
    own = f"{lim.spec.exporter_selector}, {HOST}"
    no_drives = (
        "No drive health: the exporter chosen as Host reads no drives (drive_health in its config), or no "
        "pool of this instance links them"
    )
    factor = d.disagreement_factor
    young = (
        f"No pool whose drives all report {pct(d.implied_min_life_used)} used, with "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of data"
    )
    columns = [
        ("Life used", "mssql_drive_life_used_ratio", "percentunit"),
        ("Spare", "mssql_drive_available_spare_ratio", "percentunit"),
        ("Spare min", "mssql_drive_available_spare_threshold_ratio", "percentunit"),
        ("Critical bits", "mssql_drive_critical_warning", "none"),
        ("SMART ok", "mssql_drive_smart_passed", "none"),
        ("Temp", "mssql_drive_temperature_celsius", "celsius"),
        ("Write ampl.", "mssql_drive_write_amplification_ratio", "none"),
    ]
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _, _) in enumerate(columns)}
    wear = Thresholds.healthy_below(lim.endurance.exhaustion_share, warn=d.life_used_warning)
    return [
        Row("Drives: what they say about themselves"),
        Panel(
            "timeseries",
            "Projected share: from the rating and from the drives' wear",
            f"Per pool, the {lim.pool_long_window} write rate of the drives' own counters (source=drive) x "
            "planned life, divided two ways: by the rated endurance (drives x TBW), and by the endurance "
            "the drives imply (their host bytes ÷ the share of life they say they used, once each has used "
            f"{pct(d.implied_min_life_used)}). Healthy: both under "
            f"{pct(lim.endurance.budget_high_share)}. Apart, the rating does not describe this workload: "
            "trust the drives' line (their wear follows the flash, write amplification included).",
            "percentunit",
            [
                Query(
                    enough_data(lim, m(lim.rule("share"), f'{POOL}, source="drive"')),
                    "{{pool}} from the rating",
                ),
                Query(drive_coverage(lim, m(lim.rule("drive_share"), POOL)), "{{pool}} from the drives"),
            ],
            width=12,
            thresholds=share_ranges(lim),
            min=0,
            no_value=young,
            links=[lim.runbook(names_.DRIVE_WEAR_DISAGREES)],
        ),
        Panel(
            "stat",
            "The drives say 100% in",
            f"Per pool: (endurance the drives imply - their host bytes) ÷ the {lim.pool_long_window} write "
            "rate of their own counters: when the drives will report 100% of their life used. Healthy: more "
            f"than {duration(lim.endurance.remaining_warning_seconds)} (orange under it, red under "
            f"{duration(lim.endurance.remaining_critical_seconds)}). Empty until every drive of the pool has "
            f"used {pct(d.implied_min_life_used)}.",
            "s",
            [Query(drive_coverage(lim, m(lim.rule("drive_remaining"), POOL)), "{{pool}}", instant=True)],
            width=6,
            thresholds=remaining_ranges(lim),
            options={"textMode": "value_and_name"},
            no_value=young,
        ),
        Panel(
            "stat",
            "Endurance the drives imply ÷ rated",
            "Per pool: 1 when the drives wear exactly as their rating says for the bytes written; under 1 "
            "they wear faster (more write amplification than the rating assumed), over 1 slower. Healthy: "
            f"from {num(round(1 / factor, 3))} to {num(factor)} (orange under: plan from the drives' "
            "projection, not the rating).",
            "none",
            [Query(m(lim.rule("drive_to_rated"), POOL), "{{pool}}", instant=True)],
            width=6,
            decimals=2,
            thresholds=Thresholds((Step(ORANGE, None), Step(GREEN, 1 / factor), Step(BLUE, factor))),
            options={"textMode": "value_and_name"},
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_WEAR_DISAGREES)],
        ),
        Panel(
            "bargauge",
            "Drive life used",
            "Share of its rated life each drive says it has used (NVMe percentage used, or its family's wear "
            "attribute), read by the exporter chosen as Host. Healthy: under "
            f"{pct(d.life_used_warning)} (orange from there: order the replacement; red past "
            f"{pct(lim.endurance.exhaustion_share)}: past its rating). Not capped at the rating.",
            "percentunit",
            [Query(f"mssql_drive_life_used_ratio{{{own}}}", "{{device}} {{model}}", instant=True)],
            width=8,
            min=0,
            max=lim.endurance.exhaustion_share,
            thresholds=wear,
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_WEAR_HIGH)],
        ),
        Panel(
            "timeseries",
            "Drive reading age",
            "Seconds since each drive's last good smartctl reading. Healthy: under the read interval (10 "
            f"minutes by default); the alert fires past {duration(d.reading_stale_seconds)}.",
            "s",
            [Query(f"mssql_drive_reading_age_seconds{{{own}}}", "{{device}}")],
            width=16,
            min=0,
            thresholds=Thresholds.healthy_below(d.reading_stale_seconds),
            no_value=no_drives,
            links=[lim.runbook(names_.DRIVE_HEALTH_UNREAD)],
        ),
        Panel(
            "table",
            "Drive health",
            "One row per drive, as smartctl last read it (the exporter chosen as Host). Healthy: spare "
            "above its minimum (the drive's own threshold), critical bits 0 (NVMe: 1 spare, 2 temperature, "
            "4 reliability, 8 read-only, 16 backup), SMART ok 1, write amplification near 1 (flash writes ÷ "
            "host writes, where the drive reports it).",
            "none",
            # One row per drive: by these labels only, so the columns' series (each with its own
            # metric name) join into one row; a drive in no pool has pool "".
            [
                Query(f"max by (device, model, serial, pool) ({metric}{{{own}}})", instant=True, table=True)
                for _, metric, _ in columns
            ],
            width=24,
            overrides=[override(name, ("unit", unit)) for name, _, unit in columns],
            transformations=merge_and_organize(
                renames,
                ["device", "model", "pool"] + [name for name, _, _ in columns],
                # The serial is on the drive series (when not redacted); the table needs the room.
                ("Time", "__name__", "job", "instance", "serial"),
            ),
            links=[lim.runbook(names_.DRIVE_CRITICAL_WARNING), lim.runbook(names_.DRIVE_SPARE_LOW)],
        ),
    ]


def headroom_stat(
    lim: Limits,
    title: str,
    what: str,
    red_means: str,
    rule_and_alert: tuple[str, str],
    width: int,
    height: int,
) -> Panel:
    """A tempdb headroom ratio against the one pair of limits its alert uses."""
    t = lim.spec.tempdb
    rule, alert_name = rule_and_alert
    return Panel(
        "stat",
        title,
        f"{what} Healthy: above {pct(t.headroom_warning_share)} (orange under it, red under "
        f"{pct(t.headroom_critical_share)}: {red_means}).",
        "percentunit",
        [Query(m(lim.rule(rule)), instant=True)],
        width=width,
        height=height,
        decimals=1,
        thresholds=Thresholds.healthy_above(t.headroom_critical_share, warn=t.headroom_warning_share),
        links=[lim.runbook(alert_name)],
    )


def endurance_row_tempdb_space(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "tempdb space": what fills tempdb, its room and its layout."""
    t = lim.spec.tempdb
    data = 'file_type="data"'
    size = f"sum({m('mssql_tempdb_file_size_bytes', data)})"
    layout = [
        ("Data files", "mssql_tempdb_data_files"),
        ("CPUs", "mssql_logical_cpus"),
        ("Equal size", "mssql_tempdb_data_files_equal_size"),
        ("Equal growth", "mssql_tempdb_data_files_equal_growth"),
        ("% growth", "mssql_tempdb_percent_growth_files"),
        ("System volume", "mssql_tempdb_system_volume_files"),
    ]
    renames = {f"Value #{chr(ord('A') + i)}": name for i, (name, _) in enumerate(layout)}
    return [
        Row("tempdb space"),
        Panel(
            "timeseries",
            "What fills tempdb's data files",
            "tempdb's data files by what holds their pages (sys.dm_db_file_space_usage), stacked, against "
            "the files' size and what autogrowth can still add (up to each file's maximum and the volume's "
            "free space, in whole growths of all the files at once). Healthy: unallocated a good part of "
            "the size, the version store flat. A rising "
            "version store is a transaction left open; internal objects jumping are sorts and hashes "
            "spilling (queries short of workspace memory).",
            "bytes",
            [
                Query(f"sum by (usage) ({m('mssql_tempdb_file_space_bytes')})", "{{usage}}"),
                Query(size, "data files' size"),
                Query(f"{size} + sum({m(lim.rule('tempdb_room'))})", "size + growth room"),
            ],
            width=12,
            height=9,
            min=0,
            custom={"stacking": {"group": "A", "mode": "normal"}, "fillOpacity": 40},
            overrides=[override(name, *UNSTACKED) for name in ("data files' size", "size + growth room")],
        ),
        headroom_stat(
            lim,
            "tempdb headroom",
            "Free inside tempdb's data files plus what autogrowth can still add, as a share of that plus "
            "what is allocated.",
            "queries needing tempdb are about to fail with error 1105",
            ("tempdb_headroom_ratio", names_.TEMPDB_HEADROOM_LOW),
            width=4,
            height=9,
        ),
        Panel(
            "stat",
            "tempdb full in",
            f"At the headroom's trend over the last {t.projection_window}: when tempdb is full. Empty while "
            "the headroom does not shrink (healthy). Red under "
            f"{duration(t.projection_horizon_seconds)}: the projection alert's horizon.",
            "s",
            [Query(m(lim.rule("tempdb_exhausted_in")), instant=True)],
            width=4,
            height=9,
            thresholds=Thresholds.healthy_above(t.projection_horizon_seconds),
            no_value="Not shrinking",
            links=[lim.runbook(names_.TEMPDB_PROJECTED_FULL)],
        ),
        Panel(
            "stat",
            "tempdb layout checks failing",
            "How many of the layout checks fail: data files fewer than min(logical CPUs, "
            f"{num(t.advised_max_data_files)}), unequal sizes, unequal growth, files growing by a "
            "percentage, files on the system volume (the table beside says which). Healthy: 0.",
            "none",
            [Query(m(lim.rule("tempdb_layout")), instant=True)],
            width=4,
            height=9,
            thresholds=Thresholds((Step(GREEN, None), Step(ORANGE, ANY))),
            links=[lim.runbook(names_.TEMPDB_LAYOUT)],
        ),
        Panel(
            "table",
            "tempdb layout",
            f"The facts behind the checks. Healthy, as advised: as many data files as logical CPUs up to "
            f"{num(t.advised_max_data_files)}, equal sizes (1) and equal growth (1), no percent growth (0), "
            "nothing on the system volume (0; empty where the exporter cannot tell the volume).",
            "none",
            [Query(f"max by (job, instance) ({m(fact)})", instant=True, table=True) for _, fact in layout],
            width=12,
            height=5,
            transformations=merge_and_organize(
                renames, [name for name, _ in layout], ("Time", "__name__", "job", "instance")
            ),
            links=[lim.runbook(names_.TEMPDB_LAYOUT)],
        ),
        Panel(
            "timeseries",
            "tempdb version store",
            "Space the version store reserves in tempdb (row versions of snapshot isolation, read committed "
            "snapshot, online index builds, triggers). Healthy: flat or falling back; growing for an hour "
            f"and above {num(t.version_store_min_bytes / 2**30)} GiB is the alert.",
            "bytes",
            [Query(m(lim.rule("tempdb_version_store")), "version store")],
            width=12,
            height=5,
            min=0,
            links=[lim.runbook(names_.TEMPDB_VERSION_STORE)],
        ),
        Panel(
            "timeseries",
            "tempdb's log",
            "What tempdb's log holds (tempdb.sys.dm_db_log_space_usage) against its size. Healthy: used "
            "rises and falls back at each checkpoint, well under the size. Used climbing without falling "
            "back is a transaction left open (the reuse wait beside says ACTIVE_TRANSACTION): the log grows "
            "while it can (the headroom beside counts that room, usually far larger than the log) and then "
            "changes in tempdb fail with error 9002.",
            "bytes",
            [
                Query(m("mssql_tempdb_log_used_bytes"), "used"),
                Query(m("mssql_tempdb_log_size_bytes"), "log size"),
            ],
            width=12,
            height=7,
            min=0,
            links=[lim.runbook(names_.TEMPDB_LOG_HEADROOM_LOW)],
        ),
        headroom_stat(
            lim,
            "tempdb log headroom",
            "Free inside tempdb's log plus what its autogrowth can still add, as a share of that plus its "
            "size.",
            "changes in tempdb are about to fail with error 9002",
            ("tempdb_log_headroom_ratio", names_.TEMPDB_LOG_HEADROOM_LOW),
            width=6,
            height=7,
        ),
        Panel(
            "stat",
            "tempdb log reuse wait",
            "What keeps SQL Server from reusing tempdb's log (sys.databases.log_reuse_wait_desc). Healthy: "
            "NOTHING or CHECKPOINT. ACTIVE_TRANSACTION for long is a transaction left open: it holds the "
            "log and the version store.",
            "none",
            [Query(m("mssql_tempdb_log_reuse_wait"), "{{reason}}", instant=True)],
            width=6,
            height=7,
            options={"textMode": "name", "colorMode": "none"},
            links=[lim.runbook(names_.TEMPDB_LOG_HEADROOM_LOW)],
        ),
    ]


def endurance_row_latency(lim: Limits) -> list[Panel | Row]:
    """The endurance dashboard's row "I/O latency per volume": every volume and file type, not tempdb's."""
    io = lim.spec.io_latency
    legend = "{{volume}} {{file_type}}"
    return [
        Row("I/O latency per volume"),
        Panel(
            "timeseries",
            "Read latency per volume and file type",
            f"Average wait per read as SQL Server measures it (stall ÷ reads, over {lim.window}), per volume "
            f"and file type. Healthy: data reads under {num(io.data_read_max_seconds * 1000)} ms (the line; "
            "Microsoft's 10-15 ms bottleneck range), SSDs well under 1 ms. Rising with page reads while page "
            "life expectancy falls: memory pressure turned into I/O.",
            "s",
            [Query(m(lim.rule("read_latency")), legend)],
            width=12,
            min=0,
            thresholds=Thresholds.healthy_below(io.data_read_max_seconds),
            links=[lim.runbook(names_.DATA_READ_LATENCY)],
        ),
        Panel(
            "timeseries",
            "Write latency per volume and file type",
            f"Average wait per write (stall ÷ writes, over {lim.window}). Log writes hold every commit: "
            f"healthy under {num(io.log_write_max_seconds * 1000)} ms (the line), SSDs under 1 ms.",
            "s",
            [Query(m(lim.rule("write_latency")), legend)],
            width=12,
            min=0,
            thresholds=Thresholds.healthy_below(io.log_write_max_seconds),
            links=[lim.runbook(names_.LOG_WRITE_LATENCY)],
        ),
        Panel(
            "timeseries",
            "Operations per second per volume",
            f"Reads and writes per second per volume and file type (over {lim.window}). No healthy range of "
            f"its own; under {num(io.min_operations_per_second)} per second the latency alerts stay quiet "
            "(an idle volume's average is noise).",
            "iops",
            [
                Query(m(lim.rule("reads")), "{{volume}} {{file_type}} reads"),
                Query(m(lim.rule("writes")), "{{volume}} {{file_type}} writes"),
            ],
            width=12,
            min=0,
        ),
        Panel(
            "timeseries",
            "Average I/O size per volume",
            "Bytes per read and per write. Large reads are scans and read-ahead (64 KiB and up); log writes "
            "are as large as the commits they flush. No healthy range: a change of shape explains a change "
            "of latency.",
            "bytes",
            [
                Query(m(lim.rule("read_size")), "{{volume}} {{file_type}} reads"),
                Query(m(lim.rule("write_size")), "{{volume}} {{file_type}} writes"),
            ],
            width=12,
            min=0,
        ),
    ]


def endurance_row_capacity(lim: Limits) -> list[Panel | Row]:
    """tempdb's writes against the buffer pool over weeks, with memory changes marked (Micron)."""
    long_w = lim.tempdb_long_window
    tempdb_legend = f"tempdb writes ({long_w} average)"
    pool_legend = f"buffer pool ({long_w} average)"
    return [
        Row("Capacity review: tempdb writes and memory"),
        Panel(
            "timeseries",
            "tempdb writes against the buffer pool, last 8 weeks",
            f"tempdb's write rate ({lim.rule('tempdb_long')}, left axis) and the buffer pool's size "
            f"(Database Cache Memory, {lim.rule('buffer_pool_long')}, right axis), both averaged over "
            f"{long_w}, for the last 8 weeks whatever the dashboard's range. The purple marks are memory "
            "changes. Micron measured tempdb writes rising when SQL Server got more memory: after a mark, "
            "a higher write rate with a larger buffer pool is that effect, and it shortens the SSDs' life "
            "(see the pools below). No healthy range: compare before and after. Over 8 weeks Grafana "
            "plots a point every half hour or more, so a Prometheus younger than that shows nothing here "
            "yet; the tempdb rows above cover the dashboard's own range.",
            "Bps",
            [
                Query(m(lim.rule("tempdb_long")), tempdb_legend),
                Query(m(lim.rule("buffer_pool_long")), pool_legend),
            ],
            width=24,
            min=0,
            overrides=[override(pool_legend, ("unit", "bytes"), ("custom.axisPlacement", "right"))],
            time_from="8w",
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
        'label_values(mssql_ssd_pool_rated_endurance_bytes{job=~"$job", instance=~"$instance"}, pool)',
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
    host_metric = f"(mssql_host_disk_written_bytes_total{{{sel}}} or mssql_drive_smart_passed{{{sel}}})"
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
        annotations=[*annotations(), memory_change_annotation(lim)],
        links=header_links(lim, ENDURANCE_UID),
        time_from="now-7d",
    )


# --- 3. fleet capacity review ------------------------------------------------------------------------


def instance_links() -> Json:
    """Data links from an instance cell into the per-instance dashboards, with this range and source."""
    params = (
        "var-datasource=${datasource}&var-job=${__data.fields.job}&var-instance=${__value.raw}"
        "&${__url_time_range}"
    )
    return override(
        "instance",
        (
            "links",
            [
                {
                    "title": "Memory pressure of ${__value.raw}",
                    "url": f"{dashboard_url(MEMORY_UID)}?{params}",
                },
                {
                    "title": "tempdb and SSD endurance of ${__value.raw}",
                    "url": f"{dashboard_url(ENDURANCE_UID)}?{params}",
                },
            ],
        ),
    )


FLEET_POOLS_TITLE = "SSD pools of every instance"
MIN_COLUMN_PX = 80  # fits the widest value of each numeric column


def fleet_ple_ratio(lim: Limits) -> str:
    """Each instance's worst NUMA node's PLE over that node's floor."""
    return (
        f"min by (job, instance) (\n  {m('mssql_buffer_node_page_life_expectancy_seconds')}\n"
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
        f'alertstate="firing", {INSTANCE}}}))[$__range:$__interval]\n)\n* $__interval_ms / 60000\n'
        f"or on (job, instance) 0 * {by} ({m('mssql_up')})"
    )
    oltp_targets = m("mssql_target_info", 'workload="oltp"')
    return [
        ("Up", f"{by} ({m('mssql_up')})", "bool_yes_no", None),
        (
            "Build",
            f"max by (job, instance, version, edition, update_level) ({m('mssql_build_info')})",
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
        (f"tempdb ({lim.tempdb_long_window})", f"{by} ({m(lim.rule('tempdb_long'))})", "Bps", None),
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
            props += [("thresholds", thresholds.json()), ("custom.displayMode", "color-background")]
        overrides.append(override(name, *props))
    overrides.append(override("Up", ("mappings", value_map({0: ("down", RED), 1: ("up", GREEN)}))))
    overrides.append(instance_links())
    overrides.append(override("job", ("custom.hidden", True)))  # the links use it; one job is usual
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
        f"{lim.tempdb_long_window} average. Worst pool share: the projected share of rated endurance "
        f"of the instance's worst SSD pool; healthy under {pct(lim.endurance.budget_high_share)}, red from "
        f"{pct(lim.endurance.exhaustion_share)}, once its rate rests on "
        f"{duration(lim.endurance.projection_min_coverage_seconds)} of "
        f"data. Which pool that is: the next table, {FLEET_POOLS_TITLE!r}, lists "
        "every pool by instance, worst share first. Build and edition from SERVERPROPERTY.",
        "short",
        [Query(expr, instant=True, table=True) for _, expr, _, _ in columns],
        width=24,
        height=10,
        overrides=overrides,
        transformations=merge_and_organize(renames, order, ("Time", "__name__", build_value)),
        options={"sortBy": [{"desc": False, "displayName": "PLE ÷ floor"}]},
        # Grafana 9.3 gives a column at least 150 px unless told: 14 columns would overflow 1,600 px.
        custom={"minWidth": MIN_COLUMN_PX},
        links=[lim.runbook(MEMORY_PRESSURE)],
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
        ),
        Panel(
            "timeseries",
            f"tempdb writes per instance ({lim.tempdb_long_window} average)",
            f"Bytes per second written to tempdb by each instance, averaged over {lim.tempdb_long_window}: "
            "the steady wear each puts on its tempdb drives. No desired range of its own; compare with the "
            "pools' ratings.",
            "Bps",
            [Query(m(lim.rule("tempdb_long")), "{{instance}}")],
            min=0,
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
            no_value=f"No pool with {duration(lim.endurance.projection_min_coverage_seconds)} of data yet",
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
        annotations=annotations(),
        links=header_links(lim, FLEET_UID),
        time_from="now-7d",
    )


# --- output ------------------------------------------------------------------------------------------


def build(spec: Spec) -> dict[str, Json]:
    """The three dashboards, by uid."""
    lim = Limits.from_spec(spec)
    boards = [memory_dashboard(lim), endurance_dashboard(lim), fleet_dashboard(lim)]
    for board in boards:
        board.requires_grafana = MIN_GRAFANA_VERSION
    return {board.uid: board.json() for board in boards}


def render(spec: Spec) -> dict[str, str]:
    """File name -> JSON text, exactly as committed."""
    return {
        FILES[uid]: json.dumps(board, indent=2, ensure_ascii=False) + "\n"
        for uid, board in build(spec).items()
    }


def main(argv: list[str] | None = None) -> int:
    return generator_main(
        "python -m dashboards.generate", __doc__, DASHBOARDS_DIR, lambda _: render(load()), argv
    )


if __name__ == "__main__":
    sys.exit(main())
