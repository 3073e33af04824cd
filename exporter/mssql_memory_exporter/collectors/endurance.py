"""SSD endurance pools: a pool's rated figures as metrics, and the reference arithmetic of the projection.

projected share of rated endurance used over the planned life =
    write rate (bytes/s, averaged over a long window) x planned lifetime (s) / rated endurance (bytes)

In production Prometheus recording rules do the division (docs/endurance.md); `projected_share`,
`written_so_far` and `remaining_seconds` are the reference implementation those rules' tests compare
against. Everything is in
base units: bytes and seconds. Drive ratings in the config are decimal TB (10^12 bytes), because that is
how SSD vendors rate TBW and capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import ScrapeContext
from .view import DrivesView, PoolView

__all__ = [
    "COUNTING_MEMO_KEY",
    "COUNTING_START",
    "COUNTING_START_WRITTEN",
    "DAYS_PER_PLANNED_YEAR",
    "DAYS_PER_RATED_YEAR",
    "IN_SERVICE",
    "KNOWN_WRITTEN",
    "KNOWN_WRITTEN_AT",
    "PLANNED_LIFETIME",
    "POOL_METRICS",
    "RATED_ENDURANCE",
    "TB",
    "WRITTEN",
    "CountingStart",
    "counting_metrics",
    "counting_start",
    "in_service_timestamp",
    "planned_lifetime_seconds",
    "pool_metrics",
    "projected_share",
    "rated_endurance_bytes",
    "remaining_seconds",
    "written_so_far",
]

TB = 10**12  # decimal terabyte: SSD datasheets rate TBW and capacity in 10^12 bytes, never in TiB
DAY_SECONDS = 86_400

# A DWPD rating is defined over 365-day years (TBW = DWPD x capacity x 365 x warranty years, as vendors
# convert between the two). Using 365.25 here would credit the drives with endurance no datasheet promises.
DAYS_PER_RATED_YEAR = 365

# A planned lifetime is calendar time that Prometheus counts from in_service_date. Calendar years average
# 365.25 days over any four consecutive years (to 0.0075 day/year of the Gregorian mean), so "5 years"
# ends on the fifth anniversary, give or take a day; 365-day years would end it 1-2 days early. The two
# differ by 0.07%, far below the uncertainty of any write-rate forecast; the choice is about rules that
# compare `time()` with in_service + lifetime landing on the date an operator expects. Note that PromQL's
# `y` duration is 365 days: rules should use mssql_ssd_pool_planned_lifetime_seconds, not `5y`.
DAYS_PER_PLANNED_YEAR = 365.25


def rated_endurance_bytes(drives: DrivesView) -> float:
    """The pool's rated write endurance in bytes: count x TBW x 10^12, or, for a DWPD rating,
    count x DWPD x capacity_tb x 10^12 x 365 x warranty_years."""
    if drives.tbw_per_drive_tb is not None:
        per_drive = drives.tbw_per_drive_tb * TB
    else:
        # The config guarantees all three when tbw_per_drive_tb is absent (config SsdDrives._one_rating).
        assert drives.dwpd is not None and drives.capacity_tb is not None
        assert drives.warranty_years is not None
        per_drive = drives.dwpd * drives.capacity_tb * TB * DAYS_PER_RATED_YEAR * drives.warranty_years
    return drives.count * per_drive


def planned_lifetime_seconds(years: float) -> float:
    """Planned service life in seconds: years x 365.25 days x 86,400 s (see DAYS_PER_PLANNED_YEAR)."""
    if not years > 0 or not math.isfinite(years):
        raise ValueError(f"planned lifetime must be a positive number of years, got {years!r}")
    return years * DAYS_PER_PLANNED_YEAR * DAY_SECONDS


def in_service_timestamp(day: date) -> float:
    """Unix time of UTC midnight at the start of `day`.

    UTC rather than the exporter's local zone, so that the same config gives the same metric on every
    host; an in-service date is only ever as precise as a day anyway.
    """
    if isinstance(day, datetime):
        # A datetime is a date subclass; its time and zone would be dropped silently below.
        raise TypeError("in_service_timestamp takes a date, not a datetime")
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


POOL = (Label("pool", "the pool's name in the config"),)
PER_SOURCE = (
    *POOL,
    Label("source", "`sqlserver`, `host` or `drive`: whose counters (below)"),
)
FROM_KNOWN = "unless the pool has `known_written` in the config"


def _pool_gauge(
    name: str, help: str, unit: str, source: str, question: str, conditional: str = ""
) -> MetricSpec:
    return MetricSpec(name, "gauge", help, unit, source, question, POOL, conditional)


RATED_ENDURANCE = _pool_gauge(
    "mssql_ssd_pool_rated_endurance_bytes",
    "Rated write endurance of the pool's drives together, in bytes (TBW, or DWPD x capacity x 365 x "
    "warranty years; decimal TB), from the config.",
    "bytes",
    "config: `drives.count` x `tbw_per_drive_tb` x 10^12, or `count` x `dwpd` x `capacity_tb` x 10^12 x 365 "
    "x `warranty_years`",
    "How many bytes may the pool's drives take in their rated life?",
)
PLANNED_LIFETIME = _pool_gauge(
    "mssql_ssd_pool_planned_lifetime_seconds",
    "Planned service life of the pool in seconds (planned_lifetime_years x 365.25 days).",
    "seconds",
    "config: `planned_lifetime_years` x 365.25 x 86,400",
    "How long must the drives last?",
)
IN_SERVICE = _pool_gauge(
    "mssql_ssd_pool_in_service_timestamp_seconds",
    "Unix time of UTC midnight on the pool's in_service_date, from the config.",
    "seconds (Unix time)",
    "config: `in_service_date` at 00:00 UTC",
    "Since when have the drives been in service?",
)
WRITTEN = MetricSpec(
    "mssql_ssd_pool_written_bytes_total",
    "counter",
    "Bytes written to the pool. source=sqlserver: SQL Server's file writes on the pool's volumes, counted "
    "by the exporter since it started (logical writes, counted once). source=host: the host's disk "
    "counters of the pool's disks, since boot (each mirror member counts). Neither includes write "
    "amplification in the SSD. source=drive: the lifetime host-write counters the pool's drives report "
    "(smartctl), summed, including drives replaced while the exporter ran. Where counting starts: "
    "mssql_ssd_pool_counting_start_timestamp_seconds.",
    "bytes",
    '`source="sqlserver"`, `source="host"` or `source="drive"`, below',
    "How fast are the pool's drives being written, and so how soon will they reach their rating?",
    PER_SOURCE,
)
KNOWN_WRITTEN = _pool_gauge(
    "mssql_ssd_pool_known_written_bytes",
    "Bytes the pool's drives had written in their life when their own counters were read (known_written "
    "in the config, decimal TB; summed over the drives).",
    "bytes",
    "config: `known_written.written_tb` x 10^12, the drives' own lifetime counters summed over the pool",
    "How much had the drives written before the exporter counted?",
    conditional=FROM_KNOWN,
)
KNOWN_WRITTEN_AT = _pool_gauge(
    "mssql_ssd_pool_known_written_timestamp_seconds",
    "Unix time of UTC midnight on the day known_written was read, from the config.",
    "seconds (Unix time)",
    "config: `known_written.read_date` at 00:00 UTC",
    "When were the drives' own counters read?",
    conditional=FROM_KNOWN,
)
COUNTING_START = MetricSpec(
    "mssql_ssd_pool_counting_start_timestamp_seconds",
    "gauge",
    "Unix time from which mssql_ssd_pool_written_bytes_total{source} counts this pool's bytes: the "
    "exporter's first reading (sqlserver), or the host's boot (host) when that is after the in-service "
    "date and the known_written reading; the in-service date for source=drive (the drives' lifetime "
    "counters).",
    "seconds (Unix time)",
    "exporter: from when `mssql_ssd_pool_written_bytes_total` of this `source` counts the pool's bytes, "
    "below",
    "Which bytes does the counter hold, so that the rules can add the ones it cannot see?",
    PER_SOURCE,
)
COUNTING_START_WRITTEN = MetricSpec(
    "mssql_ssd_pool_counting_start_written_bytes",
    "gauge",
    "Value of mssql_ssd_pool_written_bytes_total{source} at the counting start: bytes written = counter "
    "minus this. 0 unless the counter was already running (a host up since before the in-service date "
    "or the known_written reading).",
    "bytes",
    "exporter: the counter's value at that time (usually 0); bytes counted = counter - this",
    "How much of the counter was written before counting started?",
    PER_SOURCE,
)
POOL_METRICS = (
    RATED_ENDURANCE,
    PLANNED_LIFETIME,
    IN_SERVICE,
    WRITTEN,
    KNOWN_WRITTEN,
    KNOWN_WRITTEN_AT,
    COUNTING_START,
    COUNTING_START_WRITTEN,
)


def _sources(sqlserver: float | None, host: float | None, drive: float | None) -> list[tuple[str, float]]:
    given = (("sqlserver", sqlserver), ("host", host), ("drive", drive))
    return [(source, value) for source, value in given if value is not None]


def _check_written(source: str, value: float) -> None:
    # A negative or non-finite counter would poison every rate() over it; fail this collector instead.
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"bytes written ({source}) must be a finite number >= 0, got {value!r}")


def pool_metrics(
    pool_name: str,
    pool: PoolView,
    sqlserver_written: float | None,
    host_written: float | None,
    out: FamilyBuilder,
    drive_written: float | None = None,
) -> None:
    """Add one pool's samples to `out`: the configured gauges (the known_written pair only when
    configured), and a written-bytes counter for each source that has a value (None means that source
    is not available for this pool or this scrape)."""
    labels = {"pool": pool_name}
    out.emit(RATED_ENDURANCE, rated_endurance_bytes(pool.drives), labels)
    out.emit(PLANNED_LIFETIME, planned_lifetime_seconds(pool.planned_lifetime_years), labels)
    out.emit(IN_SERVICE, in_service_timestamp(pool.in_service_date), labels)
    if pool.known_written is not None:
        out.emit(KNOWN_WRITTEN, pool.known_written.written_tb * TB, labels)
        out.emit(KNOWN_WRITTEN_AT, in_service_timestamp(pool.known_written.read_date), labels)
    for source, value in _sources(sqlserver_written, host_written, drive_written):
        _check_written(source, value)
        out.emit(WRITTEN, value, {**labels, "source": source})


# --- where the counted bytes begin ---------------------------------------------------------------------

COUNTING_MEMO_KEY = "ssd_pool_counting"


@dataclass
class CountingStart:
    """Where a pool's written-bytes counter starts counting, for one source."""

    timestamp: float  # unix time the counted bytes begin
    written: float  # the counter's value then: bytes counted = counter - written
    last: float  # the counter's value at the previous reading, to notice it going down


def anchor_timestamp(pool: PoolView) -> float:
    """Unix time from which the pool's bytes written are not known otherwise: the known_written reading's
    day, or the in-service date without one (the config keeps the reading on or after that date)."""
    day = pool.known_written.read_date if pool.known_written is not None else pool.in_service_date
    return in_service_timestamp(day)


def counting_start(
    state: CountingStart | None, value: float, now: float, zero_at: float | None, anchor: float
) -> CountingStart:
    """The counting start after a reading of `value` at `now`.

    `zero_at` is when the counter was last at zero, if known (the host's boot for the kernel's disk
    counters); the sqlserver counter has none, as the exporter's first reading is its zero. A counter
    that was at zero after `anchor` counts from there; one running since before `anchor` holds bytes
    the known reading or the extrapolation already cover, so it counts from this reading on instead.
    """
    if state is not None and value >= state.last:
        state.last = value
        return state
    if state is None and zero_at is not None and anchor <= zero_at <= now:
        return CountingStart(zero_at, 0.0, value)
    # A first reading, or a counter that went down without the exporter restarting (a disk gone from
    # the host's list): what it held before cannot be told apart from what it holds now.
    return CountingStart(now, value, value)


def counting_metrics(
    pool_name: str,
    pool: PoolView,
    sqlserver_written: float | None,
    host_written: float | None,
    ctx: ScrapeContext,
    out: FamilyBuilder,
    drive_written: float | None = None,
) -> None:
    """Add the counting start of each source that has a value, kept in the target's memo across scrapes."""
    starts = ctx.memo.setdefault(COUNTING_MEMO_KEY, {})
    assert isinstance(starts, dict)
    anchor = anchor_timestamp(pool)
    for source, value in _sources(sqlserver_written, host_written, drive_written):
        _check_written(source, value)
        if source == "drive":
            # The drives count from the day they were new: the counter already holds every byte since
            # the in-service date (and the few written before it, in the factory and burn-in), so
            # nothing is unobserved and no known_written reading is needed on top.
            start = CountingStart(in_service_timestamp(pool.in_service_date), 0.0, value)
        else:
            zero_at = ctx.host.boot_time() if source == "host" and ctx.host is not None else None
            key = (pool_name, source)
            start = starts[key] = counting_start(starts.get(key), value, ctx.now, zero_at, anchor)
        labels = {"pool": pool_name, "source": source}
        out.emit(COUNTING_START, start.timestamp, labels)
        out.emit(COUNTING_START_WRITTEN, start.written, labels)


# --- the projection ---------------------------------------------------------------------------------------


def projected_share(write_rate_bytes_per_s: float, lifetime_s: float, rated_bytes: float) -> float:
    """Share of the rated endurance that `write_rate_bytes_per_s`, kept up for `lifetime_s`, would use.

    1.0 means the drives reach their rating exactly at the end of the planned life; above 1.0 they reach
    it before. The rate should be averaged over a long window (7 days), or bursts overstate it.
    """
    if not rated_bytes > 0 or not math.isfinite(rated_bytes):
        raise ValueError(f"rated endurance must be a positive number of bytes, got {rated_bytes!r}")
    if not write_rate_bytes_per_s >= 0 or not lifetime_s >= 0:
        raise ValueError("write rate and lifetime must be >= 0")
    return write_rate_bytes_per_s * lifetime_s / rated_bytes


def written_so_far(
    known: float,
    anchor: float,
    counting_start_timestamp: float,
    counted: float,
    rate: float,
) -> float:
    """Bytes written to the pool since it went into service, as the recording rules estimate them.

    known: the drives' own reading (0 without one); anchor: when it was read (the in-service time
    without one); counted: bytes the counter holds since `counting_start_timestamp`; rate: the 7-day
    write rate. Between the anchor and the counting start nothing was counted: that gap is filled at
    `rate`. The exporter puts the counting start after the anchor (`counting_start`); one before it,
    which a read_date up to 14 hours ahead of UTC allows for a few hours, leaves no gap to fill.
    """
    for name, value in (("known", known), ("counted", counted), ("rate", rate)):
        if not value >= 0 or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    gap = max(0.0, counting_start_timestamp - anchor)
    return known + rate * gap + counted


def remaining_seconds(rated_bytes: float, written_so_far: float, rate: float) -> float:
    """Seconds until `written_so_far` reaches `rated_bytes` at `rate` bytes/s.

    0.0 once the rating is reached or passed (never negative: the recording rule clamps with
    `clamp_min(..., 0)`), and +inf when nothing is being written, as PromQL's x / 0 is +Inf for x > 0.
    """
    if not rated_bytes > 0 or not math.isfinite(rated_bytes):
        raise ValueError(f"rated endurance must be a positive number of bytes, got {rated_bytes!r}")
    if not written_so_far >= 0 or not rate >= 0:
        raise ValueError("bytes written and write rate must be >= 0")
    left = rated_bytes - written_so_far
    if left <= 0:
        return 0.0
    if rate == 0:
        return math.inf
    return left / rate
