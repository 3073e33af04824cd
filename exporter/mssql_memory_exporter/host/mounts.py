"""The host's mount table: which mount holds a path, and which mounts are DAX (persistent memory).

Linux reads /proc/self/mounts; Windows uses volume roots (`C:\\`, or folder mounts like `D:\\mnt\\ssd\\`).
Path matching is pure string work on both flavours, so Windows paths are tested on Linux too.
"""

from __future__ import annotations

import ntpath
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

DEFAULT_MOUNTS = "/proc/self/mounts"

# The kernel writes space, tab, newline and backslash in mount fields as a backslash and three octal
# digits, because the fields themselves are separated by spaces.
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:|[\\/]{2})")
_EXTENDED_DRIVE = re.compile(r"^\\\\\?\\[A-Za-z]:")


@dataclass(frozen=True)
class Mount:
    device: str
    mount_point: str
    fstype: str
    options: frozenset[str]


def unescape(field: str) -> str:
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)


def parse_mounts(text: str) -> list[Mount]:
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        device, mount_point, fstype, options = (unescape(field) for field in fields[:4])
        mounts.append(Mount(device, mount_point, fstype, frozenset(options.split(","))))
    return mounts


def read_mounts(path: str = DEFAULT_MOUNTS) -> list[Mount]:
    # surrogateescape keeps non-UTF-8 path bytes round-trippable, as os.fsdecode does for paths.
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        return parse_mounts(handle.read())


def is_windows_path(path: str) -> bool:
    return bool(_WINDOWS_ABSOLUTE.match(path))


def _windows_key(path: str) -> str:
    """Case-folded, backslashed, with exactly one trailing separator so that a prefix test on the
    strings is a prefix test on whole components."""
    path = path.replace("/", "\\")
    # Extended-length paths (\\?\C:\...) name the same file as C:\...; volume roots never use them.
    if _EXTENDED_DRIVE.match(path):
        path = path[4:]
    return ntpath.normpath(path).rstrip("\\").casefold() + "\\"


def _posix_key(path: str) -> str:
    normal = posixpath.normpath(path)
    # normpath keeps a leading "//" (POSIX leaves its meaning to the implementation); Linux does not.
    normal = "/" + normal.lstrip("/")
    return normal.rstrip("/") + "/"


def mount_for(path: str, mounts: Sequence[Mount]) -> Mount | None:
    """The mount whose mount point is the longest whole-component prefix of `path`.

    /var/opt/mssql holds /var/opt/mssql/data/x.mdf but not /var/opt/mssqlx. The path is not resolved
    through symlinks (callers that have the real file system at hand may realpath it first). When two
    mounts share a mount point the later one in the table is the one on top, so it wins the tie.
    Windows-looking paths (drive letter or UNC) are compared case-insensitively with either slash.
    """
    windows = is_windows_path(path)
    if not windows and not path.startswith("/"):
        return None  # relative to an unknown directory: no honest answer
    key = _windows_key if windows else _posix_key
    target = key(path)
    best: Mount | None = None
    best_length = -1
    for mount in mounts:
        if windows != is_windows_path(mount.mount_point):
            continue
        prefix = key(mount.mount_point)
        if target.startswith(prefix) and len(prefix) >= best_length:
            best, best_length = mount, len(prefix)
    return best


def is_dax(mount: Mount) -> bool:
    """Persistent memory mapped straight into the page tables (what SQL Server's Hybrid Buffer Pool
    needs). ext4/xfs also accept dax=never and dax=inode; the latter only enables DAX on files that
    carry the per-inode flag, so it does not say the data files are DAX and is not counted."""
    return "dax" in mount.options or "dax=always" in mount.options


class PartitionLike(Protocol):
    """What `psutil.disk_partitions()` yields (read-only, as its named tuples are)."""

    @property
    def device(self) -> str: ...
    @property
    def mountpoint(self) -> str: ...
    @property
    def fstype(self) -> str: ...
    @property
    def opts(self) -> str: ...


def mounts_from_partitions(partitions: Iterable[PartitionLike]) -> list[Mount]:
    """Mounts from psutil's partition list: the Windows source (drive letters and folder mounts)."""
    return [
        Mount(part.device, part.mountpoint, part.fstype, frozenset(filter(None, part.opts.split(","))))
        for part in partitions
        if part.mountpoint
    ]


# GetVolumeInformationW reports this in its file-system flags for a volume formatted for DAX.
FILE_DAX_VOLUME = 0x20000000


def flags_say_dax(file_system_flags: int) -> bool:
    return bool(file_system_flags & FILE_DAX_VOLUME)


def windows_file_system_flags(root: str) -> int | None:
    """GetVolumeInformationW's flags for a volume root (`C:\\`), None when Windows will not say
    (no media, access denied). psutil does not expose them; Windows only."""
    import ctypes  # deferred: only Windows has WinDLL, and Linux never calls this
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    flags = wintypes.DWORD(0)
    # The API insists on a trailing backslash on the root.
    root = root if root.endswith("\\") else root + "\\"
    ok = kernel32.GetVolumeInformationW(
        ctypes.c_wchar_p(root), None, 0, None, None, ctypes.byref(flags), None, 0
    )
    return int(flags.value) if ok else None
