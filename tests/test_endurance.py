"""SSD endurance pools: their config, the metrics they export, and the projection arithmetic.

The arithmetic is checked against first principles (bytes, seconds, decimal TB), not against Micron's
table; the Micron tests at the end only pin down the unit finding stated in docs/endurance.md.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mssql_memory_exporter.collectors.base import FamilyBuilder, ScrapeContext
from mssql_memory_exporter.collectors.endurance import (
    COUNTING_MEMO_KEY,
    TB,
    CountingStart,
    counting_metrics,
    counting_start,
    in_service_timestamp,
    planned_lifetime_seconds,
    pool_metrics,
    projected_share,
    rated_endurance_bytes,
    remaining_seconds,
    written_so_far,
)
from mssql_memory_exporter.config import (
    ConfigError,
    KnownWritten,
    SsdDrives,
    SsdPool,
    load_config,
    normalize_host_disk,
    normalize_volume,
    parse_config,
)

from tests.conftest import exposition, scrape, value

TESTDATA = Path(__file__).parent / "config_testdata"
DOC = Path(__file__).resolve().parent.parent / "docs" / "endurance.md"
PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
YEAR_365 = 365 * 86_400
MICRON_RATED = 4 * 7_000 * TB


@pytest.fixture(autouse=True)
def _password_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "pw")


def pool_body(**changes: object) -> dict:
    body: dict = {
        "drives": {"count": 4, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2022-03-01",
        "volumes": ["/var/opt/mssql/tempdb"],
    }
    body.update(changes)
    return {key: value for key, value in body.items() if value is not None}


def config_with(pools: dict | None = None, **target: object) -> dict:
    fields = {"host": "sql.example.com", "auth_module": "monitor", **target}
    if pools is not None:
        fields["ssd_pools"] = pools
    return {
        "auth_modules": {"monitor": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"t": fields},
    }


def errors_of(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="c.yml")
    return info.value.lines


def one_pool(**changes: object) -> SsdPool:
    return parse_config(config_with({"p": pool_body(**changes)})).targets["t"].ssd_pools["p"]


# --- config ---------------------------------------------------------------------------------------------


def test_defaults_keep_existing_configs_valid():
    tgt = parse_config(config_with()).targets["t"]
    assert tgt.ssd_pools == {}
    assert tgt.volume_map == {}
    assert tgt.pmem_volumes == []
    assert tgt.colocated is False
    assert tgt.volume_refresh_seconds == 300.0


def test_pool_fixtures_are_in_the_shared_fixture_directories():
    # tests/test_config.py runs every good/*.yml and bad/*.yml; these are the ones for pools.
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
        (pool_body(volumes=[]), "targets.t.ssd_pools.p: set volumes, host_disks or both"),
        (pool_body(volumes=None), "targets.t.ssd_pools.p: set volumes, host_disks or both"),
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


# --- arithmetic from first principles -------------------------------------------------------------------


def test_rated_endurance_from_tbw():
    drives = SsdDrives(count=4, tbw_per_drive_tb=7000)
    assert rated_endurance_bytes(drives) == 2.8e16  # 4 x 7,000 x 10^12 B
    assert rated_endurance_bytes(drives) == MICRON_RATED


def test_rated_endurance_from_dwpd():
    one = SsdDrives(count=1, dwpd=1, capacity_tb=3.84, warranty_years=5)
    # One full drive write (3.84 x 10^12 B) per day, for 365 days a year, for 5 years.
    assert rated_endurance_bytes(one) == pytest.approx(3.84e12 * 365 * 5, rel=1e-12)
    assert rated_endurance_bytes(one) == pytest.approx(7.008e15, rel=1e-12)
    four = SsdDrives(count=4, dwpd=3, capacity_tb=3.2, warranty_years=5)
    assert rated_endurance_bytes(four) == pytest.approx(4 * 17_520e12, rel=1e-12)


def test_planned_lifetime_uses_365_25_day_years():
    assert planned_lifetime_seconds(1) == 365.25 * 86_400 == 31_557_600
    assert planned_lifetime_seconds(5) == 157_788_000
    assert planned_lifetime_seconds(4) == (3 * 365 + 366) * 86_400  # four years span one leap day
    assert planned_lifetime_seconds(0.5) == 15_778_800
    for bad in (0, -1, math.inf, math.nan):
        with pytest.raises(ValueError):
            planned_lifetime_seconds(bad)


def test_in_service_timestamp_is_utc_midnight():
    assert in_service_timestamp(date(1970, 1, 1)) == 0
    days = date(2022, 3, 1).toordinal() - date(1970, 1, 1).toordinal()
    assert in_service_timestamp(date(2022, 3, 1)) == days * 86_400 == 1_646_092_800
    assert in_service_timestamp(date(2024, 3, 1)) - in_service_timestamp(date(2024, 2, 28)) == 2 * 86_400
    with pytest.raises(TypeError):
        in_service_timestamp(datetime(2022, 3, 1, 12, 0))


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="needs time.tzset")
def test_in_service_timestamp_ignores_the_local_time_zone(monkeypatch: pytest.MonkeyPatch):
    for zone in ("Pacific/Kiritimati", "America/Los_Angeles", "UTC"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        assert in_service_timestamp(date(2022, 3, 1)) == 1_646_092_800
    monkeypatch.undo()  # restore TZ as it was, and make the C library read it again
    time.tzset()


def test_projection_of_the_heaviest_micron_row_in_decimal_units():
    rate = 235.8e6  # MB/s with MB = 10^6 B
    five_365_day_years = 5 * YEAR_365
    written = rate * five_365_day_years
    assert written == pytest.approx(3.718e16, rel=1e-4)  # 37.18 PB
    assert projected_share(rate, five_365_day_years, MICRON_RATED) == pytest.approx(1.328, abs=5e-4)
    # The exporter's own lifetime (365.25-day years) adds 0.07%.
    assert projected_share(rate, planned_lifetime_seconds(5), MICRON_RATED) == pytest.approx(1.329, abs=5e-4)


def test_projected_share_edges():
    assert projected_share(0, planned_lifetime_seconds(5), MICRON_RATED) == 0
    rate_at_rating = MICRON_RATED / planned_lifetime_seconds(5)
    assert projected_share(rate_at_rating, planned_lifetime_seconds(5), MICRON_RATED) == pytest.approx(1)
    for args in ((1, 1, 0), (1, 1, -1), (-1, 1, 1), (1, -1, 1), (math.nan, 1, 1), (1, 1, math.inf)):
        with pytest.raises(ValueError):
            projected_share(*args)


def test_remaining_seconds():
    assert remaining_seconds(1e15, 0, 1e6) == 1e9
    assert remaining_seconds(2.8e16, 0.7e16, 235.8e6) == pytest.approx(2.1e16 / 235.8e6)
    assert remaining_seconds(1e15, 1e15, 1e6) == 0.0
    assert remaining_seconds(1e15, 2e15, 1e6) == 0.0  # past the rating: clamped, never negative
    assert remaining_seconds(1e15, 2e15, 0) == 0.0
    assert remaining_seconds(1e15, 0, 0) == math.inf
    for args in ((0, 0, 1), (1, -1, 1), (1, 0, -1), (1, math.nan, 1)):
        with pytest.raises(ValueError):
            remaining_seconds(*args)


@given(
    rated=st.floats(1e9, 1e18),
    share_written=st.floats(0, 0.999),
    rate=st.floats(1.0, 1e10),
)
def test_remaining_and_projection_agree(rated: float, share_written: float, rate: float):
    written = rated * share_written
    left = remaining_seconds(rated, written, rate)
    assert written + rate * left == pytest.approx(rated, rel=1e-9)
    # Writing for exactly the remaining time from zero uses that share of the rating.
    assert projected_share(rate, left, rated) == pytest.approx(1 - share_written, rel=1e-9)


# --- metrics --------------------------------------------------------------------------------------------


def test_pool_metrics_exposition():
    pool = one_pool(in_service_date="2022-03-01")
    out = FamilyBuilder({"env": "prod"})
    pool_metrics("tempdb", pool, sqlserver_written=1.5e12, host_written=3e12, out=out)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in out.families()
        for s in family.samples
    }
    env, pool_label = ("env", "prod"), ("pool", "tempdb")
    assert samples == {
        ("mssql_ssd_pool_rated_endurance_bytes", (env, pool_label)): 2.8e16,
        ("mssql_ssd_pool_planned_lifetime_seconds", (env, pool_label)): 157_788_000,
        ("mssql_ssd_pool_in_service_timestamp_seconds", (env, pool_label)): 1_646_092_800,
        ("mssql_ssd_pool_written_bytes_total", (env, pool_label, ("source", "sqlserver"))): 1.5e12,
        ("mssql_ssd_pool_written_bytes_total", (env, pool_label, ("source", "host"))): 3e12,
    }
    text = exposition(out.families())
    assert "# TYPE mssql_ssd_pool_written_bytes_total counter" in text
    assert "# TYPE mssql_ssd_pool_rated_endurance_bytes gauge" in text
    assert 'mssql_ssd_pool_written_bytes_total{env="prod",pool="tempdb",source="host"} 3e+12' in text


@pytest.mark.parametrize(
    ("sqlserver", "host", "sources"),
    [
        (None, None, set()),
        (0.0, None, {"sqlserver"}),
        (None, 5.0, {"host"}),
        (1.0, 2.0, {"sqlserver", "host"}),
    ],
)
def test_written_counter_only_for_sources_with_a_value(
    sqlserver: float | None, host: float | None, sources: set
):
    out = FamilyBuilder({})
    pool_metrics("p", one_pool(), sqlserver, host, out)
    written = [s for f in out.families() for s in f.samples if s.name == "mssql_ssd_pool_written_bytes_total"]
    assert {s.labels["source"] for s in written} == sources
    gauges = {f.name for f in out.families() if f.type == "gauge"}
    assert len(gauges) == 3  # the configured figures are there whether or not any writes were counted


def test_pools_share_families():
    out = FamilyBuilder({})
    pool_metrics("a", one_pool(), 1.0, None, out)
    pool_metrics(
        "b",
        one_pool(drives={"count": 2, "dwpd": 1, "capacity_tb": 3.84, "warranty_years": 5}),
        2.0,
        None,
        out,
    )
    rated = next(f for f in out.families() if f.name == "mssql_ssd_pool_rated_endurance_bytes")
    assert {s.labels["pool"]: s.value for s in rated.samples} == pytest.approx(
        {"a": 2.8e16, "b": 2 * 7.008e15}
    )


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_written_bytes_must_be_a_counter_value(bad: float):
    with pytest.raises(ValueError, match="bytes written"):
        pool_metrics("p", one_pool(), bad, None, FamilyBuilder({}))


def test_known_written_gauges_only_when_configured():
    def gauges(pool: SsdPool) -> dict[str, float]:
        out = FamilyBuilder({})
        pool_metrics("p", pool, 1.0, None, out)
        return {s.name: s.value for f in out.families() for s in f.samples if "known" in s.name}

    assert gauges(one_pool()) == {}
    known = one_pool(known_written={"written_tb": 9460.8, "read_date": "2024-09-15"})
    days = date(2024, 9, 15).toordinal() - date(1970, 1, 1).toordinal()
    assert gauges(known) == {
        "mssql_ssd_pool_known_written_bytes": 9460.8e12,  # decimal TB, like the ratings
        "mssql_ssd_pool_known_written_timestamp_seconds": days * 86_400,  # 00:00 UTC of the read date
    }


# --- where the counted bytes begin ----------------------------------------------------------------------

IN_SERVICE = 1_646_092_800.0  # 2022-03-01 00:00 UTC, the in_service_date of pool_body()


def test_sqlserver_counting_starts_at_the_first_reading_and_stays():
    first = counting_start(None, 0.0, 2e9, None, IN_SERVICE)
    assert first == CountingStart(timestamp=2e9, written=0.0, last=0.0)
    later = counting_start(first, 5e12, 2e9 + 3600, None, IN_SERVICE)
    assert (later.timestamp, later.written, later.last) == (2e9, 0.0, 5e12)


def test_a_first_reading_that_is_not_zero_is_the_baseline():
    # The pool's first scrape missed the volumes' zero baseline: count from this reading, not from 0.
    assert counting_start(None, 7e9, 2e9, None, IN_SERVICE) == CountingStart(2e9, 7e9, 7e9)


def test_a_counter_that_goes_down_starts_counting_again():
    start = counting_start(None, 0.0, 2e9, None, IN_SERVICE)
    start = counting_start(start, 9e12, 2e9 + 60, None, IN_SERVICE)
    dropped = counting_start(start, 4e12, 2e9 + 120, 1.9e9, IN_SERVICE)
    assert dropped == CountingStart(2e9 + 120, 4e12, 4e12)  # a known zero applies to a first reading only


def test_host_counts_from_boot_when_it_booted_after_the_anchor():
    boot = IN_SERVICE + 86_400 * 400
    assert counting_start(None, 3e14, boot + 86_400 * 30, boot, IN_SERVICE) == CountingStart(boot, 0.0, 3e14)


def test_host_up_since_before_the_anchor_counts_from_the_first_reading():
    # The known reading was taken after the host booted: its since-boot counter holds bytes the reading
    # already includes.
    boot = IN_SERVICE + 86_400 * 400
    anchor = boot + 86_400 * 10
    now = anchor + 3600
    assert counting_start(None, 3e14, now, boot, anchor) == CountingStart(now, 3e14, 3e14)
    # A boot time ahead of the reading's own time is not believed either.
    assert counting_start(None, 3e14, now, now + 10, anchor) == CountingStart(now, 3e14, 3e14)


class _Host:
    def __init__(self, boot: float) -> None:
        self.boot = boot

    def boot_time(self) -> float:
        return self.boot


def _counting(out: FamilyBuilder) -> dict[tuple[str, str], tuple[float, float]]:
    got: dict[tuple[str, str], list[float]] = {}
    for family in out.families():
        for s in family.samples:
            if s.name == "mssql_ssd_pool_counting_start_timestamp_seconds":
                got.setdefault((s.labels["pool"], s.labels["source"]), [0.0, 0.0])[0] = s.value
            elif s.name == "mssql_ssd_pool_counting_start_written_bytes":
                got.setdefault((s.labels["pool"], s.labels["source"]), [0.0, 0.0])[1] = s.value
    return {key: (a, b) for key, (a, b) in got.items()}


def test_counting_metrics_per_pool_and_source_across_scrapes():
    boot = IN_SERVICE + 86_400 * 700
    memo: dict[str, object] = {}
    fresh = one_pool()
    read_later = one_pool(known_written={"written_tb": 100, "read_date": "2024-06-01"})  # after the boot
    scrapes = ((boot + 5000, 0.0, 4e13), (boot + 5015, 3e8, 4e13 + 2e8))
    for now, sql, host in scrapes:
        out = FamilyBuilder({})
        ctx = ScrapeContext(now=now, workload="oltp", memo=memo, host=_Host(boot))
        counting_metrics("fresh", fresh, sql, host, ctx, out)
        counting_metrics("read", read_later, None, host, ctx, out)
        counting_metrics("none", fresh, None, None, ctx, out)
    assert _counting(out) == {
        ("fresh", "sqlserver"): (boot + 5000, 0.0),
        ("fresh", "host"): (boot, 0.0),  # booted after in service: counted since boot
        ("read", "host"): (boot + 5000, 4e13),  # booted before the reading: counted since the exporter
    }
    assert set(memo[COUNTING_MEMO_KEY]) == {("fresh", "sqlserver"), ("fresh", "host"), ("read", "host")}
    # An exporter restart is a new memo: the sqlserver counting starts again, the host's stays at boot.
    out = FamilyBuilder({})
    ctx = ScrapeContext(now=boot + 9000, workload="oltp", memo={}, host=_Host(boot))
    counting_metrics("fresh", fresh, 0.0, 5e13, ctx, out)
    assert _counting(out) == {("fresh", "sqlserver"): (boot + 9000, 0.0), ("fresh", "host"): (boot, 0.0)}


def test_host_collector_boot_time():
    from mssql_memory_exporter.host.collector import HostCollector

    assert HostCollector(boot_time=lambda: 1.7e9).boot_time() == 1.7e9
    real = HostCollector().boot_time()  # psutil's: in the past, and after the first SSDs were sold
    assert 1e9 < real < time.time()


def test_counting_metrics_check_the_counter():
    ctx = ScrapeContext(now=2e9, workload="oltp", memo={})
    with pytest.raises(ValueError, match="bytes written"):
        counting_metrics("p", one_pool(), -1.0, None, ctx, FamilyBuilder({}))


def test_exporter_restart_moves_the_counting_start_and_zeroes_the_counter(standin, scraper_for):
    s = standin("micron-960gb-8stream")
    pool = {**pool_body(in_service_date="2025-01-01"), "volumes": ["/var/opt/mssql/tempdb"]}
    config = s.config(volume_map={"/var/opt/mssql/tempdb": "/var/opt/mssql/tempdb"}, ssd_pools={"t": pool})
    key = {"pool": "t", "source": "sqlserver"}
    before = time.time()
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    after = time.time()
    started = value(first, "mssql_ssd_pool_counting_start_timestamp_seconds", **key)
    assert before <= started <= after  # the exporter's own clock, at its first reading
    assert value(first, "mssql_ssd_pool_counting_start_written_bytes", **key) == 0
    assert value(first, "mssql_ssd_pool_written_bytes_total", **key) == 0
    s.clock.advance(100)
    second = scrape(scraper, config)
    assert value(second, "mssql_ssd_pool_counting_start_timestamp_seconds", **key) == started
    assert value(second, "mssql_ssd_pool_written_bytes_total", **key) == pytest.approx(
        235.8e6 * 100, rel=1e-4
    )
    s.clock.advance(100)
    restarted = scraper_for(config)  # a new exporter process against the same, still running, server
    third = scrape(restarted, config)
    assert value(third, "mssql_ssd_pool_counting_start_timestamp_seconds", **key) > started
    assert value(third, "mssql_ssd_pool_written_bytes_total", **key) == 0


# --- bytes written so far -------------------------------------------------------------------------------

YEAR = 365.25 * 86_400


def test_written_so_far_keeps_counted_history_when_the_rate_fell():
    # In service 3 years; the exporter counted the last year at 200 MB/s; the 7-day rate is 100 MB/s.
    in_service, now = 0.0, 3 * YEAR
    counted = 200e6 * YEAR
    written = written_so_far(0.0, in_service, now - YEAR, counted, 100e6)
    assert written == pytest.approx(100e6 * 2 * YEAR + 200e6 * YEAR)
    assert written == pytest.approx(12.623e15, rel=1e-4)
    # The former rule: the larger of the counter and the rate carried back 3 years (9.47 PB).
    former = max(100e6 * 3 * YEAR, counted)
    assert former == pytest.approx(9.467e15, rel=1e-4)
    rated = 28e15
    gained = remaining_seconds(rated, former, 100e6) - remaining_seconds(rated, written, 100e6)
    assert gained == pytest.approx(YEAR)  # the former rule overstated the time left by a year


def test_written_so_far_with_a_known_reading():
    # 9,460.8 TB read on the anchor day; counting began 10 days later; 1e12 B counted since.
    got = written_so_far(9460.8e12, 1000.0, 1000.0 + 10 * 86_400, 1e12, 100e6)
    assert got == 9460.8e12 + 100e6 * 864_000 + 1e12
    assert written_so_far(5e15, 2000.0, 1000.0, 1e12, 100e6) == 5e15 + 1e12  # no negative gap
    for bad in ((-1.0, 0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, math.nan, 0.0), (0.0, 0.0, 0.0, 0.0, -1.0)):
        with pytest.raises(ValueError):
            written_so_far(*bad)


def test_worked_example_in_the_doc():
    # docs/endurance.md, "A worked example": every figure it prints, recomputed from dates and rates.
    in_service = in_service_timestamp(date(2022, 3, 1))
    read = in_service_timestamp(date(2024, 9, 15))
    counting = in_service_timestamp(date(2024, 10, 1))
    now = in_service_timestamp(date(2025, 3, 1))
    assert (counting - read, now - counting, counting - in_service) == (1_382_400, 13_046_400, 81_648_000)
    assert (read - in_service) / 86_400 == 929
    rated = rated_endurance_bytes(SsdDrives(count=4, tbw_per_drive_tb=7000))
    counted = 140e6 * (now - counting)
    assert counted == pytest.approx(1.826496e15)
    written = written_so_far(9460.8 * TB, read, counting, counted, 150e6)
    assert written == pytest.approx(1.1494656e16)
    assert written / rated == pytest.approx(0.41, abs=0.005)
    left = remaining_seconds(rated, written, 150e6)
    assert left == pytest.approx(110_035_626.7, abs=0.05)
    assert round(left / 86_400, 1) == 1273.6
    assert round(left / planned_lifetime_seconds(1), 2) == 3.49
    retire = in_service + planned_lifetime_seconds(5)
    assert datetime.fromtimestamp(retire, UTC) == datetime(2027, 3, 1, 6, tzinfo=UTC)
    assert (retire - now) / 86_400 == 730.25 < left / 86_400  # retired first: RemainingLow silent
    assert round(projected_share(150e6, planned_lifetime_seconds(5), rated), 3) == 0.845
    without_reading = written_so_far(0.0, in_service, counting, counted, 150e6)
    assert round(remaining_seconds(rated, without_reading, 150e6) / 86_400, 1) == 1074.6
    former = max(150e6 * (now - in_service), counted)
    assert round(remaining_seconds(rated, former, 150e6) / 86_400, 1) == 1064.5
    assert round(9460.8 * TB / (read - in_service) / 1e6) == 118
    assert 9460.8 * TB + 150e6 * (counting - read) == pytest.approx(9.66816e15)  # measured and bridged
    text = " ".join(DOC.read_text().split())
    for printed in (
        "1.826496 x 10^15",
        "2.0736 x 10^14",
        "1.1494656 x 10^16",
        "110,035,626.7 s",
        "1,273.6 days",
        "730.25 days",
        "0.845",
        "1,074.6 days",
        "1,064.5 days",
        "118 MB/s",
        "9.66816 x 10^15",
    ):
        assert printed in text, printed


# --- Micron's Table 4: the unit finding in docs/endurance.md --------------------------------------------

# (SQL Server memory GB, write rate as printed in MB/s, Micron's "Platform TBW in 5 Years (PB)")
MICRON_TABLE_4 = [
    (256, 108.6, 16.0),
    (512, 82.4, 12.1),
    (768, 102.2, 15.0),
    (960, 107.7, 15.8),
    (256, 99.4, 14.6),
    (512, 124.1, 18.2),
    (768, 188.7, 27.7),
    (960, 235.8, 34.7),
]


def test_micron_column_is_binary_with_365_25_day_years():
    def reproduced(days: float, bytes_per_mb: float, bytes_per_pb: float) -> int:
        seconds = 5 * days * 86_400
        return sum(
            round(rate * bytes_per_mb * seconds / bytes_per_pb, 1) == pb for _, rate, pb in MICRON_TABLE_4
        )

    assert reproduced(365.25, 1.0, 2**30) == 8  # MB/s x s / 1024^3 (= MiB/s into PiB)
    assert reproduced(365, 1.0, 2**30) == 6  # 365-day years miss the first and last rows
    for days in (365, 365.25, 366):
        assert reproduced(days, 1e6, 1e15) == 0  # no decimal reading matches any row
        assert reproduced(days, 2**20, 1e15) == 0


def _doc_table(marker: str) -> list[list[str]]:
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    rows = []
    for line in lines[start + 1 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows[1:]  # without the header


def test_doc_table_is_the_recomputation():
    rows = _doc_table("table: micron-recomputed")
    assert len(rows) == len(MICRON_TABLE_4)
    lifetime = planned_lifetime_seconds(5)
    for cells, (memory, rate, micron) in zip(rows, MICRON_TABLE_4, strict=True):
        written = rate * 1e6 * lifetime
        assert int(cells[0]) == memory
        assert float(cells[2]) == rate
        assert float(cells[3]) == pytest.approx(written, rel=5e-5)
        assert cells[4] == f"{written / 1e15:.2f}"
        assert cells[5] == f"{projected_share(rate * 1e6, lifetime, MICRON_RATED):.3f}"
        assert float(cells[6]) == micron
