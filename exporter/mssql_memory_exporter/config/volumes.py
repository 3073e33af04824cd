"""Volume labels and host disk names: their syntax, normal forms and the hints a typo gets."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import (
    AfterValidator,
    Field,
)

from .errors import error_at
from .fields import TARGET_NAME_MAX, TARGET_NAME_PATTERN

# Volume labels are compared with what the exporter reports, so both spellings are brought to SQL
# Server's own: on Windows `sys.dm_os_volume_stats.volume_mount_point` ends in a backslash ("T:\",
# "D:\mnt\ssd\"); on Linux it is NULL and the label is a mount point as the mount table writes it, without
# a trailing slash (except "/" itself).
_LINUX_PART = r"[^/\x00-\x1f\x7f]+"
_LINUX_VOLUME = re.compile(rf"/(?:{_LINUX_PART}/)*(?:{_LINUX_PART})?")
_WINDOWS_PART = r'[^\\/:*?"<>|\x00-\x1f\x7f]+'
_WINDOWS_VOLUME = re.compile(rf"([A-Za-z]):\\((?:{_WINDOWS_PART}\\)*(?:{_WINDOWS_PART})?)")
VOLUME_SYNTAX = (
    "unknown volume syntax: expected an absolute Linux path like /var/opt/mssql/tempdb "
    "or a Windows drive or mount point like T:\\ or D:\\mnt\\ssd\\"
)


def _volume_hint(label: str) -> str:
    if not label:
        return "it is empty"
    if re.fullmatch(r"[A-Za-z]:", label):
        # "C:" alone means "the current directory of drive C", not the volume.
        return f"{label} without a backslash is not a volume; write {label}\\"
    if "://" in label:
        return "a URL is not a volume"
    if re.match(r"[A-Za-z]:/", label):
        return "Windows paths are written with backslashes"
    if label.startswith("\\\\"):
        return "network shares (\\\\server\\share) are not local volumes"
    if not label.startswith(("/", "\\")) and not re.match(r"[A-Za-z]:", label):
        return "relative paths are not volumes"
    return "empty path component, control character or a character Windows does not allow"


def normalize_volume(label: str) -> str:
    """A volume label (or directory) in the spelling the exporter reports: Linux paths without a trailing
    slash, Windows paths with an upper-case drive letter and a trailing backslash. Raises ValueError
    ("unknown volume syntax: ...") for anything else: relative paths, "C:", URLs, UNC shares, "." or ".."."""
    linux = _LINUX_VOLUME.fullmatch(label)
    windows = None if linux else _WINDOWS_VOLUME.fullmatch(label)
    if linux:
        parts = label.split("/")
    elif windows:
        parts = windows.group(2).split("\\")
    else:
        raise ValueError(f"{VOLUME_SYNTAX} ({_volume_hint(label)})")
    if any(part in (".", "..") for part in parts):
        # A label must name one place; "." and ".." would let two spellings name the same volume.
        raise ValueError(f"{VOLUME_SYNTAX} (no '.' or '..' components)")
    if linux:
        return label.removesuffix("/") or "/"
    assert windows is not None
    drive, rest = windows.groups()
    if rest and not rest.endswith("\\"):
        rest += "\\"
    return f"{drive.upper()}:\\{rest}"


# Disk names as psutil reports them: the kernel's names from /proc/diskstats on Linux, PhysicalDriveN on
# Windows. Partitions and virtual devices are refused: a drive wears from the writes of all its
# partitions, and md/dm devices count writes before RAID or LVM fan them out to the drives (and would
# count them twice next to their member disks).
# "!" is sysfs's spelling of "/" in names like cciss/c0d0 (host.blockdev.sysfs_name), which is allowed.
_KERNEL_DISK = re.compile(r"[a-z][a-z0-9]*(?:[-_!][a-z0-9]+)*")
_WINDOWS_DISK = re.compile(r"physicaldrive(\d+)", re.IGNORECASE)
_PARTITION = re.compile(
    r"(?:[shv]d[a-z]+|xvd[a-z]+)\d+|(?:nvme\d+n\d+|mmcblk\d+|nbd\d+|zd\d+|rbd\d+|cciss!c\d+d\d+)p\d+"
)
_VIRTUAL_DISK = re.compile(r"(?:dm-|md|loop|zram|ram)\d+(?:p\d+)?")
DISK_SYNTAX = (
    "unknown disk name: expected a kernel disk name like nvme0n1 or sda, or PhysicalDrive2 on Windows"
)


def normalize_host_disk(name: str) -> str:
    """A host disk name in psutil's spelling; raises ValueError for anything that is not a whole disk."""
    windows = _WINDOWS_DISK.fullmatch(name)
    if windows:
        return f"PhysicalDrive{int(windows.group(1))}"
    if name.startswith("/dev/"):
        raise ValueError(f"{DISK_SYNTAX} (leave out /dev/)")
    if not _KERNEL_DISK.fullmatch(name):
        raise ValueError(DISK_SYNTAX)
    if _VIRTUAL_DISK.fullmatch(name):
        raise ValueError(f"{name} is a virtual block device; list the physical disks under it")
    if _PARTITION.fullmatch(name):
        raise ValueError(f"{name} is a partition; name the whole disk, which wears from all its partitions")
    return name


def list_twice(items: list[str], field: str) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if item in seen:
            # Listed twice, its writes would be counted twice.
            raise error_at((field, index), f"{item} is listed twice (also at {field}.{seen[item]})")
        seen[item] = index


VolumeLabel = Annotated[str, AfterValidator(normalize_volume)]
HostDisk = Annotated[str, AfterValidator(normalize_host_disk)]
PoolName = Annotated[str, Field(max_length=TARGET_NAME_MAX, pattern=TARGET_NAME_PATTERN)]
# strict: YAML `count: yes` is a boolean, and pydantic would otherwise take it as 1 drive.
DriveCount = Annotated[int, Field(gt=0, strict=True)]
PositiveNumber = Annotated[float, Field(gt=0, strict=True)]
