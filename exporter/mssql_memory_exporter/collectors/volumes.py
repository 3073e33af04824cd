"""Bytes SQL Server wrote per volume and file type, summed over every database's files.

SQL Server's per-file counters vanish with their file (a database dropped, detached or taken offline),
so a plain sum would go down and look like a counter reset. This collector keeps, per file, what it has
seen written; a vanished file's share stays with its volume. Series are per (volume, file_type).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from . import file_stats, files, sys_info
from .base import CollectorRecord, FamilyBuilder, MissingData, ScrapeContext, SectionResult, rows_of

SECTIONS = (file_stats.SECTION, files.FILES_SECTION)
MEMO_KEY = "volume_writes"
TOTALS_KEY = "volume_written_totals"  # (this scrape, {(volume, file_type): bytes}), for ssd_pools
# How long a vanished file's last reading is kept. A file back within this time (a database brought
# online again) is counted from that reading, not in full; a file that stays away longer is forgotten,
# so dropped databases do not pile up, and counted in full should it ever come back.
VANISHED_KEEP_SECONDS = 86_400.0

Placement = Callable[[tuple[int, int]], tuple[str | None, str]]


@dataclass
class _Seen:
    last: int  # the file's counter at the last scrape that reported it
    total: float  # bytes attributed to this file since the exporter first saw it
    volume: str | None
    file_type: str
    gone_at: float | None = None  # when a scrape first missed it


@dataclass
class WriteAccumulator:
    files: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    vanished: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    retired: dict[tuple[str, str], float] = field(default_factory=dict)
    instance: object = None  # what identifies the running instance at the previous scrape, if read
    generation: int = -1  # the file catalog's generation the placements were made with
    started: bool = False  # the first update sets the baseline

    def update(
        self,
        readings: Mapping[tuple[int, int], int],
        instance: object,
        place: Placement,
        generation: int = 0,
        now: float = 0.0,
    ) -> None:
        """`readings`: bytes written per file now; `instance`: SQL Server's start tick this scrape (None
        when not read); `place(key)` -> (volume or None, file_type), asked again only for new files,
        files not placed yet, or when the catalog's generation moved on; `now`: unix time."""
        # The start tick is the OS tick count when SQL Server started: it changes with every restart and
        # with nothing else, whatever the server's wall clock does. Compared only with the scrape just
        # before: across a scrape without it, a restart is recognised per file instead (counter lower).
        restarted = instance is not None and self.instance is not None and instance != self.instance
        self.instance = instance
        replace = generation != self.generation
        self.generation = generation
        for key in [k for k in self.files if k not in readings]:
            gone = self.files.pop(key)
            gone.gone_at = now
            self.vanished[key] = gone
        self._expire(now, restarted)
        baseline = not self.started
        self.started = True
        for key, written in readings.items():
            seen = self.files.get(key)
            if seen is None and key in self.vanished:
                seen = self.files[key] = self.vanished.pop(key)
                seen.gone_at = None
            if seen is None:
                # Files present when the exporter starts are a baseline: the totals start at 0, so an
                # exporter restart reads to Prometheus as a plain reset and no byte is counted twice.
                # A file that appears later is new since the previous scrape: all it wrote is new.
                volume, file_type = place(key)
                self.files[key] = _Seen(written, 0.0 if baseline else float(written), volume, file_type)
                continue
            # After a restart every counter starts again from 0; a lower reading without a known restart
            # means the counter started again anyway (the file recreated under the same ids, a database
            # brought back online, a restart while the start tick was not read).
            delta = written if restarted or written < seen.last else written - seen.last
            seen.total += delta
            seen.last = written
            if replace or seen.volume is None:
                self._place(seen, place(key))

    def _expire(self, now: float, restarted: bool) -> None:
        for key, gone in list(self.vanished.items()):
            if restarted:
                gone.last = 0  # its counter, should the file come back, started again with the instance
            if gone.gone_at is not None and now - gone.gone_at > VANISHED_KEEP_SECONDS:
                del self.vanished[key]
                if gone.volume is not None:
                    slot = (gone.volume, gone.file_type)
                    self.retired[slot] = self.retired.get(slot, 0.0) + gone.total

    def _place(self, seen: _Seen, placed: tuple[str | None, str]) -> None:
        volume, file_type = placed
        if (
            volume is not None
            and seen.volume is not None
            and (volume, file_type) != (seen.volume, seen.file_type)
        ):
            # The file's label changed (a mount folder resolved, a volume_map edit): what it wrote so far
            # stays where it was counted, so neither series ever goes down.
            slot = (seen.volume, seen.file_type)
            self.retired[slot] = self.retired.get(slot, 0.0) + seen.total
            seen.total = 0.0
        if volume is not None:
            seen.volume = volume
        seen.file_type = file_type

    def totals(self) -> dict[tuple[str, str], float]:
        out = dict(self.retired)
        for seen in (*self.files.values(), *self.vanished.values()):
            if seen.volume is not None:
                slot = (seen.volume, seen.file_type)
                out[slot] = out.get(slot, 0.0) + seen.total
        return out


def totals_of_this_scrape(ctx: ScrapeContext) -> dict[tuple[str, str], float] | None:
    """The totals this scrape computed, or None if it computed none (this collector failed): the memo
    outlives the scrape, and an earlier scrape's totals must not be exported as this one's."""
    kept = ctx.memo.get(TOTALS_KEY)
    if isinstance(kept, tuple) and kept[0]() is ctx:
        return kept[1]
    return None


def _start_tick(results: Mapping[str, SectionResult]) -> object:
    for row in rows_of(results, sys_info.TAG):
        return row.get("sqlserver_start_time_ms_ticks")
    return None


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    cat = files.update(results, ctx)
    if not cat.refreshed:
        raise MissingData("file names not read yet")
    acc = ctx.memo.get(MEMO_KEY)
    if not isinstance(acc, WriteAccumulator):
        acc = ctx.memo[MEMO_KEY] = WriteAccumulator()
    readings = file_stats.bytes_written(results)
    files.require_visible(readings, results, cat, ctx)

    def place(key: tuple[int, int]) -> tuple[str | None, str]:
        f = cat.files.get(key)
        if f is None:
            return None, "data"  # placed once its name arrives (require_visible asked for a refresh)
        return cat.volume_of(f, ctx), f.file_type

    acc.update(readings, _start_tick(results), place, cat.generation, ctx.now)
    totals = acc.totals()
    ctx.memo[TOTALS_KEY] = (weakref.ref(ctx), totals)
    for (volume, file_type), written in sorted(totals.items()):
        out.counter(
            "mssql_volume_written_bytes_total",
            "Bytes SQL Server wrote to database files on this volume, counted by the exporter since it"
            " started (kept when databases go away and across SQL Server restarts).",
            written,
            {"volume": volume, "file_type": file_type},
        )


COLLECTOR = CollectorRecord(
    name="volumes",
    sections=(file_stats.TAG,),
    collect=collect,
    defines=SECTIONS,
)
