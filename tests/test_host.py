"""Host collector: block-device topology on fake sysfs trees, the mount table, and the exposition.

The trees are built in tmp_path the way the kernel lays them out (devices under /sys/devices, with
/sys/block and /sys/class/block as symlinks, partitions nested in their disk, `slaves/` holding links),
so the code is tested against the real shape without root or real hardware.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.host import blockdev
from mssql_memory_exporter.host.blockdev import (
    device_for_devnum,
    member_disks,
    parent_disk,
    physical_disks,
    resolve_device_path,
)
from mssql_memory_exporter.host.collector import DiskIO, HostCollector, MemoryFigures
from mssql_memory_exporter.host.mounts import (
    FILE_DAX_VOLUME,
    Mount,
    flags_say_dax,
    is_dax,
    mount_for,
    mounts_from_partitions,
    parse_mounts,
    read_mounts,
    unescape,
)
from mssql_memory_exporter.metrics.builder import FamilyBuilder

from tests.conftest import exposition, samples_of, value

GiB = 1024**3


# -- fixture trees -----------------------------------------------------------------------------------


class FakeSys:
    """A sysfs tree in the kernel's layout."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for sub in ("block", "class/block", "dev/block"):
            (root / sub).mkdir(parents=True, exist_ok=True)

    def _link(self, link: Path, target: Path) -> None:
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(target, link.parent))

    def disk(
        self, name: str, bus: str = "pci0000:00", size: int = 1 << 21, devnum: str | None = None
    ) -> Path:
        directory = self.root / "devices" / bus / "block" / name
        directory.mkdir(parents=True)
        (directory / "size").write_text(f"{size}\n")
        (directory / "slaves").mkdir()
        (directory / "holders").mkdir()
        self._link(self.root / "block" / name, directory)
        self._link(self.root / "class" / "block" / name, directory)
        if devnum:
            self._link(self.root / "dev" / "block" / devnum, directory)
        return directory

    def partition(self, disk: str, name: str, number: int, devnum: str | None = None) -> Path:
        directory = (self.root / "block" / disk).resolve() / name
        directory.mkdir()
        (directory / "partition").write_text(f"{number}\n")
        (directory / "size").write_text("1024\n")
        self._link(self.root / "class" / "block" / name, directory)
        if devnum:
            self._link(self.root / "dev" / "block" / devnum, directory)
        return directory

    def stacked(self, name: str, slaves: list[str], dm_name: str | None = None) -> Path:
        directory = self.disk(name, bus="virtual")
        for slave in slaves:
            self._link(directory / "slaves" / slave, (self.root / "class" / "block" / slave).resolve())
        if dm_name is not None:
            (directory / "dm").mkdir()
            (directory / "dm" / "name").write_text(f"{dm_name}\n")
        return directory


def build_server_sys(root: Path) -> FakeSys:
    """sda (sda1, sda2); RAID1 md0 on nvme0n1p1 + nvme1n1p1; LVM dm-0 on md0; dm-1 on sda2;
    plus devices that are not physical disks: loop0, sr0, zram0, an unconnected nbd0."""
    fake = FakeSys(root)
    fake.disk("sda", devnum="8:0")
    fake.partition("sda", "sda1", 1, devnum="8:1")
    fake.partition("sda", "sda2", 2, devnum="8:2")
    fake.disk("nvme0n1", bus="pci0000:00/nvme0")
    fake.partition("nvme0n1", "nvme0n1p1", 1)
    fake.disk("nvme1n1", bus="pci0000:00/nvme1")
    fake.partition("nvme1n1", "nvme1n1p1", 1)
    fake.stacked("md0", ["nvme0n1p1", "nvme1n1p1"])
    fake.stacked("dm-0", ["md0"], dm_name="vg-lv")
    fake.stacked("dm-1", ["sda2"], dm_name="vg2-data")
    fake.disk("loop0", bus="virtual")
    fake.disk("sr0", bus="pci0000:00/ata2")
    fake.disk("zram0", bus="virtual")
    fake.disk("nbd0", bus="virtual", size=0)
    return fake


def build_dev(root: Path) -> Path:
    """A /dev with the symlinks udev makes (relative) and one absolute link, as admins sometimes add."""
    for node in ("sda", "sda1", "sda2", "md0", "dm-0", "dm-1", "nvme0n1", "nvme0n1p1"):
        (root / node).parent.mkdir(parents=True, exist_ok=True)
        (root / node).touch()
    links = {
        "mapper/vg-lv": "../dm-0",
        "disk/by-uuid/1234-abcd": "../../sda1",
        "md/data": "../md0",
        "disk/by-label/DATA": "/dev/sda2",
    }
    for link, target in links.items():
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        (root / link).symlink_to(target)
    return root


@pytest.fixture
def sys_root(tmp_path: Path) -> str:
    return str(build_server_sys(tmp_path / "sys").root)


@pytest.fixture
def dev_root(tmp_path: Path) -> str:
    return str(build_dev(tmp_path / "dev"))


# -- block devices -----------------------------------------------------------------------------------


def test_physical_disks_excludes_virtual_stacked_and_empty(sys_root: str) -> None:
    assert physical_disks(sys_root) == {"sda", "nvme0n1", "nvme1n1"}


def test_disk_with_slaves_is_not_physical_whatever_its_name(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("sdb")
    fake.disk("sdc")
    fake.stacked("bcache0", ["sdb", "sdc"])
    assert physical_disks(str(tmp_path)) == {"sdb", "sdc"}


def test_hidden_multipath_paths_are_not_counted_twice(tmp_path: Path) -> None:
    fake = FakeSys(tmp_path)
    fake.disk("nvme0n1")
    hidden = fake.disk("nvme0c0n1")
    (hidden / "hidden").write_text("1\n")
    assert physical_disks(str(tmp_path)) == {"nvme0n1"}


def test_parent_disk(sys_root: str) -> None:
    assert parent_disk("sda1", sys_root) == "sda"
    assert parent_disk("sda2", sys_root) == "sda"
    assert parent_disk("nvme0n1p1", sys_root) == "nvme0n1"
    assert parent_disk("nvme0n1", sys_root) == "nvme0n1"
    assert parent_disk("dm-0", sys_root) == "dm-0"


def test_member_disks_through_lvm_and_raid(sys_root: str) -> None:
    assert member_disks("dm-0", sys_root) == {"nvme0n1", "nvme1n1"}
    assert member_disks("md0", sys_root) == {"nvme0n1", "nvme1n1"}
    assert member_disks("dm-1", sys_root) == {"sda"}
    assert member_disks("nvme1n1p1", sys_root) == {"nvme1n1"}
    assert member_disks("sda", sys_root) == {"sda"}


def test_member_disks_of_non_disks_is_empty(sys_root: str) -> None:
    assert member_disks("loop0", sys_root) == set()
    assert member_disks("nosuchdev", sys_root) == set()
    assert member_disks("", sys_root) == set()


def test_minimal_tree_with_plain_files(tmp_path: Path) -> None:
    """Hand-made trees: no /sys/class/block, slaves as empty files, no size files."""
    block = tmp_path / "block"
    for disk, parts in {"sda": ["sda1"], "sdb": ["sdb1"]}.items():
        (block / disk / "slaves").mkdir(parents=True)
        for part in parts:
            (block / disk / part).mkdir()
            (block / disk / part / "partition").write_text("1\n")
    (block / "md127" / "slaves").mkdir(parents=True)
    for slave in ("sda1", "sdb1"):
        (block / "md127" / "slaves" / slave).touch()
    root = str(tmp_path)
    assert physical_disks(root) == {"sda", "sdb"}
    assert parent_disk("sdb1", root) == "sdb"
    assert member_disks("md127", root) == {"sda", "sdb"}


def test_slave_cycle_does_not_hang(tmp_path: Path) -> None:
    block = tmp_path / "block"
    for name, slave in (("dm-0", "dm-1"), ("dm-1", "dm-0")):
        (block / name / "slaves").mkdir(parents=True)
        (block / name / "slaves" / slave).touch()
    assert member_disks("dm-0", str(tmp_path)) == set()


def test_resolve_device_path(sys_root: str, dev_root: str) -> None:
    def resolve(path: str) -> str:
        return resolve_device_path(path, dev_root, sys_root)

    assert resolve("/dev/mapper/vg-lv") == "dm-0"
    assert resolve("/dev/md0") == "md0"
    assert resolve("/dev/md/data") == "md0"
    assert resolve("/dev/nvme0n1p1") == "nvme0n1p1"
    assert resolve("/dev/disk/by-uuid/1234-abcd") == "sda1"
    assert resolve("/dev/disk/by-label/DATA") == "sda2"
    assert resolve("tmpfs") == ""
    assert resolve("server:/export") == ""


def test_resolve_mapper_name_without_dev_nodes(sys_root: str, tmp_path: Path) -> None:
    """Containers often see /dev/mapper/... in the mount table but not the node itself."""
    empty_dev = tmp_path / "emptydev"
    empty_dev.mkdir()
    assert resolve_device_path("/dev/mapper/vg2-data", str(empty_dev), sys_root) == "dm-1"


def test_device_for_devnum(sys_root: str) -> None:
    assert device_for_devnum(8, 2, sys_root) == "sda2"
    assert device_for_devnum(8, 0, sys_root) == "sda"
    assert device_for_devnum(0, 45, sys_root) == ""


def test_diskstats_names_with_slash_match_sysfs(tmp_path: Path) -> None:
    FakeSys(tmp_path).disk("cciss!c0d0")
    assert blockdev.sysfs_name("cciss/c0d0") == "cciss!c0d0"
    assert member_disks("cciss/c0d0", str(tmp_path)) == {"cciss!c0d0"}


# -- mounts ------------------------------------------------------------------------------------------

MOUNTS_TEXT = r"""/dev/sda1 / ext4 rw,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/mapper/vg-lv /var/opt/mssql xfs rw,noatime,attr2,inode64 0 0
/dev/disk/by-label/DATA /var/opt/mssql/tempdb ext4 rw 0 0
/dev/pmem0 /mnt/pmem0 xfs rw,relatime,dax=always 0 0
/dev/pmem1 /mnt/pmem1 ext4 rw,relatime,dax 0 0
/dev/pmem2 /mnt/pmem\040two ext4 rw,dax=never 0 0
/dev/pmem3 /mnt/pmem3 ext4 rw,dax=inode 0 0
tmpfs /run tmpfs rw,nosuid,nodev,size=1638400k,mode=755 0 0
/dev/root /srv/back\134slash\011tab ext4 rw 0 0
"""


@pytest.fixture
def mounts_file(tmp_path: Path) -> str:
    path = tmp_path / "mounts"
    path.write_text(MOUNTS_TEXT)
    return str(path)


def test_read_mounts_fields_and_escapes(mounts_file: str) -> None:
    mounts = read_mounts(mounts_file)
    assert len(mounts) == 10
    assert mounts[2] == Mount(
        "/dev/mapper/vg-lv", "/var/opt/mssql", "xfs", frozenset({"rw", "noatime", "attr2", "inode64"})
    )
    assert mounts[6].mount_point == "/mnt/pmem two"
    assert mounts[9].mount_point == "/srv/back\\slash\ttab"


def test_unescape_leaves_other_backslashes() -> None:
    assert unescape(r"a\040b\134c") == "a b\\c"
    assert unescape(r"a\9b") == r"a\9b"


def test_parse_skips_short_lines() -> None:
    assert parse_mounts("garbage\n\n/dev/sda1 / ext4 rw 0 0\n") == [
        Mount("/dev/sda1", "/", "ext4", frozenset({"rw"}))
    ]


def test_mount_for_longest_component_prefix(mounts_file: str) -> None:
    mounts = read_mounts(mounts_file)

    def point(path: str) -> str | None:
        found = mount_for(path, mounts)
        return found.mount_point if found else None

    assert point("/var/opt/mssql/data/master.mdf") == "/var/opt/mssql"
    assert point("/var/opt/mssql") == "/var/opt/mssql"
    assert point("/var/opt/mssql/") == "/var/opt/mssql"
    assert point("/var/opt/mssqlx/data.mdf") == "/"
    assert point("/var/opt/mssql/tempdb/tempdb.mdf") == "/var/opt/mssql/tempdb"
    assert point("/var/opt/mssql/tempdbx/t.mdf") == "/var/opt/mssql"
    assert point("/var/opt/mssql/data/../tempdb/t.ndf") == "/var/opt/mssql/tempdb"
    assert point("/mnt/pmem two/hbp.mdf") == "/mnt/pmem two"
    assert point("relative/path") is None
    assert mount_for("/anything", []) is None


def test_mount_for_later_mount_on_same_point_wins() -> None:
    under = Mount("/dev/sda2", "/data", "ext4", frozenset())
    over = Mount("/dev/sdb1", "/data", "xfs", frozenset())
    assert mount_for("/data/x", [under, over]) is over


def test_is_dax(mounts_file: str) -> None:
    dax = {m.mount_point for m in read_mounts(mounts_file) if is_dax(m)}
    assert dax == {"/mnt/pmem0", "/mnt/pmem1"}


WINDOWS_VOLUMES = [
    Mount("C:\\", "C:\\", "NTFS", frozenset({"rw", "fixed"})),
    Mount("D:\\", "D:\\", "NTFS", frozenset({"rw", "fixed"})),
    Mount("\\\\?\\Volume{1b2c}\\", "D:\\mnt\\ssd\\", "NTFS", frozenset({"rw", "fixed"})),
    Mount("/dev/sda1", "/", "ext4", frozenset()),
]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("C:\\Program Files\\Microsoft SQL Server\\MSSQL16\\DATA\\master.mdf", "C:\\"),
        ("c:/temp/x.ndf", "C:\\"),
        ("D:\\MNT\\SSD\\tempdb.mdf", "D:\\mnt\\ssd\\"),
        ("D:\\mnt\\ssd", "D:\\mnt\\ssd\\"),
        ("D:\\mnt\\ssd2\\tempdb.mdf", "D:\\"),
        ("\\\\?\\D:\\mnt\\ssd\\x.ldf", "D:\\mnt\\ssd\\"),
        ("E:\\data.mdf", None),
        ("\\\\fileserver\\share\\db.mdf", None),
    ],
)
def test_mount_for_windows(path: str, expected: str | None) -> None:
    found = mount_for(path, WINDOWS_VOLUMES)
    assert (found.mount_point if found else None) == expected


def test_mounts_from_psutil_partitions() -> None:
    parts = [
        SimpleNamespace(device="C:\\", mountpoint="C:\\", fstype="NTFS", opts="rw,fixed"),
        SimpleNamespace(device="E:\\", mountpoint="", fstype="", opts="cdrom"),
    ]
    assert mounts_from_partitions(parts) == [Mount("C:\\", "C:\\", "NTFS", frozenset({"rw", "fixed"}))]


def test_windows_dax_flag() -> None:
    assert flags_say_dax(FILE_DAX_VOLUME | 0x3)
    assert not flags_say_dax(0x00000002 | 0x00080000)


# Few, overlapping names ("a" is a string prefix of "ab") so boundary mistakes are found quickly.
COMPONENTS = st.sampled_from(["a", "ab", "b", "."])
POSIX_PATHS = st.lists(COMPONENTS, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _components(path: str) -> list[str]:
    return [part for part in posixpath.normpath(path).split("/") if part]


def _is_component_prefix(mount_point: str, path: str) -> bool:
    prefix, full = _components(mount_point), _components(path)
    return full[: len(prefix)] == prefix


@settings(max_examples=300)
@given(path=POSIX_PATHS, points=st.lists(POSIX_PATHS, max_size=6))
def test_mount_for_only_returns_component_prefixes(path: str, points: list[str]) -> None:
    mounts = [Mount(f"/dev/x{i}", point, "ext4", frozenset()) for i, point in enumerate(points)]
    found = mount_for(path, mounts)
    matching = [m for m in mounts if _is_component_prefix(m.mount_point, path)]
    if found is None:
        assert matching == []
    else:
        assert _is_component_prefix(found.mount_point, path)
        # and no matching mount is deeper than the one returned
        assert len(_components(found.mount_point)) == max(len(_components(m.mount_point)) for m in matching)


WINDOWS_PATHS = st.lists(st.sampled_from(["A", "a", "Ab", "b"]), max_size=3).flatmap(
    lambda parts: st.sampled_from(["C:\\", "c:/"]).map(lambda root: root + "\\".join(parts))
)


@settings(max_examples=300)
@given(path=WINDOWS_PATHS, points=st.lists(WINDOWS_PATHS, max_size=6))
def test_windows_mount_for_only_returns_component_prefixes(path: str, points: list[str]) -> None:
    def parts(p: str) -> list[str]:
        return [c.casefold() for c in p.replace("/", "\\").split("\\") if c]

    mounts = [Mount("vol", point, "NTFS", frozenset()) for point in points]
    found = mount_for(path, mounts)
    if found is not None:
        prefix = parts(found.mount_point)
        assert parts(path)[: len(prefix)] == prefix
    else:
        assert not any(parts(path)[: len(parts(p))] == parts(p) for p in points)


# -- collector ---------------------------------------------------------------------------------------

# The kernel's view of one write-heavy period: every layer counts what passed through it.
DISK_COUNTERS = {
    "sda": DiskIO(read_bytes=9000.0, written_bytes=1000.0),
    "sda1": DiskIO(5000.0, 600.0),
    "sda2": DiskIO(4000.0, 400.0),
    "dm-1": DiskIO(4000.0, 400.0),
    "md0": DiskIO(700.0, 300.0),
    "dm-0": DiskIO(700.0, 300.0),
    "nvme0n1": DiskIO(400.0, 310.0),
    "nvme0n1p1": DiskIO(390.0, 300.0),
    "nvme1n1": DiskIO(300.0, 305.0),
    "nvme1n1p1": DiskIO(300.0, 300.0),
    "loop0": DiskIO(50.0, 50.0),
    "sr0": DiskIO(10.0, 0.0),
    "zram0": DiskIO(80.0, 80.0),
    "nbd0": DiskIO(0.0, 0.0),
}

MEMORY = MemoryFigures(
    total_bytes=64 * GiB, available_bytes=10 * GiB, swap_total_bytes=4 * GiB, swap_used_bytes=GiB / 2
)

PROCESSES = [
    ("systemd", 12e6),
    ("sqlservr", 40e6),  # the watchdog parent
    ("sqlservr", 30 * GiB),  # the engine
    ("sqlservr-helper", 5e6),
    ("bash", None),
]


def fake_collector(
    sys_root: str, mounts: str = "/nonexistent", dev_root: str = "/nonexistent", **overrides: object
) -> HostCollector:
    options: dict[str, object] = {
        "platform": "linux",
        "dev_root": dev_root,
        "disk_io": lambda: DISK_COUNTERS,
        "memory": lambda: MEMORY,
        "processes": lambda: PROCESSES,
    }
    options.update(overrides)
    return HostCollector(sys_root, mounts, **options)  # type: ignore[arg-type]


def collected(collector: HostCollector) -> dict:
    out = FamilyBuilder({"target": "sql1"})
    collector.collect(out)
    return samples_of(exposition(out.families()))


def test_written_bytes_counted_once_per_physical_disk(sys_root: str) -> None:
    assert fake_collector(sys_root).written_bytes_by_disk() == {
        "sda": 1000.0,
        "nvme0n1": 310.0,
        "nvme1n1": 305.0,
    }


def test_exposition(sys_root: str) -> None:
    samples = collected(fake_collector(sys_root))
    written = {
        dict(labels)["device"]: v
        for (name, labels), v in samples.items()
        if name == "mssql_host_disk_written_bytes_total"
    }
    assert written == {"sda": 1000.0, "nvme0n1": 310.0, "nvme1n1": 305.0}
    assert value(samples, "mssql_host_disk_read_bytes_total", target="sql1", device="sda") == 9000.0
    assert value(samples, "mssql_host_memory_total_bytes", target="sql1") == 64 * GiB
    assert value(samples, "mssql_host_memory_available_bytes", target="sql1") == 10 * GiB
    assert value(samples, "mssql_host_swap_total_bytes", target="sql1") == 4 * GiB
    assert value(samples, "mssql_host_swap_used_bytes", target="sql1") == GiB / 2
    assert value(samples, "mssql_host_sqlservr_resident_bytes", target="sql1") == 30 * GiB + 40e6


def test_resident_bytes_absent_without_sqlservr(sys_root: str) -> None:
    collector = fake_collector(sys_root, processes=lambda: [("postgres", 1e9), ("sqlservr", None)])
    assert collector.sqlservr_resident_bytes() is None
    names = {name for name, _ in collected(collector)}
    assert "mssql_host_sqlservr_resident_bytes" not in names
    assert "mssql_host_memory_total_bytes" in names


def test_windows_uses_physical_drive_names_as_they_are(tmp_path: Path) -> None:
    counters = {"PhysicalDrive0": DiskIO(1.0, 2.0), "PhysicalDrive1": DiskIO(3.0, 4.0)}
    collector = fake_collector(
        str(tmp_path / "nosys"),
        platform="win32",
        disk_io=lambda: counters,
        processes=lambda: [("SQLSERVR.EXE", 8e9), ("sqlservr.exe", 1e9), ("sqlwriter.exe", 1e6)],
    )
    assert collector.written_bytes_by_disk() == {"PhysicalDrive0": 2.0, "PhysicalDrive1": 4.0}
    assert collector.sqlservr_resident_bytes() == 9e9


def test_disks_for_path(sys_root: str, dev_root: str, mounts_file: str) -> None:
    collector = fake_collector(sys_root, mounts_file, dev_root, stat_dev=lambda _: os.makedev(8, 1))
    assert collector.disks_for_path("/var/opt/mssql/data/master.mdf") == {"nvme0n1", "nvme1n1"}
    assert collector.disks_for_path("/var/opt/mssql/tempdb/tempdb.mdf") == {"sda"}
    assert collector.disks_for_path("/etc/hosts") == {"sda"}
    # tmpfs: stat says an anonymous device number, which is no block device
    tmpfs = fake_collector(sys_root, mounts_file, dev_root, stat_dev=lambda _: os.makedev(0, 25))
    assert tmpfs.disks_for_path("/run/x") == set()
    assert collector.disks_for_path("relative") == set()


def test_disks_for_path_falls_back_to_device_number(sys_root: str, dev_root: str, mounts_file: str) -> None:
    """/dev/root exists in no /dev; the mount point's st_dev still names the device."""
    seen: list[str] = []

    def stat_dev(path: str) -> int:
        seen.append(path)
        return os.makedev(8, 2)

    collector = fake_collector(sys_root, mounts_file, dev_root, stat_dev=stat_dev)
    assert collector.disks_for_path("/srv/back\\slash\ttab/db.mdf") == {"sda"}
    assert seen == ["/srv/back\\slash\ttab"]


def test_disks_for_path_unknown_on_windows() -> None:
    parts = [SimpleNamespace(device="C:\\", mountpoint="C:\\", fstype="NTFS", opts="rw,fixed")]
    collector = HostCollector(platform="win32", partitions=lambda: parts)
    assert collector.disks_for_path("C:\\data\\x.mdf") == set()


def test_mount_point_for(sys_root: str, mounts_file: str) -> None:
    collector = fake_collector(sys_root, mounts_file)
    assert collector.mount_point_for("/var/opt/mssql/data/master.mdf") == "/var/opt/mssql"
    assert collector.mount_point_for("/var/opt/mssqlx/x") == "/"
    assert collector.mount_point_for("C:\\data\\x.mdf") is None


def test_mounts_are_reread_after_max_age(sys_root: str, tmp_path: Path) -> None:
    path = tmp_path / "mounts"
    path.write_text("/dev/sda1 / ext4 rw 0 0\n")
    now = [100.0]
    collector = fake_collector(sys_root, str(path), mounts_max_age=30.0, clock=lambda: now[0])
    assert collector.mount_point_for("/data/x") == "/"
    path.write_text("/dev/sda1 / ext4 rw 0 0\n/dev/sda2 /data ext4 rw 0 0\n")
    now[0] = 129.0
    assert collector.mount_point_for("/data/x") == "/"
    now[0] = 130.0
    assert collector.mount_point_for("/data/x") == "/data"


def test_dax_mount_points(sys_root: str, mounts_file: str) -> None:
    assert fake_collector(sys_root, mounts_file).dax_mount_points() == ["/mnt/pmem0", "/mnt/pmem1"]


def test_dax_mount_points_windows() -> None:
    parts = [
        SimpleNamespace(device="C:\\", mountpoint="C:\\", fstype="NTFS", opts="rw,fixed"),
        SimpleNamespace(device="P:\\", mountpoint="P:\\", fstype="NTFS", opts="rw,fixed"),
        SimpleNamespace(device="Q:\\", mountpoint="Q:\\", fstype="NTFS", opts="rw,fixed"),
    ]
    flags = {"C:\\": 0x3, "P:\\": FILE_DAX_VOLUME | 0x3, "Q:\\": None}
    collector = HostCollector(
        platform="win32", partitions=lambda: parts, file_system_flags=lambda root: flags[root]
    )
    assert collector.dax_mount_points() == ["P:\\"]


def test_real_psutil_on_this_machine() -> None:
    """The default psutil-backed functions, against the running Linux host."""
    if not os.path.exists("/proc/self/mounts"):
        pytest.skip("needs Linux /proc")
    collector = HostCollector()
    samples = collected(collector)
    assert value(samples, "mssql_host_memory_total_bytes", target="sql1") > 0
    available = value(samples, "mssql_host_memory_available_bytes", target="sql1")
    assert 0 < available <= value(samples, "mssql_host_memory_total_bytes", target="sql1")
    assert value(samples, "mssql_host_swap_total_bytes", target="sql1") >= 0
    disks = physical_disks()
    assert set(collector.written_bytes_by_disk()) <= disks
    assert any(mount.mount_point == "/" for mount in collector.mounts())
    assert collector.disks_for_path("/") <= disks
