"""Bytes SQL Server wrote per volume and file type, summed over every database's files.

SQL Server's per-file counters vanish with their file (a database dropped, detached or taken offline),
so a plain sum would go down and look like a counter reset. This collector keeps, per file, what it has
seen written; a vanished file's share stays with its volume. Series are per (volume, file_type): their
number grows with volumes, never with databases.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import file_stats, files, sys_info
from .base import FamilyBuilder, MissingData, ScrapeContext, SectionResult

name = "volumes"
sections = (file_stats.TAG,)
SECTIONS = (file_stats.SECTION, files.FILES_SECTION)
MEMO_KEY = "volume_writes"
TOTALS_KEY = "volume_written_totals"  # {(volume, file_type): bytes}, for the ssd_pools collector


@dataclass
class _Seen:
    last: int  # the file's counter at the previous scrape
    total: float  # bytes attributed to this file since the exporter first saw it
    volume: str | None
    file_type: str


@dataclass
class WriteAccumulator:
    files: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    retired: dict[tuple[str, str], float] = field(default_factory=dict)
    start_time: float | None = None
    generation: int = -1  # the file catalog's generation the placements were made with
    started: bool = False  # the first update sets the baseline

    def update(
        self,
        readings: Mapping[tuple[int, int], int],
        start_time: float | None,
        place: object,
        generation: int = 0,
    ) -> None:
        """`readings`: bytes written per file now; `place(key)` -> (volume or None, file_type), asked
        again only for new files, files not placed yet, or when the catalog's generation moved on."""
        # A restart moves the start time AND sends every counter back towards 0; a start time that moves
        # alone (a clock stepped on the server) is not a restart, and counting every file's bytes again
        # would double them.
        restarted = (
            start_time is not None
            and self.start_time is not None
            and start_time != self.start_time
            and any(key in self.files and written < self.files[key].last for key, written in readings.items())
        )
        if start_time is not None:
            self.start_time = start_time
        replace = generation != self.generation
        self.generation = generation
        for key in [k for k in self.files if k not in readings]:
            gone = self.files.pop(key)
            if gone.volume is not None:
                slot = (gone.volume, gone.file_type)
                self.retired[slot] = self.retired.get(slot, 0.0) + gone.total
        baseline = not self.started
        self.started = True
        for key, written in readings.items():
            seen = self.files.get(key)
            if seen is None:
                # Files present when the exporter starts are a baseline: the counter starts at 0, so an
                # exporter restart reads to Prometheus as a plain reset and no byte is counted twice.
                # A file that appears later is new since the previous scrape: all it wrote is new.
                volume, file_type = place(key)  # type: ignore[operator]
                self.files[key] = _Seen(written, 0.0 if baseline else float(written), volume, file_type)
                continue
            # After a restart every counter starts again from 0; a lower reading without a known restart
            # means the file was recreated under the same ids.
            delta = written if restarted or written < seen.last else written - seen.last
            seen.total += delta
            seen.last = written
            if replace or seen.volume is None:
                volume, file_type = place(key)  # type: ignore[operator]
                if (
                    volume is not None
                    and seen.volume is not None
                    and (volume, file_type)
                    != (
                        seen.volume,
                        seen.file_type,
                    )
                ):
                    # The file's label changed (a mount folder resolved, a volume_map edit): what it wrote
                    # so far stays where it was counted, so neither series ever goes down.
                    slot = (seen.volume, seen.file_type)
                    self.retired[slot] = self.retired.get(slot, 0.0) + seen.total
                    seen.total = 0.0
                if volume is not None:
                    seen.volume = volume
                seen.file_type = file_type

    def totals(self) -> dict[tuple[str, str], float]:
        out = dict(self.retired)
        for seen in self.files.values():
            if seen.volume is not None:
                slot = (seen.volume, seen.file_type)
                out[slot] = out.get(slot, 0.0) + seen.total
        return out


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

    start = ctx.memo.get(sys_info.MEMO_KEY)
    acc.update(readings, start if isinstance(start, float) else None, place, cat.generation)
    totals = acc.totals()
    ctx.memo[TOTALS_KEY] = totals
    for (volume, file_type), written in sorted(totals.items()):
        out.counter(
            "mssql_volume_written_bytes_total",
            "Bytes SQL Server wrote to database files on this volume (kept when databases go away).",
            written,
            {"volume": volume, "file_type": file_type},
        )
