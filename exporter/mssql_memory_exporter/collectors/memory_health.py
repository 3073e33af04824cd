"""SQL Server 2025's own verdict on its memory: sys.dm_os_memory_health_history.

Facts (Microsoft's page for sys.dm_os_memory_health_history): SQL Server 2025 (17.x), Azure SQL Database,
and Azure SQL Managed Instance only under the SQL Server 2025 or Always-up-to-date update policy. A
snapshot is added about every 15 seconds and the view keeps up to 256 (a little over an hour); a restart
empties it. `severity_level` (tinyint) is 1 (LOW: no memory health issue), 2 (MEDIUM: medium confidence of
an issue; allocations may fail, the data cache may shrink) or 3 (HIGH: high confidence; memory is likely
insufficient, allocations can fail, disk I/O can rise substantially). `allocation_potential_memory_mb` and
`reclaimable_cache_memory_mb` are int megabytes. `snapshot_time` (datetime2) may be NULL; such rows are
skipped. Reading it needs VIEW SERVER PERFORMANCE STATE (docs/permissions.md).

Where the view does not exist (SQL Server 2022 and older; a Managed Instance under the SQL Server 2022
policy) the section answers "unavailable" and the scrape leaves the collector out for that target, logged
once (`left_out_when_missing`, scrape.py), until SQL Server restarts; it never fails there.

Time at each severity, as a counter the exporter accumulates, not a gauge over the view's window: the
view holds only the last hour or so, so "seconds at HIGH among the snapshots still held" would fall as old
snapshots roll off and could not be summed over a day or survive downsampling, while a counter lets
`increase(...[1d])` say how long the server spent at each level on any range. Each snapshot newer than the
last one counted adds the time since its predecessor to its own level (a snapshot describes recent memory
use, so the interval it closes belongs to it), capped at MAX_GAP_SECONDS: of a longer gap (SQL Server
down, or the exporter away longer than the view holds) the snapshot that closes it is credited 60 s and the
rest goes to no level. That holds across a SQL Server restart too: the view starts empty, the server's clock
has moved on, and the first new snapshot closes the gap since the last one counted before the restart. The
first scrape of a target counts nothing and only remembers the newest snapshot: counting the hour already
in the view would count it again after every exporter restart. Snapshot times are sent as milliseconds on
the server's own clock and only their differences are used, so the exporter's clock and time zone never
enter.

Not read: `top_memory_clerks` (nvarchar(4000) of JSON per snapshot: up to 2 MB a scrape for 256 rows,
and the memory_clerks collector already exports every clerk type's bytes each scrape), and
`out_of_memory_event_count`, `memgrant_timeout_count`, `memgrant_waiter_count`, which the page marks as
internal only (not supported; they may change).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

log = logging.getLogger(__name__)

VIEW = "sys.dm_os_memory_health_history"
TAG = "memory_health"
MIB = 1048576.0
SNAPSHOT_SECONDS = 15.0  # "approximately every 15 seconds"
MAX_GAP_SECONDS = 4 * SNAPSHOT_SECONDS  # more than this between snapshots is a gap, not time at a level
LEVELS = {1: "low", 2: "medium", 3: "high"}  # severity_level -> severity_level_desc, lower-cased

# ctx.memo keys (per target, kept between scrapes).
NEWEST_KEY = "memory_health_newest_ms"  # snapshot_time (ms on the server's clock) of the last one counted
SECONDS_KEY = "memory_health_seconds"  # level -> seconds counted so far
EMPTY_LOGGED_KEY = "memory_health_empty_logged"

SECTION = Section(
    tag=TAG,
    # Every snapshot (at most 256 small rows); milliseconds since a fixed date on the server's clock, so
    # the driver never has to read datetime2 and only differences are used.
    sql=f"SELECT N'{TAG}' AS section,"
    " DATEDIFF_BIG(millisecond, '20000101', h.snapshot_time) AS snapshot_ms, h.severity_level,"
    " h.allocation_potential_memory_mb, h.reclaimable_cache_memory_mb\n"
    f"FROM {VIEW} AS h\nWHERE h.snapshot_time IS NOT NULL;",
    requires=(VIEW,),
    # Just after a restart the view has no snapshot yet: a true answer, not a failure.
    may_be_empty=True,
    optional=True,
)

# The docs print "Absent " before these: the series exist only where the view does (SQL Server 2025, Azure
# SQL Database, Managed Instance under the SQL Server 2025 or Always-up-to-date update policy).
PLATFORM_ONLY = (
    "where the view is missing (SQL Server 2022 and older; Managed Instance under the SQL Server 2022 update "
    "policy), where the collector is left out"
)
EMPTY_TOO = PLATFORM_ONLY + ", and while the view holds no snapshot (just after a restart)"

SEVERITY = MetricSpec(
    name="mssql_memory_health_severity",
    type="gauge",
    help="SQL Server's memory health severity in its latest snapshot: 1 low (no issue), 2 medium, 3 high.",
    unit="1/2/3",
    source=f"`{VIEW}` `severity_level` of the newest `snapshot_time`",
    question="Does SQL Server itself think its memory is short? 1 no issue, 2 medium confidence of an issue "
    "(allocations may fail, the data cache may shrink), 3 high confidence (memory likely insufficient, "
    "disk I/O rising). Paged on when 3 holds (MSSQLMemoryHealthHigh).",
    conditional=EMPTY_TOO,
)
SECONDS = MetricSpec(
    name="mssql_memory_health_seconds_total",
    type="counter",
    help="Seconds SQL Server's memory health snapshots spent at each severity level since the exporter began"
    " counting this target (each snapshot adds the time since the one before it, at most 60 s).",
    unit="seconds",
    source=f"`{VIEW}`: per new snapshot, `snapshot_time` minus the previous one's (at most 60 s), added to "
    "its `severity_level`; accumulated by the exporter",
    question="How long was memory at each level over a range: `increase(...[1d])` by `level`. The view keeps "
    "only about an hour; this counter keeps the rest.",
    labels=(Label("level", "`low`, `medium`, `high` (severity 1, 2, 3)"),),
    conditional=PLATFORM_ONLY,
)
ALLOCATION_POTENTIAL = MetricSpec(
    name="mssql_memory_health_allocation_potential_bytes",
    type="gauge",
    help="Memory available to SQL Server for new allocations, in its latest memory health snapshot.",
    unit="bytes",
    source=f"`{VIEW}` `allocation_potential_memory_mb` \u00d7 1048576, newest snapshot",
    question="How much room is left for new allocations, as SQL Server sees it?",
    conditional=EMPTY_TOO,
)
RECLAIMABLE_CACHE = MetricSpec(
    name="mssql_memory_health_reclaimable_cache_bytes",
    type="gauge",
    help="Memory held by caches SQL Server can shrink under pressure (buffer pool, columnstore object pool),"
    " in its latest memory health snapshot.",
    unit="bytes",
    source=f"`{VIEW}` `reclaimable_cache_memory_mb` \u00d7 1048576, newest snapshot",
    question="How much could SQL Server give back by shrinking its caches (at the cost of more disk reads)?",
    conditional=EMPTY_TOO,
)


def _snapshots(results: Mapping[str, SectionResult]) -> list[tuple[float, int, Mapping[str, object]]]:
    """(time in ms, severity, row), oldest first; rows without a time or with a severity the page does not
    list are skipped (a level the page does not define cannot be alerted or counted honestly)."""
    out = []
    for row in rows_of(results, TAG):
        at = number(row.get("snapshot_ms"), "snapshot_ms")
        severity = number(row.get("severity_level"), "severity_level")
        if at is None or severity is None or int(severity) not in LEVELS:
            continue
        out.append((at, int(severity), row))
    out.sort(key=lambda s: s[0])
    return out


def _count(
    snapshots: list[tuple[float, int, Mapping[str, object]]], memo: dict[str, object]
) -> dict[str, float]:
    """The seconds per level after this scrape's new snapshots (see the module doc)."""
    seconds: dict[str, float] = dict(memo.get(SECONDS_KEY) or dict.fromkeys(LEVELS.values(), 0.0))  # type: ignore[call-overload]
    newest = memo.get(NEWEST_KEY)
    if snapshots:
        latest = snapshots[-1][0]
        if isinstance(newest, float) and latest >= newest:
            previous = newest
            for at, severity, _ in snapshots:
                if at <= newest:
                    continue
                seconds[LEVELS[severity]] += min((at - previous) / 1000.0, MAX_GAP_SECONDS)
                previous = at
        # First scrape, or the server's clock went back (a different server answers): start from here.
        memo[NEWEST_KEY] = latest
    memo[SECONDS_KEY] = seconds
    return seconds


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    result = results.get(TAG)
    if result is None or result.unavailable:
        return  # no such view here: the scrape leaves the collector out (left_out_when_missing)
    snapshots = _snapshots(results)
    for level, total in _count(snapshots, ctx.memo).items():
        out.emit(SECONDS, total, {"level": level})
    if not snapshots:
        if not ctx.memo.get(EMPTY_LOGGED_KEY):
            ctx.memo[EMPTY_LOGGED_KEY] = True
            log.warning(
                "target %s: %s has no snapshot, so no memory health severity until it has one (SQL Server"
                " adds one about every 15 s; an empty view just after a restart is normal)",
                ctx.target.name,
                VIEW,
                extra={"target": ctx.target.name, "collector": TAG},
            )
        return
    ctx.memo[EMPTY_LOGGED_KEY] = False  # log again if it empties again (a restart)
    _, severity, row = snapshots[-1]
    out.emit(SEVERITY, float(severity))
    for column, spec in (
        ("allocation_potential_memory_mb", ALLOCATION_POTENTIAL),
        ("reclaimable_cache_memory_mb", RECLAIMABLE_CACHE),
    ):
        value = number(row.get(column), column)
        if value is not None:
            out.emit(spec, value * MIB)


COLLECTOR = CollectorRecord(
    name="memory_health",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(SEVERITY, SECONDS, ALLOCATION_POTENTIAL, RECLAIMABLE_CACHE),
    summary="SQL Server 2025's memory health verdict (sys.dm_os_memory_health_history): its latest severity, "
    "the time spent at each level, and the memory left for new allocations.",
    left_out_when_missing=True,
)
