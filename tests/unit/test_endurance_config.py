"""SSD pool config: what the endurance keys accept, refuse and normalise, with the field named in each error
(split from tests/unit/test_endurance.py, which keeps the arithmetic and the metrics)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.collectors.endurance import rated_endurance_bytes
from mssql_memory_exporter.config import (
    ConfigError,
    KnownWritten,
    load_config,
    normalize_host_disk,
    normalize_volume,
    parse_config,
)

from tests.unit.test_endurance import (  # _password_env: the autouse fixture that sets the password
    PASSWORD_ENV,
    TESTDATA,
    _password_env,  # noqa: F401
    config_with,
    errors_of,
    one_pool,
    pool_body,
)

# --- config ---------------------------------------------------------------------------------------------


def test_defaults_keep_existing_configs_valid():
    tgt = parse_config(config_with()).targets["t"]
    assert tgt.ssd_pools == {}
    assert tgt.volume_map == {}
    assert tgt.pmem_volumes == []
    assert tgt.colocated is False
    assert tgt.volume_refresh_seconds == 300.0


def test_pool_fixtures_are_in_the_shared_fixture_directories():
    # tests/unit/test_config.py runs every good/*.yml and bad/*.yml; these are the ones for pools.
    assert (TESTDATA / "good" / "ssd_pools.yml").is_file()
    assert len(list((TESTDATA / "bad").glob("pool_*.yml"))) >= 10


def test_good_fixture_values():
    config = load_config(str(TESTDATA / "good" / "ssd_pools.yml"))
    linux = config.targets["olap-linux"]
    assert linux.colocated is True
    assert linux.volume_refresh_seconds == 600
    assert linux.pmem_volumes == ["/mnt/pmem0"]
    data = linux.ssd_pools["nvme-data"]
    assert data.drives.rating == "tbw"
    assert data.in_service_date == date(2022, 3, 1)
    assert data.volumes == ["/var/opt/mssql/data", "/var/opt/mssql/tempdb"]  # trailing slash dropped
    assert data.host_disks == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]
    windows = config.targets["oltp-windows"]
    assert windows.colocated is False
    assert windows.volume_map == {"/var/opt/mssql/tempdb": "/var/opt/mssql/tempdb"}
    tempdb = windows.ssd_pools["tempdb"]
    assert tempdb.drives.rating == "dwpd"
    assert (tempdb.drives.dwpd, tempdb.drives.capacity_tb, tempdb.drives.warranty_years) == (1, 3.84, 5)
    assert tempdb.in_service_date == date(2021, 11, 30)  # quoted in the file: a string, parsed the same
    assert tempdb.volumes == ["T:\\", "D:\\mnt\\ssd\\"]
    assert windows.ssd_pools["logs.mirror"].in_service_date == date(2020, 2, 29)
    assert data.known_written == KnownWritten(written_tb=9460.8, read_date=date(2024, 9, 15))
    assert tempdb.known_written is None  # optional: without it the rules extrapolate from in_service_date


@pytest.mark.parametrize(
    ("label", "normal"),
    [
        ("/", "/"),
        ("/var/opt/mssql/tempdb", "/var/opt/mssql/tempdb"),
        ("/var/opt/mssql/tempdb/", "/var/opt/mssql/tempdb"),
        ("/mnt/odd name:with.dots", "/mnt/odd name:with.dots"),
        ("T:\\", "T:\\"),
        ("t:\\", "T:\\"),
        ("D:\\mnt\\ssd\\", "D:\\mnt\\ssd\\"),
        ("D:\\mnt\\ssd", "D:\\mnt\\ssd\\"),
        ("C:\\Program Files\\Microsoft SQL Server\\", "C:\\Program Files\\Microsoft SQL Server\\"),
    ],
)
def test_volume_labels_in_sql_server_spelling(label: str, normal: str):
    assert normalize_volume(label) == normal
    assert normalize_volume(normal) == normal  # idempotent


@pytest.mark.parametrize(
    "label",
    [
        "",
        " ",
        "C:",
        "c:",
        "var/opt/mssql",
        "./tempdb",
        "tempdb",
        "//var/opt",
        "/var//opt",
        "/var/opt/../mssql",
        "/var/./opt",
        "D:\\mnt\\..\\ssd\\",
        "D:\\\\mnt",
        "D:/mnt/ssd/",
        "D:mnt",
        "\\\\server\\share\\",
        "\\var\\opt",
        "file:///var/opt/mssql",
        "https://example.com/volume",
        "/var/opt\x00/x",
        "/var/opt\n",
        "D:\\bad|name\\",
        "1:\\",
    ],
)
def test_unknown_volume_syntax(label: str):
    with pytest.raises(ValueError, match="unknown volume syntax"):
        normalize_volume(label)
    lines = errors_of(config_with({"p": pool_body(volumes=[label])}))
    assert lines[0].startswith("c.yml: targets.t.ssd_pools.p.volumes.0: unknown volume syntax")


@pytest.mark.parametrize(
    ("name", "normal"),
    [
        ("nvme0n1", "nvme0n1"),
        ("nvme12n3", "nvme12n3"),
        ("sda", "sda"),
        ("sdaa", "sdaa"),
        ("vdb", "vdb"),
        ("xvdf", "xvdf"),
        ("mmcblk0", "mmcblk0"),
        ("cciss!c0d0", "cciss!c0d0"),
        ("PhysicalDrive2", "PhysicalDrive2"),
        ("physicaldrive2", "PhysicalDrive2"),
        ("PHYSICALDRIVE10", "PhysicalDrive10"),
    ],
)
def test_host_disk_names(name: str, normal: str):
    assert normalize_host_disk(name) == normal


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("", "unknown disk name"),
        ("/dev/sda", "leave out /dev/"),
        ("Sda", "unknown disk name"),
        ("sda 1", "unknown disk name"),
        ("nvme0n1/", "unknown disk name"),
        ("PhysicalDrive", "unknown disk name"),
        ("\\\\.\\PhysicalDrive0", "unknown disk name"),
        ("sda1", "is a partition"),
        ("nvme0n1p1", "is a partition"),
        ("mmcblk0p2", "is a partition"),
        ("xvda1", "is a partition"),
        ("cciss!c0d0p1", "is a partition"),
        ("md0", "virtual block device"),
        ("md127", "virtual block device"),
        ("dm-3", "virtual block device"),
        ("loop0", "virtual block device"),
    ],
)
def test_bad_host_disk_names(name: str, error: str):
    with pytest.raises(ValueError, match=re.escape(error)):
        normalize_host_disk(name)


@pytest.mark.parametrize(
    ("pool", "line"),
    [
        (
            pool_body(drives={"count": 4, "tbw_per_drive_tb": 7000, "dwpd": 1}),
            "targets.t.ssd_pools.p.drives: set either tbw_per_drive_tb or dwpd with capacity_tb and "
            "warranty_years, not both",
        ),
        (
            pool_body(drives={"count": 4}),
            "targets.t.ssd_pools.p.drives: set tbw_per_drive_tb, or dwpd with capacity_tb and warranty_years",
        ),
        (
            pool_body(drives={"count": 4, "dwpd": 1}),
            "targets.t.ssd_pools.p.drives: dwpd, capacity_tb and warranty_years go together; "
            "missing: capacity_tb and warranty_years",
        ),
        (pool_body(drives={"tbw_per_drive_tb": 7000}), "targets.t.ssd_pools.p.drives.count: is required"),
        (
            pool_body(drives={"count": True, "tbw_per_drive_tb": 7000}),
            "targets.t.ssd_pools.p.drives.count: expected an integer, got a boolean (true)",
        ),
        (
            pool_body(drives={"count": 2.5, "tbw_per_drive_tb": 7000}),
            "targets.t.ssd_pools.p.drives.count: expected an integer, got a number (2.5)",
        ),
        (
            pool_body(drives={"count": -1, "tbw_per_drive_tb": 7000}),
            "targets.t.ssd_pools.p.drives.count: must be greater than 0",
        ),
        (
            pool_body(drives={"count": 1, "tbw_per_drive_tb": "7000"}),
            "targets.t.ssd_pools.p.drives.tbw_per_drive_tb: expected a number, got a string",
        ),
        (
            pool_body(drives={"count": 1, "tbw_per_drive_tb": float("inf")}),
            "targets.t.ssd_pools.p.drives.tbw_per_drive_tb: must be a finite number",
        ),
        (
            pool_body(drives={"count": 1, "dwpd": 1, "capacity_tb": 0, "warranty_years": 5}),
            "targets.t.ssd_pools.p.drives.capacity_tb: must be greater than 0",
        ),
        (
            pool_body(drives={"count": 1, "tbw_per_drive_tb": 1, "x": 1}),
            "targets.t.ssd_pools.p.drives.x: unknown key",
        ),
        (
            pool_body(planned_lifetime_years=-5),
            "targets.t.ssd_pools.p.planned_lifetime_years: must be greater than 0",
        ),
        (pool_body(planned_lifetime_years=None), "targets.t.ssd_pools.p.planned_lifetime_years: is required"),
        (pool_body(in_service_date=None), "targets.t.ssd_pools.p.in_service_date: is required"),
        (
            pool_body(in_service_date="2999-12-31"),
            "targets.t.ssd_pools.p.in_service_date: 2999-12-31 is in the future; give the date the drives "
            "went into service",
        ),
        (
            pool_body(in_service_date="01/03/2022"),
            "targets.t.ssd_pools.p.in_service_date: must be a date written YYYY-MM-DD",
        ),
        (
            pool_body(in_service_date=1646092800),
            "targets.t.ssd_pools.p.in_service_date: must be a date written YYYY-MM-DD",
        ),
        (
            pool_body(in_service_date=datetime(2022, 3, 1)),
            "targets.t.ssd_pools.p.in_service_date: must be a date written YYYY-MM-DD",
        ),
        (
            pool_body(in_service_date="2022-02-29"),
            "targets.t.ssd_pools.p.in_service_date: must be a valid date",
        ),
        (pool_body(volumes=[]), "targets.t.ssd_pools.p: set volumes, host_disks or smart_drives"),
        (pool_body(volumes=None), "targets.t.ssd_pools.p: set volumes, host_disks or smart_drives"),
        (pool_body(volumes="/var/opt/mssql"), "targets.t.ssd_pools.p.volumes: must be a valid list"),
        (
            pool_body(volumes=["/x", "/y", "/x/"]),
            "targets.t.ssd_pools.p.volumes.2: /x is listed twice (also at volumes.0)",
        ),
        (pool_body(write_amplification=2.0), "targets.t.ssd_pools.p.write_amplification: unknown key"),
        (
            pool_body(known_written={"written_tb": -0.001, "read_date": "2024-01-01"}),
            "targets.t.ssd_pools.p.known_written.written_tb: must be greater than or equal to 0",
        ),
        (
            pool_body(known_written={"written_tb": float("nan"), "read_date": "2024-01-01"}),
            "targets.t.ssd_pools.p.known_written.written_tb: must be a finite number",
        ),
        (
            pool_body(known_written={"written_tb": "9460.8 TB", "read_date": "2024-01-01"}),
            "targets.t.ssd_pools.p.known_written.written_tb: expected a number, got a string",
        ),
        (
            pool_body(known_written={"read_date": "2024-01-01"}),
            "targets.t.ssd_pools.p.known_written.written_tb: is required",
        ),
        (
            pool_body(known_written={"written_tb": 1}),
            "targets.t.ssd_pools.p.known_written.read_date: is required",
        ),
        (
            pool_body(known_written={"written_tb": 1, "read_date": "2999-12-31"}),
            "targets.t.ssd_pools.p.known_written.read_date: 2999-12-31 is in the future; give the date the "
            "counters were read",
        ),
        (
            pool_body(known_written={"written_tb": 1, "read_date": "15.06.2024"}),
            "targets.t.ssd_pools.p.known_written.read_date: must be a date written YYYY-MM-DD",
        ),
        (
            pool_body(
                in_service_date="2022-03-01", known_written={"written_tb": 1, "read_date": "2022-02-28"}
            ),
            "targets.t.ssd_pools.p.known_written.read_date: 2022-02-28 is before in_service_date 2022-03-01; "
            "the reading must be of these drives in service",
        ),
        (
            pool_body(known_written={"written_tb": 1, "read_date": "2024-01-01", "unit": "TiB"}),
            "targets.t.ssd_pools.p.known_written.unit: unknown key",
        ),
        (
            pool_body(known_written=9460.8),
            "targets.t.ssd_pools.p.known_written: must be a mapping (key: value)",
        ),
        (
            pool_body(host_disks=["nvme0n1"]),
            "targets.t.ssd_pools.p.host_disks: needs colocated: true on the target; host disk counters can "
            "only be read on SQL Server's own host",
        ),
    ],
)
def test_bad_pool(pool: dict, line: str):
    assert errors_of(config_with({"p": pool}))[0].startswith(f"c.yml: {line}")


def test_known_written_is_optional_and_may_be_read_on_the_in_service_date_or_today():
    assert one_pool().known_written is None
    today = datetime.now(UTC).date()
    for day in ("2022-03-01", today.isoformat(), today):
        known = one_pool(known_written={"written_tb": 0, "read_date": day}).known_written
        assert known is not None
        assert known.read_date == date.fromisoformat(str(day))
        assert known.written_tb == 0  # nothing written yet is a reading too


@pytest.mark.integration
def test_bad_known_written_exits_2_naming_the_field():
    path = TESTDATA / "bad" / "ssd_pools_known_written_before_in_service.yml"
    result = subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", "--config.file", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, PASSWORD_ENV: "pw"},
        check=False,
    )
    assert result.returncode == 2
    assert (
        f"error: {path}: targets.prod-a.ssd_pools.tempdb.known_written.read_date: 2022-02-28 is before "
        "in_service_date 2022-03-01" in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_pool_names():
    assert "a.b_c:d-1" in parse_config(config_with({"a.b_c:d-1": pool_body()})).targets["t"].ssd_pools
    for bad in ("-p", "p q", "", "a" * 129):
        assert "invalid key" in errors_of(config_with({bad: pool_body()}))[0]


def test_host_disks_with_colocated():
    pool = parse_config(config_with({"p": pool_body(host_disks=["nvme0n1", "nvme1n1"])}, colocated=True))
    assert pool.targets["t"].ssd_pools["p"].host_disks == ["nvme0n1", "nvme1n1"]
    only_disks = pool_body(volumes=None, host_disks=["PhysicalDrive1"])
    assert (
        parse_config(config_with({"p": only_disks}, colocated=True)).targets["t"].ssd_pools["p"].volumes == []
    )


def test_volume_or_disk_in_two_pools():
    same_volume = {"a": pool_body(volumes=["T:\\"]), "b": pool_body(volumes=["t:\\"])}
    assert errors_of(config_with(same_volume)) == [
        "c.yml: targets.t.ssd_pools.b.volumes.0: T:\\ is already in pool a"
    ]
    same_disk = {
        "a": pool_body(host_disks=["sda"]),
        "b": pool_body(volumes=["/b"], host_disks=["sdb", "sda"]),
    }
    assert errors_of(config_with(same_disk, colocated=True)) == [
        "c.yml: targets.t.ssd_pools.b.host_disks.1: sda is already in pool a"
    ]


def test_pools_of_different_targets_may_share_names_and_volumes():
    data = config_with({"p": pool_body()})
    data["targets"]["u"] = dict(data["targets"]["t"])
    assert set(parse_config(data).targets) == {"t", "u"}


def test_in_service_today_is_accepted_and_the_day_after_tomorrow_is_not():
    today = datetime.now(UTC).date()
    assert one_pool(in_service_date=today.isoformat()).in_service_date == today
    assert one_pool(in_service_date=today).in_service_date == today
    later = (today + timedelta(days=2)).isoformat()
    assert errors_of(config_with({"p": pool_body(in_service_date=later)})) == [
        f"c.yml: targets.t.ssd_pools.p.in_service_date: {later} is in the future; give the date the drives "
        "went into service"
    ]


def test_unquoted_yaml_dates(tmp_path: Path):
    path = tmp_path / "c.yml"
    text = (TESTDATA / "good" / "minimal.yml").read_text() + (
        "    ssd_pools:\n      p:\n        drives: {count: 1, tbw_per_drive_tb: 1}\n"
        "        planned_lifetime_years: 1\n        in_service_date: 2024-02-29\n        volumes: [/x]\n"
    )
    path.write_text(text)
    assert load_config(str(path)).targets["prod-a"].ssd_pools["p"].in_service_date == date(2024, 2, 29)
    path.write_text(text.replace("2024-02-29", "2023-02-29"))
    with pytest.raises(ConfigError) as info:
        load_config(str(path))
    assert (
        str(info.value)
        == f"{path}: line 14, column 26: invalid YAML: invalid date: day is out of range for month"
    )


def test_volume_map_and_pmem_volumes():
    tgt = parse_config(
        config_with(
            volume_map={"/var/opt/mssql/data/": "/var/opt/mssql", "D:\\sql\\tempdb": "d:\\"},
            pmem_volumes=["/mnt/pmem0/", "P:\\"],
        )
    ).targets["t"]
    assert tgt.volume_map == {"/var/opt/mssql/data": "/var/opt/mssql", "D:\\sql\\tempdb\\": "D:\\"}
    assert tgt.pmem_volumes == ["/mnt/pmem0", "P:\\"]


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"volume_map": {"data": "/x"}}, "targets.t.volume_map.data: invalid key: unknown volume syntax"),
        ({"volume_map": {"/x": "C:"}}, "targets.t.volume_map./x: unknown volume syntax"),
        (
            {"volume_map": {"/x/": "/a", "/x": "/b"}},
            "targets.t.volume_map: /x/ and /x are the same directory",
        ),
        ({"volume_map": ["/x"]}, "targets.t.volume_map: must be a mapping (key: value)"),
        ({"pmem_volumes": ["pmem"]}, "targets.t.pmem_volumes.0: unknown volume syntax"),
        (
            {"pmem_volumes": ["/p", "/p/"]},
            "targets.t.pmem_volumes.1: /p is listed twice (also at pmem_volumes.0)",
        ),
        ({"volume_refresh_seconds": 0}, "targets.t.volume_refresh_seconds: must be greater than 0"),
        (
            {"volume_refresh_seconds": float("nan")},
            "targets.t.volume_refresh_seconds: must be a finite number",
        ),
        ({"colocated": "perhaps"}, "targets.t.colocated: expected true or false, got a string"),
        ({"ssd_pools": ["p"]}, "targets.t.ssd_pools: must be a mapping (key: value)"),
    ],
)
def test_bad_target_fields(fields: dict, line: str):
    assert errors_of(config_with(**fields))[0].startswith(f"c.yml: {line}")


POOL_KEYS = [
    "drives",
    "planned_lifetime_years",
    "in_service_date",
    "known_written",
    "volumes",
    "host_disks",
    "x",
]
DRIVE_KEYS = ["count", "tbw_per_drive_tb", "dwpd", "capacity_tb", "warranty_years", "x"]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-10, 10**6)
    | st.floats()
    | st.text(max_size=12)
    | st.dates().map(date.isoformat)
    | st.sampled_from(["/x", "T:\\", "C:", "nvme0n1", "sda1", "2022-03-01"])
)
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3)
)


@given(
    pool=st.dictionaries(st.sampled_from(POOL_KEYS), values, max_size=6),
    drives=st.dictionaries(st.sampled_from(DRIVE_KEYS), values, max_size=6),
    colocated=st.booleans(),
)
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_pools_give_a_config_or_a_config_error(pool: dict, drives: dict, colocated: bool):
    pool = {**pool, "drives": drives} if "drives" not in pool else pool
    try:
        config = parse_config(config_with({"p": pool}, colocated=colocated), source="prop.yml")
    except ConfigError as exc:
        assert all(line.startswith("prop.yml: ") for line in exc.lines)
    else:
        parsed = config.targets["t"].ssd_pools["p"]
        assert rated_endurance_bytes(parsed.drives) > 0
        assert parsed.volumes or parsed.host_disks
