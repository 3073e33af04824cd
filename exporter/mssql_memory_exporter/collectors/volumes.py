"""I/O per volume and file type, summed over every database's files: bytes, operations and stall time of
reads and writes.

SQL Server's per-file counters vanish with their file (a database dropped, detached or taken offline),
so a plain sum would go down and look like a counter reset. This collector keeps, per file, the reading
it saw last, and adds each file's growth to the totals of its (volume, file_type): what a vanished file
added stays there. Series are per (volume, file_type), never per file, whatever the number of databases.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import add, ge, itemgetter, sub

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from . import file_stats, files, sys_info
from .base import CollectorRecord, ScrapeContext, SectionResult, rows_of

SECTIONS = (file_stats.SECTION, files.FILES_SECTION)
MEMO_KEY = "volume_io"
TOTALS_KEY = "volume_written_totals"  # (this scrape, {(volume, file_type): bytes}), for ssd_pools
# How long a vanished file's last reading is kept. A file back within this time (a database brought
# online again) is counted from that reading, not in full; a file that stays away longer is forgotten,
# so dropped databases do not pile up, and counted in full should it ever come back.
VANISHED_KEEP_SECONDS = 86_400.0

Placement = Callable[[tuple[int, int]], tuple[str | None, str]]
Reading = tuple[int, ...]  # one file's counters, in file_stats.IO_COUNTERS order

SLOT = (
    Label("volume", "the volume the files live on"),
    Label("file_type", "`data` or `log`"),
)
KEPT = (
    "accumulated per file by the exporter **since the exporter started** and summed per volume and file type"
)


def _counter(name: str, help: str, unit: str, column: str, source: str, question: str) -> MetricSpec:
    return MetricSpec(name, "counter", help, unit, source, question, SLOT, columns=(column,))


WRITTEN_BYTES = _counter(
    "mssql_volume_written_bytes_total",
    "Bytes SQL Server wrote to database files on this volume, counted by the exporter since it"
    " started (kept when databases go away and across SQL Server restarts).",
    "bytes",
    "num_of_bytes_written",
    "`sys.dm_io_virtual_file_stats(NULL, NULL)` `num_of_bytes_written` of **every** database file (tempdb "
    f"included), {KEPT}",
    "How much did SQL Server write to each volume, by file type: the writes that wear its SSDs?",
)
WRITES = _counter(
    "mssql_volume_writes_total",
    "Writes to database files on this volume.",
    "write operations",
    "num_of_writes",
    "`num_of_writes`, kept the same way",
    "How many writes did the volume's database files take?",
)
WRITE_STALL_SECONDS = _counter(
    "mssql_volume_write_stall_seconds_total",
    "Seconds writers waited for writes to database files on this volume.",
    "seconds",
    "io_stall_write_ms",
    "`io_stall_write_ms` / 1000, kept the same way",
    "How long did writers wait for their writes to complete, summed over the writes?",
)
READ_BYTES = _counter(
    "mssql_volume_read_bytes_total",
    "Bytes SQL Server read from database files on this volume.",
    "bytes",
    "num_of_bytes_read",
    "`num_of_bytes_read`, kept the same way",
    "How much did SQL Server read from each volume?",
)
READS = _counter(
    "mssql_volume_reads_total",
    "Reads from database files on this volume.",
    "read operations",
    "num_of_reads",
    "`num_of_reads`, kept the same way",
    "How many reads did the volume's database files take?",
)
READ_STALL_SECONDS = _counter(
    "mssql_volume_read_stall_seconds_total",
    "Seconds readers waited for reads from database files on this volume.",
    "seconds",
    "io_stall_read_ms",
    "`io_stall_read_ms` / 1000, kept the same way",
    "How long did readers wait for their reads to complete, summed over the reads?",
)
# (counter index, metric, scale): every metric is per (volume, file_type).
METRICS = tuple(
    (file_stats.IO_COUNTERS.index(spec.columns[0]), spec, scale)
    for spec, scale in (
        (WRITTEN_BYTES, 1.0),
        (WRITES, 1.0),
        (WRITE_STALL_SECONDS, 1e-3),
        (READ_BYTES, 1.0),
        (READS, 1.0),
        (READ_STALL_SECONDS, 1e-3),
    )
)


@dataclass
class _Seen:
    last: Reading  # the file's counters at the last scrape that reported them
    slot: tuple[str, str] | None  # (volume, file_type); None while its volume is not known
    file_type: str
    pending: Reading | None = None  # what it added before it had a volume, counted once it has one
    gone_at: float | None = None  # when a scrape first missed it


def _column_sums(rows: list[Reading]) -> Reading:
    return tuple(sum(map(itemgetter(i), rows)) for i in range(len(rows[0])))


@dataclass
class IoAccumulator:
    width: int = len(file_stats.IO_COUNTERS)
    files: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    vanished: dict[tuple[int, int], _Seen] = field(default_factory=dict)
    slots: dict[tuple[str, str], Reading] = field(default_factory=dict)  # the totals, exact integers
    instance: object = None  # what identifies the running instance at the previous scrape, if read
    generation: int = -1  # the file catalog's generation the placements were made with
    started: bool = False  # the first update sets the baseline

    def update(
        self,
        readings: Mapping[tuple[int, int], Reading],
        instance: object,
        place: Placement,
        generation: int = 0,
        now: float = 0.0,
    ) -> None:
        """`readings`: each file's counters now; `instance`: SQL Server's start tick this scrape (None
        when not read); `place(key)` -> (volume or None, file_type), asked again only for new files,
        files not placed yet, or when the catalog's generation moved on; `now`: unix time."""
        # The start tick is the OS tick count when SQL Server started: it changes with every restart and
        # with nothing else, whatever the server's wall clock does. Compared only with the scrape just
        # before: across a scrape without it, a restart is recognised per file instead (counter lower).
        restarted = instance is not None and self.instance is not None and instance != self.instance
        self.instance = instance
        replace = generation != self.generation
        self.generation = generation
        for key in self.files.keys() - readings.keys():
            gone = self.files.pop(key)
            gone.gone_at = now
            self.vanished[key] = gone
        self._expire(now, restarted)
        baseline = not self.started
        self.started = True
        # Per slot, the readings now and the readings they grew from: summed column by column at the
        # end, so ten thousand files cost two list appends each rather than a tuple of deltas each.
        grown: dict[tuple[str, str], list[Reading]] = {}
        grown_from: dict[tuple[str, str], list[Reading]] = {}
        for key, new in readings.items():
            seen = self.files.get(key)
            if seen is None:
                seen = self._arrived(key, new, place, baseline)
                if seen is None:
                    continue
            if replace or seen.slot is None:
                self._place(seen, place(key))
            last = seen.last
            if new == last and not restarted:
                continue  # an idle file: most of them on an instance with thousands of databases
            seen.last = new
            # After a restart every counter starts again from 0; a lower reading without a known restart
            # means the counters started again anyway (the file recreated under the same ids, a database
            # brought back online, a restart while the start tick was not read).
            reset = restarted or not all(map(ge, new, last))
            slot = seen.slot
            if slot is None:
                self._pend(seen, new if reset else tuple(map(sub, new, last)))
                continue
            grown.setdefault(slot, []).append(new)
            if not reset:
                grown_from.setdefault(slot, []).append(last)
        for slot, rows in grown.items():
            delta = _column_sums(rows)
            if slot in grown_from:
                delta = tuple(map(sub, delta, _column_sums(grown_from[slot])))
            self._add(slot, delta)

    def _arrived(self, key: tuple[int, int], new: Reading, place: Placement, baseline: bool) -> _Seen | None:
        """A file not seen at the previous scrape: back from the vanished (counted from its last reading
        by the caller), or new (returns None once it is counted)."""
        seen = self.vanished.pop(key, None)
        if seen is not None:
            seen.gone_at = None
            self.files[key] = seen
            return seen
        # Files present when the exporter starts are a baseline: the totals start at 0, so an exporter
        # restart reads to Prometheus as a plain reset and no byte is counted twice. A file that appears
        # later is new since the previous scrape: all it did is new.
        volume, file_type = place(key)
        seen = self.files[key] = _Seen(new, None, file_type)
        self._place(seen, (volume, file_type))
        counted = (0,) * self.width if baseline else new  # a baseline file still opens its series at 0
        if seen.slot is None:
            self._pend(seen, counted)
        else:
            self._add(seen.slot, counted)
        return None

    def _add(self, slot: tuple[str, str], delta: Reading) -> None:
        total = self.slots.get(slot)
        self.slots[slot] = delta if total is None else tuple(map(add, total, delta))

    @staticmethod
    def _pend(seen: _Seen, delta: Reading) -> None:
        seen.pending = delta if seen.pending is None else tuple(map(add, seen.pending, delta))

    def _expire(self, now: float, restarted: bool) -> None:
        for key, gone in list(self.vanished.items()):
            if restarted:
                gone.last = (0,) * self.width  # should the file come back, its counters started again
            if gone.gone_at is not None and now - gone.gone_at > VANISHED_KEEP_SECONDS:
                del self.vanished[key]  # what it added stays in its slot

    def _place(self, seen: _Seen, placed: tuple[str | None, str]) -> None:
        # A changed label (a mount folder resolved, a volume_map edit) leaves what the file added so far
        # where it was counted and counts its next growth under the new one, so no series goes down.
        volume, file_type = placed
        seen.file_type = file_type
        if volume is not None:
            seen.slot = (volume, file_type)
        elif seen.slot is not None:
            seen.slot = (seen.slot[0], file_type)
        if seen.slot is not None and seen.pending is not None:
            pending, seen.pending = seen.pending, None
            self._add(seen.slot, pending)

    def totals(self) -> dict[tuple[str, str], Reading]:
        return dict(self.slots)


def totals_of_this_scrape(ctx: ScrapeContext) -> dict[tuple[str, str], float] | None:
    """The written bytes totals this scrape computed, or None if it computed none (this collector
    failed): the memo outlives the scrape, and an earlier scrape's totals must not be exported as this
    one's."""
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
    if not isinstance(acc, IoAccumulator):
        acc = ctx.memo[MEMO_KEY] = IoAccumulator()
    readings = file_stats.io_readings(results)
    files.require_visible(readings, results, cat, ctx)

    def place(key: tuple[int, int]) -> tuple[str | None, str]:
        f = cat.files.get(key)
        if f is None:
            return None, "data"  # placed once its name arrives (require_visible asked for a refresh)
        return cat.volume_of(f, ctx), f.file_type

    acc.update(readings, _start_tick(results), place, cat.generation, ctx.now)
    totals = sorted(acc.totals().items())
    ctx.memo[TOTALS_KEY] = (weakref.ref(ctx), {slot: t[file_stats.WRITTEN] for slot, t in totals})
    for at, spec, scale in METRICS:
        for (volume, file_type), total in totals:
            out.emit(spec, total[at] * scale, {"volume": volume, "file_type": file_type})


COLLECTOR = CollectorRecord(
    name="volumes",
    sections=(file_stats.TAG,),
    collect=collect,
    defines=SECTIONS,
    metrics=tuple(spec for _, spec, _ in METRICS),
    needs=("sys_info",),  # the start tick that tells a restart from a file reset
)
