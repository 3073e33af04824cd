"""tempdb's space in a scenario: what its data files hold, how they autogrow, and the volumes they grow into.

Scenario YAML, on a tempdb file (database 2) next to its I/O rates:
  max_size_mb: 32768      # absent: unlimited (max_size -1); 0: no growth allowed
  growth_mb: 64           # the autogrowth step (default 64, SQL Server's default for tempdb); 0: fixed size
  growth_percent: 10      # instead of growth_mb: each step adds this share of the current size
  usage:                  # data files only: what the file holds, in MB, each kind one of
    version_store: {mb: 100, mb_s: 0.5}                         # a start and a growth per second
    internal_objects: {mb: 50, steps: [[600, 30000], [900, 50]]}  # a new start at each step (a spill)
    user_objects: 20                                            # a constant
    mixed_extents: 4
  log_used: {mb: 400, mb_s: 0.4}  # the LOG file only: what its log holds, in MB, in the same shapes
  log_reuse_wait: ACTIVE_TRANSACTION  # the LOG file only: sys.databases.log_reuse_wait_desc (NOTHING)
and once per scenario:
  volume_space: {/var/opt/mssql/tempdb: {total_gb: 500, free_gb: 120}}  # by path prefix

Sizes are in MB of 10^6 bytes, as size_mb in files.py. Growth per second counts from the later of the
step and the instance's start: tempdb is recreated at every start, so what it held is gone.

Each data file starts at its size_mb (what sys.master_files keeps) when the instance starts. When what
one holds outgrows it, every data file that may grow grows by its own step at once, as SQL Server grows
tempdb's data files since 2016 (AUTOGROW_ALL_FILES); files that start uneven stay uneven. A step stops
at the file's max_size (as SQL Server does), and a growth happens only if every volume has room for the
steps of the files on it; otherwise none happens and what does not fit is not held: the file is full,
where SQL Server would fail the allocation with error 1105. Whatever a file does not hold is
unallocated.

The log file grows alone, by its own step, when what its log holds outgrows it: up to its max_size, and
only if its volume has room for the step. It never shrinks until the instance restarts (a checkpoint
truncates the log inside the file; it does not give the space back). What does not fit is not held: the
log is full, where SQL Server would fail the change with error 9002. tempdb.sys.dm_db_log_space_usage
reports the log's size and min(what it holds, its size).

The data files and the log draw on the same volumes, so their growths happen in the order of time: each
growth event (all data files at once, or the log alone) comes at the first moment its files need it,
found by bisection on the usage, which only grows between steps. A growth that does not fit on its
volume never fits later (free space only shrinks and the step stays the same): that kind grows no more.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MB = 1_000_000
PAGE = 8192
TEMPDB_ID = 2
KINDS = ("version_store", "user_objects", "internal_objects", "mixed_extents")
# sys.databases.log_reuse_wait_desc and its log_reuse_wait code (Microsoft's sys.databases page; codes
# 10-12 are for internal use, and the rarer ones the stand-in does not need are left out).
REUSE_WAITS = {
    "NOTHING": 0,
    "CHECKPOINT": 1,
    "LOG_BACKUP": 2,
    "ACTIVE_BACKUP_OR_RESTORE": 3,
    "ACTIVE_TRANSACTION": 4,
    "DATABASE_MIRRORING": 5,
    "REPLICATION": 6,
    "DATABASE_SNAPSHOT_CREATION": 7,
    "LOG_SCAN": 8,
    "AVAILABILITY_REPLICA": 9,
    "OLDEST_PAGE": 13,
    "XTP_CHECKPOINT": 16,
}
# Growth events are placed in time to within this many seconds.
EVENT_PRECISION_S = 1e-3
# What sys.dm_os_volume_stats reports for a volume the scenario does not describe.
DEFAULT_TOTAL_BYTES = 4 * 10**12
DEFAULT_FREE_BYTES = 10**12


def pages(mb: float) -> int:
    return int(mb * MB / PAGE)


@dataclass(frozen=True)
class Usage:
    """One kind of usage over time: (scenario time, MB) starts, each growing at mb_s from then on."""

    starts: tuple[tuple[float, float], ...]
    mb_s: float = 0.0

    @classmethod
    def parse(cls, raw: object, where: str) -> Usage:
        if isinstance(raw, int | float):
            return cls(((0.0, float(raw)),))
        if not isinstance(raw, Mapping) or "mb" not in raw:
            raise ValueError(f"{where}: expected MB or a mapping with mb (and mb_s, steps), got {raw!r}")
        starts = [(0.0, float(raw["mb"]))] + [(float(t), float(v)) for t, v in raw.get("steps", [])]
        return cls(tuple(sorted(starts)), float(raw.get("mb_s", 0.0)))

    def pages_at(self, now: float, since: float) -> int:
        at, mb = self.starts[0]
        for t, v in self.starts:
            if t <= now:
                at, mb = t, v
        return pages(mb + self.mb_s * max(0.0, now - max(at, since)))


def _peak(usages: Sequence[Usage], now: float, since: float) -> int:
    """The most `usages` held at once since the instance started: usage only grows between steps, so the
    peak is now, just before a step, or at one."""
    times = {now}
    for usage in usages:
        times.update(x for t, _ in usage.starts[1:] if since < t <= now for x in (t - 1e-6, t))
    return max(sum(u.pages_at(t, since) for u in usages) for t in times)


@dataclass(frozen=True)
class SpaceSpec:
    """A tempdb file's growth settings and what it holds: a data file by usage kind, the log as a whole."""

    max_size_pages: int  # -1 unlimited, as sys.database_files.max_size
    growth: int  # pages, or percent when percent is set; 0 fixed
    percent: bool
    usage: Mapping[str, Usage]
    log_used: Usage | None = None  # the log file: what its log holds
    log_reuse_wait: str = "NOTHING"  # the log file: sys.databases.log_reuse_wait_desc

    @classmethod
    def parse(cls, raw: Mapping[str, Any], where: str) -> SpaceSpec:
        if "growth_percent" in raw and "growth_mb" in raw:
            raise ValueError(f"{where}: give growth_mb or growth_percent, not both")
        percent = "growth_percent" in raw
        growth = int(raw["growth_percent"]) if percent else pages(float(raw.get("growth_mb", 64)))
        max_mb = raw.get("max_size_mb")
        usage = raw.get("usage") or {}
        unknown = set(usage) - set(KINDS)
        if unknown:
            raise ValueError(f"{where}: unknown usage kinds {sorted(unknown)}; known: {KINDS}")
        is_log = int(raw.get("type", 0)) == 1
        if is_log and usage:
            raise ValueError(f"{where}: usage is for data files; a log file takes log_used")
        if not is_log and ("log_used" in raw or "log_reuse_wait" in raw):
            raise ValueError(f"{where}: log_used and log_reuse_wait are for the log file (type: 1)")
        reuse_wait = str(raw.get("log_reuse_wait", "NOTHING"))
        if reuse_wait not in REUSE_WAITS:
            raise ValueError(f"{where}: log_reuse_wait {reuse_wait!r}; known: {sorted(REUSE_WAITS)}")
        log_used = raw.get("log_used")
        return cls(
            max_size_pages=-1 if max_mb is None else pages(float(max_mb)),
            growth=growth,
            percent=percent,
            usage={kind: Usage.parse(value, f"{where}.usage.{kind}") for kind, value in usage.items()},
            log_used=None if log_used is None else Usage.parse(log_used, f"{where}.log_used"),
            log_reuse_wait=reuse_wait,
        )

    def peak_pages(self, now: float, since: float) -> int:
        """The most the data file had to hold at once since the instance started."""
        return _peak(list(self.usage.values()), now, since)

    def log_peak_pages(self, now: float, since: float) -> int:
        """The most the log had to hold at once since the instance started (0 without log_used)."""
        return 0 if self.log_used is None else _peak([self.log_used], now, since)

    def log_pages(self, now: float, since: float) -> int:
        """What the log wants to hold now (0 without log_used)."""
        return 0 if self.log_used is None else self.log_used.pages_at(now, since)

    def step(self, size: int) -> int:
        """Pages the next autogrowth adds to a file of `size` pages (0: it does not grow)."""
        if self.max_size_pages == 0:
            return 0
        step = size * self.growth // 100 if self.percent else self.growth
        if self.max_size_pages > 0:
            step = min(step, self.max_size_pages - size)
        return max(step, 0)


@dataclass(frozen=True)
class FileSpace:
    """One tempdb file at one moment."""

    file_id: int
    size_pages: int
    held: Mapping[str, int]  # pages per usage kind, capped at what the file could hold
    unallocated_pages: int
    volume: str
    log_used_pages: int = 0  # the log file: what its log holds, capped at its size


@dataclass(frozen=True)
class VolumeSpace:
    total_bytes: int
    free_bytes: int  # before tempdb grew past its start-up size


class TempdbModel:
    """tempdb's files (path, start-up size, settings) and the volumes they live on."""

    def __init__(
        self,
        files: Sequence[tuple[int, str, int, int, SpaceSpec]],  # (file_id, path, type, start-up pages, spec)
        volume_space: Mapping[str, Mapping[str, float]] | None = None,
    ) -> None:
        self.files = list(files)
        self.volumes = {
            prefix: VolumeSpace(int(float(v["total_gb"]) * 10**9), int(float(v["free_gb"]) * 10**9))
            for prefix, v in (volume_space or {}).items()
        }
        # Sizes by (now, since): one scrape asks for them once per view and per file.
        self._sizes: dict[tuple[float, float], dict[int, int]] = {}

    @property
    def log_reuse_wait(self) -> str:
        """sys.databases.log_reuse_wait_desc of tempdb: what its log file's spec says."""
        for _, _, file_type, _, spec in self.files:
            if file_type == 1:
                return spec.log_reuse_wait
        return "NOTHING"

    def volume_of(self, path: str) -> str:
        """The volume_space prefix that holds `path` (longest first), else the file's directory."""
        best = ""
        for prefix in self.volumes:
            if path.lower().startswith(prefix.lower()) and len(prefix) > len(best):
                best = prefix
        return best or (path.rsplit("\\", 1)[0] if "\\" in path else posixpath.dirname(path))

    def space(self, now: float, since: float) -> list[FileSpace]:
        sizes = self._grown_sizes(now, since)
        out = []
        for file_id, path, _file_type, _startup, spec in self.files:
            size = sizes[file_id]
            wanted = {kind: usage.pages_at(now, since) for kind, usage in spec.usage.items()}
            held, room = {}, size
            for kind in KINDS:  # what does not fit is not held: the file is full
                held[kind] = min(wanted.get(kind, 0), room)
                room -= held[kind]
            log_used = min(spec.log_pages(now, since), size)  # what does not fit is not held: full
            out.append(FileSpace(file_id, size, held, room, self.volume_of(path), log_used))
        return out

    def _grown_sizes(self, now: float, since: float) -> dict[int, int]:
        """Each file's size now. A file that grew keeps its size after the usage drops (until the instance
        restarts), so the files are sized for the most each had to hold since the start."""
        key = (now, since)
        if key not in self._sizes:
            if len(self._sizes) > 64:
                self._sizes.clear()
            self._sizes[key] = self._grow(now, since)
        return dict(self._sizes[key])

    def _grow(self, now: float, since: float) -> dict[int, int]:
        sizes = {file_id: startup for file_id, _, _, startup, _ in self.files}
        data = [(f, self.volume_of(path), spec) for f, path, kind, _, spec in self.files if kind == 0]
        logs = [
            (f, self.volume_of(path), spec)
            for f, path, kind, _, spec in self.files
            if kind == 1 and spec.log_used is not None
        ]
        free = {volume: self._volume(volume).free_bytes for _, volume, _ in data + logs}

        def data_due(at: float) -> bool:
            return any(s.peak_pages(at, since) > sizes[f] and s.step(sizes[f]) > 0 for f, _, s in data)

        def log_due(f: int, s: SpaceSpec) -> Callable[[float], bool]:
            return lambda at: s.log_peak_pages(at, since) > sizes[f] and s.step(sizes[f]) > 0

        # What grows together in one event: every data file at once; each log file alone.
        events: list[tuple[Callable[[float], bool], list[tuple[int, str, SpaceSpec]]]] = [(data_due, data)]
        events += [(log_due(f, spec), [(f, volume, spec)]) for f, volume, spec in logs]
        growing = list(range(len(events)))
        start = since
        while True:
            due = [(_first(events[i][0], start, now), i) for i in growing if events[i][0](now)]
            if not due:
                return sizes
            at, which = min(due)
            group = events[which][1]
            steps = {file_id: spec.step(sizes[file_id]) for file_id, _, spec in group}
            need = dict.fromkeys(free, 0)
            for file_id, volume, _ in group:
                need[volume] += steps[file_id] * PAGE
            if any(need[volume] > free[volume] for volume in need):
                growing.remove(which)  # the growth fails: these files are as large as they get
                continue
            for file_id, volume, _ in group:
                sizes[file_id] += steps[file_id]
                free[volume] -= steps[file_id] * PAGE
            start = at

    def _volume(self, key: str) -> VolumeSpace:
        return self.volumes.get(key, VolumeSpace(DEFAULT_TOTAL_BYTES, DEFAULT_FREE_BYTES))

    def volume_bytes(self, path: str, now: float, since: float) -> tuple[int, int]:
        """(total, available) bytes of the volume holding `path`: its free space less what tempdb's files
        grew into since the instance started."""
        key = self.volume_of(path)
        volume = self._volume(key)
        grown = sum(
            (f.size_pages - startup) * PAGE
            for f, (_, _, _, startup, _) in zip(self.space(now, since), self.files, strict=True)
            if f.volume == key
        )
        return volume.total_bytes, max(0, volume.free_bytes - grown)


def _first(due: Callable[[float], bool], lo: float, hi: float) -> float:
    """The first moment in [lo, hi] that `due` holds, given it holds at hi and, once it holds, it holds
    from then on (usage only grows between steps, and what is due is measured against its peak)."""
    if due(lo):
        return lo
    while hi - lo > EVENT_PRECISION_S:
        mid = (lo + hi) / 2
        if due(mid):
            hi = mid
        else:
            lo = mid
    return hi
