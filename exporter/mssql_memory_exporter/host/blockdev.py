"""Linux block-device topology read from sysfs, so writes can be attributed to physical disks.

Every function takes the sysfs root as a parameter so tests can point it at a small fake tree.
Names are kernel names as they appear under /sys/block (a "/" in a /dev name, as in cciss/c0d0, is
"!" in sysfs: cciss!c0d0); `sysfs_name` converts the /proc/diskstats spelling.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_SYS = "/sys"
DEFAULT_DEV = "/dev"

# Devices that are never a physical disk whatever their size: memory-, file- and optical-backed.
_NEVER_PHYSICAL_PREFIXES = ("loop", "ram", "zram", "sr", "fd")
# Stacked devices (device mapper, software RAID). They normally also show members in slaves/, but an
# md array being assembled or a dm table without targets has none, and it is still not a disk.
_STACKED_PREFIXES = ("dm-", "md")
# Symlink chains under /dev are short; a bound keeps a looping fixture from hanging the scrape.
_MAX_DEPTH = 32


def sysfs_name(name: str) -> str:
    return name.replace("/", "!")


def _block_dir(name: str, sys_root: str) -> Path:
    """The device's own sysfs directory: /sys/class/block lists disks and partitions alike."""
    by_class = Path(sys_root, "class", "block", name)
    if by_class.exists():
        return by_class
    return Path(sys_root, "block", name)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _slaves(name: str, sys_root: str) -> list[str]:
    try:
        return sorted(entry.name for entry in _block_dir(name, sys_root).joinpath("slaves").iterdir())
    except OSError:
        return []


def is_physical_disk(name: str, sys_root: str = DEFAULT_SYS) -> bool:
    """A whole disk that stores data itself: not virtual, not stacked on other devices, not empty."""
    if not name or name.startswith(_NEVER_PHYSICAL_PREFIXES + _STACKED_PREFIXES):
        return False
    directory = Path(sys_root, "block", name)
    if not directory.is_dir():
        return False  # partitions and unknown names are not listed in /sys/block
    if _slaves(name, sys_root):
        return False
    # size is in 512-byte sectors; 0 means nothing behind it (unconnected nbd, empty card reader).
    # A tree without the file (hand-made fixtures) is given the benefit of the doubt.
    if _read_int(directory / "size") == 0:
        return False
    # NVMe native multipath: the per-path devices are hidden and the visible head device carries the
    # I/O, so counting both would count every byte twice.
    return _read_int(directory / "hidden") != 1


def physical_disks(sys_root: str = DEFAULT_SYS) -> set[str]:
    try:
        names = [entry.name for entry in Path(sys_root, "block").iterdir()]
    except OSError:
        return set()
    return {name for name in names if is_physical_disk(name, sys_root)}


def _disk_of_partition(name: str, sys_root: str) -> str | None:
    """The disk holding partition `name`, None when `name` is not a partition.

    Read from the tree rather than parsed from the name, because naming rules differ per driver
    (sda1 vs nvme0n1p1 vs mmcblk0p1 vs md0p1) and the kernel nests a partition inside its disk's
    directory whatever it is called.
    """
    if not name:
        return None
    by_class = Path(sys_root, "class", "block", name)
    if by_class.joinpath("partition").is_file():
        return by_class.resolve().parent.name
    # Some trees (older kernels, minimal fixtures) lack /sys/class/block: search the disks.
    for candidate in Path(sys_root, "block").glob(f"*/{name}/partition"):
        return candidate.parent.parent.name
    return None


def parent_disk(name: str, sys_root: str = DEFAULT_SYS) -> str:
    """The whole disk a partition belongs to (sda1 -> sda, nvme0n1p2 -> nvme0n1); a disk maps to itself."""
    return _disk_of_partition(name, sys_root) or name


def member_disks(name: str, sys_root: str = DEFAULT_SYS) -> set[str]:
    """The physical disks that end up holding the data of `name` (a disk, partition, dm-N or mdN).

    Walks partition -> disk and stacked device -> slaves until it reaches devices with no slaves.
    Leaves that are not physical disks (a loop device, an unknown name) contribute nothing: their
    writes land on some disk through a file system we cannot see from here.
    """
    found: set[str] = set()
    seen: set[str] = set()
    pending = [sysfs_name(name)]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        disk = _disk_of_partition(current, sys_root)
        if disk is not None:
            pending.append(disk)
            continue
        below = _slaves(current, sys_root)
        if below:
            pending.extend(below)
        elif is_physical_disk(current, sys_root):
            found.add(current)
    return found


def _dm_name_lookup(mapper_name: str, sys_root: str) -> str | None:
    """dm-N whose dm/name is `mapper_name`; for when /dev/mapper is not visible (containers)."""
    for candidate in sorted(Path(sys_root, "block").glob("dm-*")):
        try:
            if candidate.joinpath("dm", "name").read_text().strip() == mapper_name:
                return candidate.name
        except OSError:
            continue
    return None


def _resolve_links(path: str, dev_root: str) -> str:
    """Follow symlinks one hop at a time so absolute targets (/dev/...) stay inside `dev_root`."""
    current = path
    for _ in range(_MAX_DEPTH):
        if not os.path.islink(current):
            break
        target = os.readlink(current)
        if os.path.isabs(target):
            current = _rebase(target, dev_root)
        else:
            current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return current


def _rebase(path: str, dev_root: str) -> str:
    relative = os.path.relpath(os.path.normpath(path), DEFAULT_DEV)
    if relative.startswith(".."):
        return path
    return os.path.normpath(os.path.join(dev_root, relative))


def resolve_device_path(path: str, dev_root: str = DEFAULT_DEV, sys_root: str = DEFAULT_SYS) -> str:
    """Kernel name behind a device path from the mount table: /dev/mapper/vg-lv -> dm-0,
    /dev/disk/by-uuid/... -> sda1, /dev/md0 -> md0. Returns "" for sources that are not device paths
    (tmpfs, overlay, server:/export)."""
    if not path.startswith(DEFAULT_DEV + "/"):
        return ""
    resolved = _resolve_links(_rebase(path, dev_root), dev_root)
    if not os.path.lexists(resolved):
        parts = path.split("/")
        if len(parts) == 4 and parts[2] == "mapper":
            found = _dm_name_lookup(parts[3], sys_root)
            if found is not None:
                return found
    relative = os.path.relpath(resolved, dev_root)
    if relative.startswith(".."):
        return sysfs_name(os.path.basename(resolved))
    return sysfs_name(relative)


def device_for_devnum(major: int, minor: int, sys_root: str = DEFAULT_SYS) -> str:
    """Kernel name for a device number (a file's st_dev), via /sys/dev/block/MAJOR:MINOR; "" when the
    number is not a block device (btrfs subvolumes, tmpfs and overlay use anonymous numbers)."""
    link = Path(sys_root, "dev", "block", f"{major}:{minor}")
    if not link.exists():
        return ""
    return link.resolve().name
