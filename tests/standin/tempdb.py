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
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MB = 1_000_000
PAGE = 8192
TEMPDB_ID = 2
KINDS = ("version_store", "user_objects", "internal_objects", "mixed_extents")
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


@dataclass(frozen=True)
class SpaceSpec:
    """A tempdb file's growth settings and, for a data file, what it holds."""

    max_size_pages: int  # -1 unlimited, as sys.database_files.max_size
    growth: int  # pages, or percent when percent is set; 0 fixed
    percent: bool
    usage: Mapping[str, Usage]

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
        return cls(
            max_size_pages=-1 if max_mb is None else pages(float(max_mb)),
            growth=growth,
            percent=percent,
            usage={kind: Usage.parse(value, f"{where}.usage.{kind}") for kind, value in usage.items()},
        )

    def peak_pages(self, now: float, since: float) -> int:
        """The most the file had to hold at once since the instance started: usage only grows between
        steps, so the peak is now, just before a step, or at one."""
        times = {now}
        for usage in self.usage.values():
            times.update(x for t, _ in usage.starts[1:] if since < t <= now for x in (t - 1e-6, t))
        return max(sum(u.pages_at(t, since) for u in self.usage.values()) for t in times)

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
            out.append(FileSpace(file_id, size, held, room, self.volume_of(path)))
        return out

    def _grown_sizes(self, now: float, since: float) -> dict[int, int]:
        """Each file's size now. A data file that grew keeps its size after the usage drops (until the
        instance restarts), so the files are sized for the most each had to hold since the start."""
        sizes = {file_id: startup for file_id, _, _, startup, _ in self.files}
        data = [(f, self.volume_of(path), spec) for f, path, kind, _, spec in self.files if kind == 0]
        peaks = {file_id: spec.peak_pages(now, since) for file_id, _, spec in data}
        free = {volume: self._volume(volume).free_bytes for _, volume, _ in data}
        while True:
            steps = {file_id: spec.step(sizes[file_id]) for file_id, _, spec in data}
            if not any(peaks[f] > sizes[f] and steps[f] > 0 for f in peaks):
                return sizes
            need = dict.fromkeys(free, 0)
            for file_id, volume, _ in data:
                need[volume] += steps[file_id] * PAGE
            if any(need[volume] > free[volume] for volume in free):
                return sizes  # the growth fails: the files are as large as they get
            for file_id, volume, _ in data:
                sizes[file_id] += steps[file_id]
                free[volume] -= steps[file_id] * PAGE

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
