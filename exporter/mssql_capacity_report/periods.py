"""Splitting an instance's history into periods of one memory size (Micron: tempdb writes follow memory).

The endpoint flags the steps of the report's grid where something breaks the history (collect.py):

- `memory` at t: max server memory or target memory moved by more than the set share within
  (t - 2 steps, t]. That window belongs to no period, so no write rate mixes two memory sizes.
- `data_starts` at t: data in (t - step, t] and none in the `gap` steps before: a period can begin
  at t.
- `data_stops` at t: data in (t - (gap + 1) steps, t - gap steps] and none after: the period ends at
  t - (gap + 1) steps, before the last step that holds data only in part (a rate over a window the data
  covers only in part would read low).

What is left between the breaks, inside (range start, range end], are the periods. Their windows end on
the grid, which is anchored at the range end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Break", "MemoryPeriod", "periods_between"]


@dataclass(frozen=True)
class Break:
    kind: str  # "memory", "data_starts" or "data_stops"
    at: float  # unix seconds, a step of the grid


@dataclass(frozen=True)
class MemoryPeriod:
    start: float  # unix seconds; the period is the window (start, end]
    end: float


def _with_data(
    breaks: list[Break], start: float, end: float, step: float, gap: int
) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    data_events = [b for b in breaks if b.kind in ("data_starts", "data_stops")]
    begin: float | None = start
    if data_events and data_events[0].kind == "data_starts":
        begin = None  # nothing before the first start
    for event in data_events:
        if event.kind == "data_starts":
            begin = event.at if begin is None else begin
        elif begin is not None:
            spans.append((begin, event.at - (gap + 1) * step))
            begin = None
    if begin is not None:
        spans.append((begin, end))
    return spans


def periods_between(
    breaks: Iterable[Break], start: float, end: float, step: float, gap: int = 1
) -> list[MemoryPeriod]:
    ordered = sorted(breaks, key=lambda b: b.at)
    zones = [(b.at - 2 * step, b.at) for b in ordered if b.kind == "memory"]
    periods: list[MemoryPeriod] = []
    for span_start, span_end in _with_data(ordered, start, end, step, gap):
        cursor = max(span_start, start)
        for zone_start, zone_end in zones:
            if zone_end <= cursor or zone_start >= span_end:
                continue
            if zone_start > cursor:
                periods.append(MemoryPeriod(cursor, zone_start))
            cursor = max(cursor, zone_end)
        if min(span_end, end) > cursor:
            periods.append(MemoryPeriod(cursor, min(span_end, end)))
    return periods
