"""Host metrics for when the exporter runs on the SQL Server machine itself.

psutil is reached only through the small functions at the top, each of which the collector takes as a
parameter, so tests can feed fixed counters and the topology logic runs against fake sysfs trees.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import psutil

from ..metrics.builder import FamilyBuilder
from .blockdev import (
    DEFAULT_DEV,
    DEFAULT_SYS,
    device_for_devnum,
    member_disks,
    physical_disks,
    resolve_device_path,
    sysfs_name,
)
from .drive_health import DriveMonitor
from .mounts import (
    DEFAULT_MOUNTS,
    Mount,
    PartitionLike,
    flags_say_dax,
    is_dax,
    mount_for,
    mounts_from_partitions,
    read_mounts,
    windows_file_system_flags,
)


@dataclass(frozen=True)
class DiskIO:
    read_bytes: float
    written_bytes: float


@dataclass(frozen=True)
class MemoryFigures:
    total_bytes: float
    available_bytes: float
    swap_total_bytes: float
    swap_used_bytes: float


def psutil_disk_io() -> dict[str, DiskIO]:
    # psutil answers None instead of {} on hosts where it finds no disk statistics at all.
    counters = psutil.disk_io_counters(perdisk=True) or {}
    return {name: DiskIO(float(c.read_bytes), float(c.write_bytes)) for name, c in counters.items()}


def psutil_memory() -> MemoryFigures:
    memory, swap = psutil.virtual_memory(), psutil.swap_memory()
    return MemoryFigures(float(memory.total), float(memory.available), float(swap.total), float(swap.used))


def psutil_processes() -> Iterator[tuple[str, float | None]]:
    """(name, resident bytes) per process; None where the OS denies us the figure."""
    for process in psutil.process_iter(["name", "memory_info"]):
        info = process.info
        memory = info.get("memory_info")
        yield info.get("name") or "", float(memory.rss) if memory is not None else None


def psutil_boot_time() -> float:
    return float(psutil.boot_time())


def psutil_partitions() -> Sequence[PartitionLike]:
    return psutil.disk_partitions(all=False)


def _stat_dev(path: str) -> int:
    return os.stat(path).st_dev


# The name the rule and dashboard generators import.
DISK_WRITTEN = "mssql_host_disk_written_bytes_total"


class HostCollector:
    name = "host"

    def __init__(
        self,
        sys_root: str = DEFAULT_SYS,
        proc_mounts: str = DEFAULT_MOUNTS,
        process_name: str = "sqlservr",
        *,
        dev_root: str = DEFAULT_DEV,
        platform: str = sys.platform,
        disk_io: Callable[[], Mapping[str, DiskIO]] = psutil_disk_io,
        memory: Callable[[], MemoryFigures] = psutil_memory,
        processes: Callable[[], Iterable[tuple[str, float | None]]] = psutil_processes,
        partitions: Callable[[], Sequence[PartitionLike]] = psutil_partitions,
        file_system_flags: Callable[[str], int | None] = windows_file_system_flags,
        stat_dev: Callable[[str], int] = _stat_dev,
        boot_time: Callable[[], float] = psutil_boot_time,
        mounts_max_age: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        drives: DriveMonitor | None = None,
    ) -> None:
        self._drives = drives
        self._sys_root = sys_root
        self._dev_root = dev_root
        self._proc_mounts = proc_mounts
        self._windows = platform.startswith("win")
        # Windows reports the image name with its extension, Linux the bare command name.
        base = process_name.casefold().removesuffix(".exe")
        self._process_names = frozenset({base, base + ".exe"})
        self._disk_io = disk_io
        self._memory = memory
        self._processes = processes
        self._partitions = partitions
        self._file_system_flags = file_system_flags
        self._stat_dev = stat_dev
        self._boot_time = boot_time
        self._mounts_max_age = mounts_max_age
        self._clock = clock
        self._mounts_cache: tuple[float, list[Mount]] | None = None

    # -- disks -------------------------------------------------------------------------------------

    def _disk_figures(self) -> dict[str, DiskIO]:
        counters = self._disk_io()
        if self._windows:
            # Windows names per-disk counters PhysicalDriveN: whole physical disks already.
            return dict(counters)
        # Linux counts a write on every layer it passes (partition, dm, md and the disk), so only whole
        # physical disks are kept: each byte is then counted once per disk it actually reaches, which
        # is what wears the disk (a RAID1 mirror rightly counts twice, once per member).
        disks = physical_disks(self._sys_root)
        # /proc/diskstats spells cciss/c0d0 where sysfs has cciss!c0d0.
        return {sysfs_name(name): io for name, io in counters.items() if sysfs_name(name) in disks}

    def written_bytes_by_disk(self) -> dict[str, float]:
        """Bytes written per physical disk since boot, keyed like the `device` label."""
        return {name: io.written_bytes for name, io in self._disk_figures().items()}

    def boot_time(self) -> float:
        """Unix time the host booted: the disk counters above count from (about) then."""
        return self._boot_time()

    def close(self) -> None:
        """Stop the drive-health thread (a smartctl run in progress finishes or times out on its own)."""
        if self._drives is not None:
            self._drives.stop(timeout=1.0)

    def drive_names(self) -> frozenset[str]:
        """The drives drive_health reads (their config names); empty without it."""
        return self._drives.names() if self._drives is not None else frozenset()

    def drive_written_bytes(self, names: Iterable[str]) -> float | None:
        """Lifetime host bytes the named drives report (drive_health), summed; None without a reading
        of every one of them, or without drive health configured."""
        return self._drives.drive_written_bytes(names) if self._drives is not None else None

    def drive_wear(self, names: Iterable[str]) -> Mapping[str, tuple[float | None, float | None]]:
        """Per named drive with a reading: (life used ratio, its own lifetime host bytes), each None
        where the drive does not report it."""
        return self._drives.drive_wear(names) if self._drives is not None else {}

    # -- mounts ------------------------------------------------------------------------------------

    def mounts(self) -> list[Mount]:
        # File collectors ask once per database file per scrape; mounts change far more rarely than
        # that, so one read serves a while.
        now = self._clock()
        if self._mounts_cache is not None and now - self._mounts_cache[0] < self._mounts_max_age:
            return self._mounts_cache[1]
        if self._windows:
            mounts = mounts_from_partitions(self._partitions())
        else:
            mounts = read_mounts(self._proc_mounts)
        self._mounts_cache = (now, mounts)
        return mounts

    def mount_point_for(self, path: str) -> str | None:
        """Mount point (Linux) or volume root (Windows) holding `path`, None when none does."""
        mount = mount_for(path, self.mounts())
        return mount.mount_point if mount is not None else None

    def disks_for_path(self, path: str) -> set[str]:
        """Physical disks holding `path` (same names as the `device` label); empty when unknown."""
        mount = mount_for(path, self.mounts())
        if mount is None or self._windows:
            # Windows: volume -> PhysicalDriveN needs IOCTL_VOLUME_GET_VOLUME_DISK_EXTENTS, which
            # psutil does not offer; "unknown" is better than a guess.
            return set()
        name = resolve_device_path(mount.device, self._dev_root, self._sys_root)
        disks = member_disks(name, self._sys_root) if name else set()
        if disks:
            return disks
        # Sources like /dev/root, or device nodes a container cannot see: the mount point's device
        # number still leads to the block device when the file system sits on one.
        try:
            number = self._stat_dev(mount.mount_point)
        except OSError:
            return set()
        name = device_for_devnum(os.major(number), os.minor(number), self._sys_root)
        return member_disks(name, self._sys_root) if name else set()

    def dax_mount_points(self) -> list[str]:
        points: list[str] = []
        for mount in self.mounts():
            if self._windows:
                flags = self._file_system_flags(mount.mount_point)
                dax = flags is not None and flags_say_dax(flags)
            else:
                dax = is_dax(mount)
            if dax and mount.mount_point not in points:
                points.append(mount.mount_point)
        return points

    # -- processes ---------------------------------------------------------------------------------

    def sqlservr_resident_bytes(self) -> float | None:
        """Summed RSS of all sqlservr processes (on Linux a small watchdog parent plus the engine; on a
        host with several instances, all of them). None when none runs or none lets us read it.

        With Lock Pages in Memory the buffer pool is allocated as locked (AWE/large) pages that do not
        count in the working set, so this undercounts SQL Server's real footprint badly; the SQL-side
        memory metrics are the authority, this is the OS's view.
        """
        sizes = [
            rss
            for name, rss in self._processes()
            if rss is not None and name.casefold() in self._process_names
        ]
        return sum(sizes) if sizes else None

    # -- exposition --------------------------------------------------------------------------------

    def collect(self, out: FamilyBuilder) -> None:
        for device, io in sorted(self._disk_figures().items()):
            labels = {"device": device}
            out.counter(
                DISK_WRITTEN,
                "Bytes written to a physical disk since boot, as the host OS counts them.",
                io.written_bytes,
                labels,
            )
            out.counter(
                "mssql_host_disk_read_bytes_total",
                "Bytes read from a physical disk since boot, as the host OS counts them.",
                io.read_bytes,
                labels,
            )
        memory = self._memory()
        out.gauge("mssql_host_memory_total_bytes", "Physical memory of the host.", memory.total_bytes)
        out.gauge(
            "mssql_host_memory_available_bytes",
            "Memory the host can give to processes without swapping.",
            memory.available_bytes,
        )
        out.gauge("mssql_host_swap_total_bytes", "Swap space of the host.", memory.swap_total_bytes)
        out.gauge("mssql_host_swap_used_bytes", "Swap space in use on the host.", memory.swap_used_bytes)
        resident = self.sqlservr_resident_bytes()
        if resident is not None:
            out.gauge(
                "mssql_host_sqlservr_resident_bytes",
                "Resident memory of the sqlservr processes as the OS sees it (excludes locked pages).",
                resident,
            )
