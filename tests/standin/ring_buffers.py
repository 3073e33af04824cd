"""sys.dm_os_ring_buffers as the stand-in plays it: the resource monitor's notifications and the
out-of-memory records, from a scenario's event list.

Undocumented by Microsoft (no reference page); the record format is the one Microsoft's support blog shows
("How It Works: What are the RING_BUFFER_RESOURCE_MONITOR telling me?", 2009): an XML `<Record id time>`
with `<ResourceMonitor>` (Notification, IndicatorsProcess, IndicatorsSystem, NodeId) or `<OOM>`, then
`<MemoryNode id>` and `<MemoryRecord>`. What the stand-in models:
- `timestamp` and the record's `time` are ms_ticks (milliseconds since the OS started), the clock
  sys.dm_os_sys_info.ms_ticks reads, so they go on across a SQL Server restart;
- record ids count from 0 per buffer since SQL Server (re)started, and a restart empties the buffers;
- each buffer keeps its newest `capacity` records (a wrap drops the oldest).

Scenario (`views: dm_os_ring_buffers:`, a mapping, so a child scenario changes one key):
  capacity: 256
  resource_monitor: [{from: 60, every: 30, until: 600, notification: RESOURCE_MEMPHYSICAL_LOW,
                      process: 2, system: 0, node: 0}, ...]   (`at: t` for one record)
  oom: [{at: 400, node: 0}]
  raw: [{at: 90, type: RING_BUFFER_RESOURCE_MONITOR, record: "<Record ..."}]   (a record as given)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RESOURCE_MONITOR = "RING_BUFFER_RESOURCE_MONITOR"
OOM = "RING_BUFFER_OOM"
DEFAULT_CAPACITY = 256


def _times(event: Mapping[str, Any], since: float, now: float) -> list[float]:
    if "at" in event:
        start, every, until = float(event["at"]), 0.0, float(event["at"])
    else:
        start, every, until = float(event["from"]), float(event["every"]), float(event.get("until", now))
    out, t = [], start
    while t <= min(until, now):
        if t > since:  # what happened before the last (re)start is gone with the buffer
            out.append(t)
        if every <= 0:
            break
        t += every
    return out


def _resource_monitor(record_id: int, ticks: int, event: Mapping[str, Any]) -> str:
    node = int(event.get("node", 0))
    return (
        f'<Record id="{record_id}" type="{RESOURCE_MONITOR}" time="{ticks}"><ResourceMonitor>'
        f"<Notification>{event['notification']}</Notification>"
        f"<IndicatorsProcess>{int(event.get('process', 0))}</IndicatorsProcess>"
        f"<IndicatorsSystem>{int(event.get('system', 0))}</IndicatorsSystem>"
        f"<NodeId>{node}</NodeId>"
        '<Effect type="APPLY_LOWPM" state="EFFECT_OFF" reversed="0">0</Effect>'
        '<Effect type="APPLY_HIGHPM" state="EFFECT_IGNORE" reversed="0">128163281</Effect>'
        '<Effect type="REVERT_HIGHPM" state="EFFECT_OFF" reversed="0">0</Effect>'
        f'</ResourceMonitor><MemoryNode id="{node}"><TargetMemory>16777216</TargetMemory>'
        "<ReservedMemory>67108864</ReservedMemory><CommittedMemory>16000000</CommittedMemory>"
        "</MemoryNode><MemoryRecord><MemoryUtilization>100</MemoryUtilization>"
        "<TotalPhysicalMemory>67108864</TotalPhysicalMemory><AvailablePhysicalMemory>524288"
        "</AvailablePhysicalMemory></MemoryRecord></Record>"
    )


def _oom(record_id: int, ticks: int, event: Mapping[str, Any]) -> str:
    node = int(event.get("node", 0))
    return (
        f'<Record id="{record_id}" type="{OOM}" time="{ticks}"><OOM><Action>FAIL_PAGE_ALLOCATION</Action>'
        "<Resources>1</Resources><Task>0x000000A1B2C3D4E8</Task><Pool>2</Pool></OOM>"
        f'<MemoryNode id="{node}"><TargetMemory>16777216</TargetMemory></MemoryNode>'
        "<MemoryRecord><MemoryUtilization>100</MemoryUtilization></MemoryRecord></Record>"
    )


def ring_buffer_rows(
    spec: Mapping[str, Any] | None, since: float, now: float, boot: float
) -> list[dict[str, object]]:
    """The rows of sys.dm_os_ring_buffers at scenario time `now`, SQL Server (re)started at `since`, the OS
    `boot` seconds before scenario time 0."""
    if not spec:
        return []
    capacity = int(spec.get("capacity", DEFAULT_CAPACITY))
    events: dict[str, list[tuple[float, Any]]] = {RESOURCE_MONITOR: [], OOM: []}
    for event in spec.get("resource_monitor", []) or []:
        events[RESOURCE_MONITOR] += [(t, ("rm", event)) for t in _times(event, since, now)]
    for event in spec.get("oom", []) or []:
        events[OOM] += [(t, ("oom", event)) for t in _times(event, since, now)]
    for event in spec.get("raw", []) or []:
        events.setdefault(str(event["type"]), [])
        events[str(event["type"])] += [(t, ("raw", event)) for t in _times(event, since, now)]
    rows: list[dict[str, object]] = []
    for buffer_type, listed in events.items():
        listed.sort(key=lambda e: e[0])
        numbered = list(enumerate(listed))[
            -capacity:
        ]  # ids from 0 since the (re)start; a wrap drops the oldest
        for record_id, (t, (kind, event)) in numbered:
            ticks = int((boot + t) * 1000)
            if kind == "rm":
                record = _resource_monitor(record_id, ticks, event)
            elif kind == "oom":
                record = _oom(record_id, ticks, event)
            else:
                record = str(event["record"]).format(id=record_id, time=ticks)
            rows.append({"ring_buffer_type": buffer_type, "timestamp": ticks, "record": record})
    return rows
