"""The report's rows, read from a PromQL endpoint with queries that stay right on downsampled data.

Thanos answers each function from one of its downsampled aggregates (pkg/query/querier.go
aggrsFromFunc): max_over_time from `max`, min_over_time from `min`, count_over_time from `count`, and
increase/rate from `counter`, which keeps every reset, so these give the same figures on 1 h data as on
raw. A plain selector, last_over_time or timestamp() would read the sum/count average, so the report uses
none of them. Every window is at least 5 steps of the data's resolution where it is a rate, and the
per-step windows only ever ask "was anything there" or "how far apart were the lowest and the highest".

Queries, all on the exporter's own series (no recording rule is needed for the figures):
1. which pools wrote in the range (one instant query);
2. where memory moved and where data starts or stops (sparse range queries: only the flagged steps come
   back, so a year of 500 targets is a few kilobytes);
3. per instance and period, one instant query for the period's bytes written, memory, rating, planned
   life and the drives' wear.
The drives' implied endurance is the one recording rule read
(pool:mssql_ssd_drive_implied_endurance_bytes:sum); where it is absent the row says so instead of
leaving the cell silently empty.
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
from dataclasses import dataclass, field

from .arithmetic import duration, projected_life_bytes, share
from .periods import Break, MemoryPeriod, periods_between
from .promql import Answer, EndpointError, PromQLClient, finite, readable_warning

__all__ = ["Options", "Report", "Row", "build"]

WRITTEN = "mssql_ssd_pool_written_bytes_total"
RATED = "mssql_ssd_pool_rated_endurance_bytes"
PLANNED = "mssql_ssd_pool_planned_lifetime_seconds"
MAX_SERVER_MEMORY = "mssql_config_max_server_memory_bytes"
UP = "mssql_up"
TARGET_MEMORY = "mssql_memory_target_bytes"
DRIVE_LIFE_USED = "mssql_ssd_pool_drive_life_used_ratio"
IMPLIED_ENDURANCE_RULE = "pool:mssql_ssd_drive_implied_endurance_bytes:sum"
# Thanos' advice and the bundle's rule: a rate window holds at least five samples of the data it reads.
WINDOWS_PER_RESOLUTION = 5
# A gap in the data splits a period only when it is at least this many steps long.
GAP_STEPS = 3


@dataclass(frozen=True)
class Options:
    end: float  # unix seconds
    since_seconds: float
    step_seconds: float  # the grid periods are cut on; at least the data's resolution
    resolution_seconds: float  # the coarsest data the endpoint may answer from
    selector: str = 'job="mssql"'
    instance_regex: str = ".+"
    source: str = "sqlserver"
    memory_change_share: float = 0.05
    concurrency: int = 4


@dataclass
class Row:
    instance: str
    pool: str
    start: float | None = None
    end: float | None = None
    max_server_memory_bytes: float | None = None
    target_memory_bytes: float | None = None
    write_rate_bytes_per_second: float | None = None
    projected_life_bytes: float | None = None
    rated_bytes: float | None = None
    share: float | None = None
    drive_life_used: float | None = None
    drive_implied_endurance_bytes: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every figure there and nothing to say: a note always means something is missing."""
        return self.share is not None and not self.notes


@dataclass
class Report:
    options: Options
    rows: list[Row]
    warnings: list[str]  # endpoint warnings (partial responses), each once, as the endpoint wrote them
    # Instances scraped in the range with no pool counted from `options.source`: listed, not dropped, so
    # "no pools" is never read as "no such instance".
    unpooled: list[str] = field(default_factory=list)

    @property
    def data_start(self) -> float | None:
        """Where the first period begins: later than the requested range when the data is younger."""
        return min((row.start for row in self.rows if row.start is not None), default=None)

    @property
    def anything_computed(self) -> bool:
        return any(row.write_rate_bytes_per_second is not None for row in self.rows)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _window(seconds: float) -> str:
    return f"{round(seconds)}s"


class _Reader:
    def __init__(self, client: PromQLClient, options: Options) -> None:
        self.client = client
        self.options = options
        self.warnings: list[str] = []
        self._lock = threading.Lock()  # the per-instance queries run in threads

    def _keep(self, answer: Answer) -> Answer:
        with self._lock:
            for warning in answer.warnings:
                if warning not in self.warnings:
                    self.warnings.append(warning)
        return answer

    def instant(self, expr: str, at: float) -> Answer:
        return self._keep(self.client.instant(expr, at))

    def flagged(self, expr: str) -> dict[str, list[float]]:
        """Range query over the report's grid; the steps where `expr` had a value, per instance."""
        o = self.options
        steps = math.floor(o.since_seconds / o.step_seconds)
        start = o.end - steps * o.step_seconds
        answer = self._keep(self.client.range(expr, start, o.end, o.step_seconds))
        flagged: dict[str, list[float]] = {}
        for series in answer.series:
            flagged.setdefault(series.labels.get("instance", ""), []).extend(t for t, _ in series.points)
        return flagged


def _pools(reader: _Reader, selector: str) -> dict[tuple[str, str], None]:
    o = reader.options
    expr = (
        f"count by (instance, pool) (count_over_time({WRITTEN}{{{selector}, source={_quote(o.source)}}}"
        f"[{_window(o.since_seconds)}]))"
    )
    answer = reader.instant(expr, o.end)
    return {(s.labels.get("instance", ""), s.labels.get("pool", "")): None for s in answer.series}


def _unpooled(reader: _Reader, selector: str, pooled: set[str]) -> list[str]:
    """Instances with any exporter series in the range (mssql_up, or max server memory for backfilled
    history without it) but no pool counted from the report's source."""
    o = reader.options
    expr = (
        f'count by (instance) (count_over_time({{__name__=~"{UP}|{MAX_SERVER_MEMORY}", {selector}}}'
        f"[{_window(o.since_seconds)}]))"
    )
    seen = {s.labels.get("instance", "") for s in reader.instant(expr, o.end).series}
    return sorted(seen - pooled)


def _breaks(reader: _Reader, selector: str) -> dict[str, list[Break]]:
    o = reader.options
    step = _window(o.step_seconds)
    two_steps = _window(2 * o.step_seconds)
    grow = 1 + o.memory_change_share
    written = f'{WRITTEN}{{{selector}, source={_quote(o.source)}}}'
    breaks: dict[str, list[Break]] = {}

    def add(kind: str, flagged: dict[str, list[float]]) -> None:
        for instance, times in flagged.items():
            breaks.setdefault(instance, []).extend(Break(kind, t) for t in times)

    for metric in (MAX_SERVER_MEMORY, TARGET_MEMORY):
        series = f"{metric}{{{selector}}}"
        # The highest value of two steps above the lowest by more than the share: memory moved in
        # (t - 2 steps, t]. Two steps, so a move between two samples one step apart is inside one window.
        add(
            "memory",
            reader.flagged(
                f"max by (instance) (max_over_time({series}[{two_steps}]))"
                f" > max by (instance) (min_over_time({series}[{two_steps}])) * {grow!r}"
            ),
        )
    # Data starts or stops: a step with data after GAP_STEPS steps without, or the reverse. Shorter gaps
    # (a downsampled block can lack its first point at a block boundary; a scrape or two missed) stay
    # inside the period: the counter's increase spans them.
    gap = _window(GAP_STEPS * o.step_seconds)
    present = f"count by (instance) (count_over_time({written}[{step}]))"
    before = f"count by (instance) (count_over_time({written}[{gap}] offset {step}))"
    last_of_old = f"count by (instance) (count_over_time({written}[{step}] offset {gap}))"
    since_then = f"count by (instance) (count_over_time({written}[{gap}]))"
    add("data_starts", reader.flagged(f"{present} unless {before}"))
    add("data_stops", reader.flagged(f"{last_of_old} unless {since_then}"))
    return breaks


def _period_query(selector: str, instance: str, source: str, seconds: float) -> str:
    """One query for everything a row needs over (end - seconds, end], told apart by a `q` label."""
    inst = f"{selector}, instance={_quote(instance)}"
    w = _window(seconds)
    parts = {
        "written": f'sum by (pool) (increase({WRITTEN}{{{inst}, source={_quote(source)}}}[{w}]))',
        "rated": f"max by (pool) (max_over_time({RATED}{{{inst}}}[{w}]))",
        "planned": f"max by (pool) (max_over_time({PLANNED}{{{inst}}}[{w}]))",
        "msm_max": f"max_over_time({MAX_SERVER_MEMORY}{{{inst}}}[{w}])",
        "target_max": f"max_over_time({TARGET_MEMORY}{{{inst}}}[{w}])",
        "life_used": f"max by (pool) (max_over_time({DRIVE_LIFE_USED}{{{inst}}}[{w}]))",
        "implied": f"max by (pool) (max_over_time({IMPLIED_ENDURANCE_RULE}{{{inst}}}[{w}]))",
    }
    return "\nor ".join(
        f'label_replace({expr}, "q", "{name}", "", "")' for name, expr in parts.items()
    )


def _rows_for_instance(
    reader: _Reader, selector: str, instance: str, pools: list[str], breaks: list[Break], rule_seen: bool
) -> list[Row]:
    o = reader.options
    periods = periods_between(breaks, o.end - o.since_seconds, o.end, o.step_seconds, GAP_STEPS)
    minimum = WINDOWS_PER_RESOLUTION * max(o.step_seconds, o.resolution_seconds)
    rows: list[Row] = []
    for period in periods:
        period_rows = {pool: Row(instance, pool, period.start, period.end) for pool in pools}
        rows.extend(period_rows.values())
        length = period.end - period.start
        if length < minimum:
            for row in period_rows.values():
                row.notes.append(
                    f"period of {duration(length)} is shorter than the {duration(minimum)} the data needs "
                    f"({WINDOWS_PER_RESOLUTION} x {duration(minimum / WINDOWS_PER_RESOLUTION)} resolution)"
                )
            continue
        try:
            answer = reader.instant(_period_query(selector, instance, o.source, length), period.end)
        except EndpointError as err:
            for row in period_rows.values():
                row.notes.append(f"query failed: {err}")
            continue
        _fill(period_rows, period, answer, rule_seen)
    return rows


def _fill(rows: dict[str, Row], period: MemoryPeriod, answer: Answer, rule_seen: bool) -> None:
    values: dict[tuple[str, str], float] = {}
    not_numbers: dict[str, list[str]] = {}  # pool ("" for the instance's own) -> what came back NaN/Inf
    for series in answer.series:
        key = (series.labels.get("q", ""), series.labels.get("pool", ""))
        value = finite(series.points[-1][1])
        if value is None:
            not_numbers.setdefault(key[1], []).append(key[0])
        else:
            values[key] = value
    length = period.end - period.start
    memory = values.get(("msm_max", ""))
    target = values.get(("target_max", ""))
    for pool, row in rows.items():
        for warning in answer.warnings:
            row.notes.append(f"partial response: {readable_warning(warning)}")
        for name in not_numbers.get(pool, []) + not_numbers.get("", []):
            row.notes.append(f"the endpoint answered no number (NaN or infinity) for {name}")
        row.max_server_memory_bytes = memory
        row.target_memory_bytes = target
        if memory is None:
            row.notes.append(f"no {MAX_SERVER_MEMORY} in the period")
        written = values.get(("written", pool))
        if written is None:
            row.notes.append(f"no {WRITTEN} in the period")
            continue
        row.write_rate_bytes_per_second = written / length
        planned = values.get(("planned", pool))
        rated = values.get(("rated", pool))
        row.rated_bytes = rated
        if planned is None:
            row.notes.append(f"pool has no planned lifetime ({PLANNED})")
        else:
            row.projected_life_bytes = projected_life_bytes(row.write_rate_bytes_per_second, planned)
        if rated is None:
            row.notes.append(f"pool has no rating ({RATED})")
        elif row.projected_life_bytes is not None:
            row.share = share(row.projected_life_bytes, rated)
            if row.share is None:
                row.notes.append(f"pool's rating is {rated:g} bytes: no share of it")
        row.drive_life_used = values.get(("life_used", pool))
        row.drive_implied_endurance_bytes = values.get(("implied", pool))
        if row.drive_life_used is not None and row.drive_implied_endurance_bytes is None:
            row.notes.append(
                f"drives read but no implied endurance: recording rule {IMPLIED_ENDURANCE_RULE} not loaded"
                if not rule_seen
                else "drives read but no implied endurance yet (a drive under its minimum wear)"
            )


def build(client: PromQLClient, options: Options) -> Report:
    """Raises EndpointError when the endpoint answers none of the fleet-wide queries: nothing to report."""
    selector = f"{options.selector}, instance=~{_quote(options.instance_regex)}"
    reader = _Reader(client, options)
    pools = _pools(reader, selector)
    breaks = _breaks(reader, selector)
    rule_seen = bool(
        reader.instant(
            f"count(count_over_time({IMPLIED_ENDURANCE_RULE}{{{selector}}}[{_window(options.since_seconds)}]))",
            options.end,
        ).series
    )
    by_instance: dict[str, list[str]] = {}
    for instance, pool in sorted(pools):
        by_instance.setdefault(instance, []).append(pool)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool_executor:
        futures = [
            pool_executor.submit(
                _rows_for_instance, reader, selector, instance, names, breaks.get(instance, []), rule_seen
            )
            for instance, names in by_instance.items()
        ]
        rows = [row for future in futures for row in future.result()]
    unpooled = _unpooled(reader, selector, set(by_instance))
    return Report(options, rows, reader.warnings, unpooled)
