"""When SQL Server itself decided memory was low: the resource monitor's notifications and the out-of-memory
records, from sys.dm_os_ring_buffers, as counters.

sys.dm_os_ring_buffers is undocumented and unsupported: Microsoft has no reference page for it. The record
format is the one Microsoft's support blog explains ("How It Works: What are the
RING_BUFFER_RESOURCE_MONITOR telling me?", 2009) and long field use relies on: an XML `<Record id time>`
whose `<ResourceMonitor>` holds the `Notification` broadcast to the memory clerks
(RESOURCE_MEMPHYSICAL_LOW, RESOURCE_MEMPHYSICAL_HIGH, RESOURCE_MEM_STEADY, RESOURCE_MEMVIRTUAL_LOW),
`IndicatorsProcess` (pressure from inside SQL Server: 2 = low physical memory), `IndicatorsSystem` (from
the OS) and `NodeId`; RING_BUFFER_OOM records are memory allocation failures (error 701 territory). So it
is parsed defensively (the standard library's XML parser, not by hand), and a record of a shape it does not
know fails this collector alone, once: the record is passed over (counted as read) before the failure, so
the next scrape succeeds again.

Counted once across scrapes. `timestamp` is ms_ticks (milliseconds since the OS started), which goes on
across a SQL Server restart, while record ids start again from 0 and a restart empties the buffers; a full
buffer drops its oldest record (a wrap). So a record is new when its (timestamp, id) is past the newest one
counted, per buffer type; ms_ticks going backwards means the OS restarted, and every record then is new.
The first scrape of a target counts nothing and only remembers the newest record: counting what the buffer
already holds would count it again after every exporter restart (which `rate()` treats as a reset).

Cheap: the section reads only records of the last WINDOW_SECONDS (its own ms_ticks from a CROSS JOIN with
sys.dm_os_sys_info), not the whole buffer. A scrape gap longer than that loses what fell out of the window
(never counts it twice). The newest notification per node is kept between scrapes, so the state gauge
stays while nothing new is written.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

log = logging.getLogger(__name__)

VIEW = "sys.dm_os_ring_buffers"
TAG = "ring_buffers"
RESOURCE_MONITOR = "RING_BUFFER_RESOURCE_MONITOR"
OOM = "RING_BUFFER_OOM"
WINDOW_SECONDS = 900  # what a scrape reads back: longer than any scrape interval, far shorter than a day
# Notification names (Microsoft's blog) as the `notification` label; anything else is `other`, so a new
# name in a later release never makes an unbounded label.
NOTIFICATIONS = {
    "RESOURCE_MEMPHYSICAL_LOW": "physical_low",
    "RESOURCE_MEMPHYSICAL_HIGH": "physical_high",
    "RESOURCE_MEM_STEADY": "steady",
    "RESOURCE_MEMVIRTUAL_LOW": "virtual_low",
}
LOW = frozenset({"physical_low", "virtual_low"})
SOURCES = {(False, False): "none", (True, False): "process", (False, True): "system", (True, True): "both"}

# ctx.memo keys (per target, kept between scrapes).
NEWEST_KEY = "ring_buffer_newest"  # buffer type -> (timestamp, id) of the newest record counted
TICKS_KEY = "ring_buffer_ms_ticks"  # ms_ticks at the last scrape: going back means the OS restarted
COUNTS_KEY = "ring_buffer_counts"  # (notification, source, node) -> count; and OOM
STATE_KEY = "ring_buffer_state"  # node -> (timestamp, id, notification) of its newest notification

SECTION = Section(
    tag=TAG,
    sql=f"SELECT N'{TAG}' AS section, rb.ring_buffer_type, rb.[timestamp], si.ms_ticks, rb.record\n"
    f"FROM {VIEW} AS rb CROSS JOIN sys.dm_os_sys_info AS si\n"
    f"WHERE rb.ring_buffer_type IN (N'{RESOURCE_MONITOR}', N'{OOM}')"
    f" AND rb.[timestamp] > si.ms_ticks - {WINDOW_SECONDS * 1000};",
    requires=(VIEW,),
    may_be_empty=True,  # no notification in the window: a true answer
    optional=True,  # Azure SQL Database has no such view
)

NODE = Label("node", "`NodeId` of the record: the memory node whose resource monitor broadcast it")
NOTIFICATIONS_TOTAL = MetricSpec(
    name="mssql_memory_resource_notifications_total",
    type="counter",
    help="Resource monitor notifications SQL Server broadcast to its memory clerks, by kind, by where the"
    " pressure came from (process: inside SQL Server; system: the OS) and by memory node; counted once each.",
    unit="notifications",
    source=f"`{VIEW}` RING_BUFFER_RESOURCE_MONITOR records: `Notification`, `IndicatorsProcess`,"
    " `IndicatorsSystem`, `NodeId`; counted by the exporter (undocumented view)",
    question="When did SQL Server itself decide memory was low, and was the pressure from inside the process"
    " (a cache or grant taking memory) or from the OS (something else on the host, or max server memory set"
    " too high)? `increase(...[1h])` by `source`.",
    labels=(
        Label("notification", "`physical_low`, `physical_high`, `steady`, `virtual_low`, `other`"),
        Label("source", "`process` (IndicatorsProcess > 0), `system` (IndicatorsSystem > 0), `both`, `none`"),
        NODE,
    ),
    conditional="until SQL Server has written a notification since the exporter began counting, and on"
    " Azure SQL Database",
)
OOM_TOTAL = MetricSpec(
    name="mssql_memory_oom_events_total",
    type="counter",
    help="Out-of-memory records SQL Server wrote (memory allocation failures, error 701 territory), counted"
    " once each.",
    unit="events",
    source=f"`{VIEW}` RING_BUFFER_OOM records; counted by the exporter",
    question="Did an allocation fail for lack of memory? Any increase pages (MSSQLOutOfMemory).",
    conditional="on Azure SQL Database (the exporter exports 0 until the first record)",
)
LOW_NOW = MetricSpec(
    name="mssql_memory_resource_low",
    type="gauge",
    help="1 while the newest resource monitor notification of this memory node is a LOW one (physical or"
    " virtual), else 0.",
    unit="0/1",
    source=f"`{VIEW}`: the newest RING_BUFFER_RESOURCE_MONITOR record per `NodeId`, kept between scrapes",
    question="Is SQL Server shrinking its caches on this node right now, by its own verdict?",
    labels=(NODE,),
    conditional="until a node has written a notification since the exporter began counting, and on Azure"
    " SQL Database",
)


@dataclass(frozen=True)
class Parsed:
    """What the collector keeps of one record."""

    buffer: str
    ticks: float
    record_id: int
    notification: str  # a NOTIFICATIONS value, "other", or "" for an OOM record
    source: str  # a SOURCES value, "" for an OOM record
    node: str


def _int(element: ET.Element, path: str, what: str) -> int:
    found = element.find(path)
    text = (found.text or "").strip() if found is not None else ""
    if not text.lstrip("-").isdigit():
        raise ValueError(f"{what} is {text!r}, not a whole number")
    return int(text)


def parse(buffer: str, ticks: float, record: object) -> Parsed:
    """One record; ValueError naming what is missing or malformed."""
    if not isinstance(record, str):
        raise ValueError(f"record is {type(record).__name__}, not text")
    try:
        root = ET.fromstring(record)
    except ET.ParseError as err:
        raise ValueError(f"record is not XML ({err})") from None
    record_id = root.get("id", "")
    if root.tag != "Record" or not record_id.isdigit():
        raise ValueError(f"no <Record id=...> at the top (found <{root.tag}>)")
    if buffer == OOM:
        if root.find("OOM") is None:
            raise ValueError("an OOM record without <OOM>")
        node = root.find("MemoryNode")
        return Parsed(buffer, ticks, int(record_id), "", "", (node.get("id", "") if node is not None else ""))
    monitor = root.find("ResourceMonitor")
    if monitor is None:
        raise ValueError("a resource monitor record without <ResourceMonitor>")
    name = (monitor.findtext("Notification") or "").strip()
    if not name:
        raise ValueError("<ResourceMonitor> without <Notification>")
    process = _int(monitor, "IndicatorsProcess", "IndicatorsProcess")
    system = _int(monitor, "IndicatorsSystem", "IndicatorsSystem")
    node_id = _int(monitor, "NodeId", "NodeId")
    source = SOURCES[(process != 0, system != 0)]
    return Parsed(buffer, ticks, int(record_id), NOTIFICATIONS.get(name, "other"), source, str(node_id))


def _newer(key: tuple[float, int], newest: tuple[float, int] | None) -> bool:
    return newest is None or key > newest


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    result = results.get(TAG)
    if result is None or result.unavailable:
        return
    memo = ctx.memo
    rows = list(rows_of(results, TAG))
    ticks_now = max((number(r.get("ms_ticks"), "ms_ticks") or 0.0 for r in rows), default=None)
    previous_ticks = memo.get(TICKS_KEY)
    first = NEWEST_KEY not in memo
    newest: dict[str, tuple[float, int]] = dict(memo.get(NEWEST_KEY) or {})  # type: ignore[call-overload]
    if ticks_now is not None and isinstance(previous_ticks, float) and ticks_now < previous_ticks:
        newest = {}  # the OS restarted: ms_ticks began again, every record is new
    if ticks_now is not None:
        memo[TICKS_KEY] = ticks_now
    counts: dict[tuple[str, str, str], float] = dict(memo.get(COUNTS_KEY) or {})  # type: ignore[call-overload]
    state: dict[str, tuple[float, int, str]] = dict(memo.get(STATE_KEY) or {})  # type: ignore[call-overload]
    bad: list[str] = []
    fresh: list[Parsed] = []
    seen: dict[str, tuple[float, int]] = {}
    for row in rows:
        buffer = str(row.get("ring_buffer_type") or "").strip()
        stamp = number(row.get("timestamp"), "timestamp")
        if stamp is None or buffer not in (RESOURCE_MONITOR, OOM):
            continue
        known = newest.get(buffer)
        if known is not None and stamp < known[0]:
            continue  # older than the newest one read: no need to parse it again
        problem = ""
        try:
            parsed: Parsed | None = parse(buffer, stamp, row.get("record"))
        except ValueError as err:
            problem, parsed = f"{buffer} record at ms_ticks {int(stamp)}: {err}", None
        key = (stamp, parsed.record_id if parsed is not None else -1)
        if not _newer(key, newest.get(buffer)):
            continue  # read by an earlier scrape (a bad one too: it failed that scrape, not this one)
        if problem:
            bad.append(problem)
        if _newer(key, seen.get(buffer)):
            seen[buffer] = key
        if parsed is not None:
            fresh.append(parsed)
    # The newest (timestamp, id) per buffer, a bad record's too: each is read once, never again.
    newest.update(seen)
    memo[NEWEST_KEY] = newest
    for parsed in sorted(fresh, key=lambda p: (p.ticks, p.record_id)):
        if parsed.buffer == RESOURCE_MONITOR:
            if not first:
                key3 = (parsed.notification, parsed.source, parsed.node)
                counts[key3] = counts.get(key3, 0.0) + 1
            state[parsed.node] = (parsed.ticks, parsed.record_id, parsed.notification)
        elif not first:
            counts[("oom", "", "")] = counts.get(("oom", "", ""), 0.0) + 1
    memo[COUNTS_KEY], memo[STATE_KEY] = counts, state
    if bad:
        raise MissingData(
            f"{len(bad)} ring buffer record(s) of a shape this exporter does not know, passed over (the view"
            f" is undocumented; a new SQL Server release may have changed it): {bad[0]}"
        )
    out.emit(OOM_TOTAL, counts.get(("oom", "", ""), 0.0))
    for (notification, source, node), count in sorted(counts.items()):
        if notification != "oom":
            out.emit(
                NOTIFICATIONS_TOTAL, count, {"notification": notification, "source": source, "node": node}
            )
    for node, (_, _, notification) in sorted(state.items()):
        out.emit(LOW_NOW, 1.0 if notification in LOW else 0.0, {"node": node})


COLLECTOR = CollectorRecord(
    name="resource_monitor",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    summary="The resource monitor's memory notifications and out-of-memory records (sys.dm_os_ring_buffers,"
    " undocumented), each counted once across scrapes.",
    metrics=(NOTIFICATIONS_TOTAL, OOM_TOTAL, LOW_NOW),
)
