"""Drive health against a smartctl that misbehaves: a real process (the fake executable in
tests/fake_smartctl.py, or the real smartmontools) for every failure, and what the exporter makes of it."""

from __future__ import annotations

import fnmatch
import json
import logging
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from mssql_memory_exporter.config import DriveHealthConfig
from mssql_memory_exporter.host.drive_health import DriveMonitor
from mssql_memory_exporter.host.drive_metrics import drive_families

from tests.conftest import Samples, exposition, samples_of
from tests.fake_smartctl import FIXTURES, FakeSmartctl, fixture

NVME = "INTEL_SSDPE2KX080T8_1.json"  # data_units_written 184,919,244
NVME_BYTES = 184_919_244 * 512_000
LOGGER = "mssql_memory_exporter.host.drive_health"


@pytest.fixture
def fake(tmp_path: Path) -> FakeSmartctl:
    return FakeSmartctl(tmp_path)


def monitor_for(
    fake: FakeSmartctl, *names: str, timeout: float = 2.0, smartctl: str | None = None
) -> DriveMonitor:
    config = DriveHealthConfig.model_validate(
        {
            "smartctl": smartctl or str(fake.path),
            "interval_seconds": 600,
            "timeout_seconds": timeout,
            "drives": [{"name": name} for name in names or ("nvme0",)],
        }
    )
    return DriveMonitor(config)


def metrics(monitor: DriveMonitor, pools: dict[str, str] | None = None) -> Samples:
    return samples_of(exposition(drive_families(monitor, pools or {})))


def drive(samples: Samples, name: str, device: str = "nvme0", **extra: str) -> float | None:
    found = [
        v
        for (n, labels), v in samples.items()
        if n == name and dict(labels).get("device") == device
        and all(dict(labels).get(k) == w for k, w in extra.items())
    ]
    return found[0] if found else None


def success(samples: Samples) -> float:
    return samples[("mssql_exporter_collector_success", (("collector", "drive_health"),))]


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def test_a_good_reading_then_each_failure_keeps_the_last_reading_and_fails_the_drive_source(fake, caplog):
    fake.replay("nvme0", NVME)
    monitor = monitor_for(fake)
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 1 and drive(got, "mssql_drive_read_success") == 1
    assert drive(got, "mssql_drive_host_written_bytes_total") == NVME_BYTES
    # The command is the fixed one: the sudoers rule in docs/permissions.md names exactly this.
    assert fake.argv()[-1] == ["--json=c", "-x", "-n", "standby", "/dev/nvme0"]

    fake.set("nvme0", mode="vanished")
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 0 and drive(got, "mssql_drive_read_success") == 0
    # The last good reading stays, with its age: a drive that stops answering is not a drive with no wear.
    assert drive(got, "mssql_drive_host_written_bytes_total") == NVME_BYTES
    assert drive(got, "mssql_drive_reading_age_seconds") >= 0
    (record,) = warnings(caplog)
    assert record.getMessage() == "drive health: no reading"
    assert "No such device" in record.reason and record.device == "nvme0"  # type: ignore[attr-defined]

    monitor.read_all()  # the same failure again is not logged again
    assert len(warnings(caplog)) == 1

    fake.replay("nvme0", NVME)
    monitor.read_all()
    assert success(metrics(monitor)) == 1


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"mode": "fail", "exit": 1, "message": "=======> UNRECOGNIZED OPTION: x"}, "status 1 (no reading)"),
        ({"mode": "fail", "exit": 2, "message": "Smartctl open device: /dev/nvme0 failed: Permission denied"},
         "Permission denied"),
        ({"mode": "fail", "exit": 3, "message": "both"}, "status 3"),
        ({"mode": "garbage"}, "not JSON"),
        ({"mode": "truncated", "fixture": str(FIXTURES / NVME)}, "not JSON"),
        ({"mode": "fail", "exit": 0, "message": "no device"}, "not a drive reading"),
    ],
    ids=["bit0-command-line", "bit1-open-failed", "bits0-and-1", "garbage", "truncated", "no-device-block"],
)
def test_no_reading_bits_and_bad_output_fail_only_the_drive_source(fake, caplog, spec, reason):
    fake.set("nvme0", **spec)
    monitor = monitor_for(fake)
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 0 and drive(got, "mssql_drive_read_success") == 0
    assert drive(got, "mssql_drive_reading_age_seconds") is None  # never read: no figures at all
    (record,) = warnings(caplog)
    assert reason in record.reason  # type: ignore[attr-defined]
    # smartctl's own output is never copied into the log, only what it means.
    assert "this is not json" not in caplog.text and '"json_format_version"' not in caplog.text


def test_asleep_under_standby_keeps_the_last_reading_and_is_not_a_failure(fake, caplog):
    fake.replay("nvme0", NVME)
    monitor = monitor_for(fake)
    monitor.read_all()
    fake.set("nvme0", mode="standby")
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 1 and drive(got, "mssql_drive_read_success") == 1
    assert drive(got, "mssql_drive_host_written_bytes_total") == NVME_BYTES
    assert warnings(caplog) == []


@pytest.mark.parametrize("bit", [3, 4, 5, 6, 7])
def test_each_finding_bit_is_exported_with_the_reading(fake, bit):
    fake.replay("nvme0", NVME, exit=1 << bit)
    monitor = monitor_for(fake)
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 1 and drive(got, "mssql_drive_read_success") == 1
    names = ["failing", "prefail_below_threshold", "was_below_threshold", "error_log", "self_test_errors"]
    for index, finding in enumerate(names):
        assert drive(got, "mssql_drive_smartctl_finding", finding=finding) == (1 if index + 3 == bit else 0)
    assert drive(got, "mssql_drive_host_written_bytes_total") == NVME_BYTES


def test_partial_bit_exports_what_was_read(fake):
    fake.replay("nvme0", NVME, exit=4)
    monitor = monitor_for(fake)
    monitor.read_all()
    got = metrics(monitor)
    assert drive(got, "mssql_drive_reading_partial") == 1 and success(got) == 1
    assert drive(got, "mssql_drive_host_written_bytes_total") == NVME_BYTES


def test_a_hanging_smartctl_is_killed_at_the_timeout_and_scrapes_never_wait(fake, caplog):
    fake.set("nvme0", mode="hang")
    monitor = monitor_for(fake, timeout=0.5)
    reader = threading.Thread(target=monitor.read_all)
    started = time.monotonic()
    reader.start()
    time.sleep(0.1)
    scrape_started = time.monotonic()
    got = metrics(monitor)  # while smartctl hangs
    assert time.monotonic() - scrape_started < 0.1
    assert drive(got, "mssql_drive_read_success") == 1  # not attempted to the end yet: nothing failed
    reader.join(10)
    assert 0.5 <= time.monotonic() - started < 5
    got = metrics(monitor)
    assert success(got) == 0
    (record,) = warnings(caplog)
    assert "did not finish within 0.5 s" in record.reason  # type: ignore[attr-defined]
    # The whole process group is gone, not left hanging behind the exporter.
    starts = [c for c in fake.calls() if c[0] == "start"]
    assert len(starts) == 1 and not [c for c in fake.calls() if c[0] == "end"]
    pids = subprocess.run(["pgrep", "-f", str(fake.path)], capture_output=True, text=True).stdout.split()
    assert pids == []


def test_smartctl_missing_or_not_executable(fake, tmp_path, caplog):
    missing = monitor_for(fake, smartctl=str(tmp_path / "no-such-smartctl"))
    missing.read_all()
    assert success(metrics(missing)) == 0
    assert "no-such-smartctl not found" in warnings(caplog)[-1].reason  # type: ignore[attr-defined]
    fake.path.chmod(0o644)
    denied = monitor_for(fake)
    denied.read_all()
    assert success(metrics(denied)) == 0
    assert "permission denied running" in warnings(caplog)[-1].reason  # type: ignore[attr-defined]


def test_drives_are_read_one_at_a_time(fake):
    for name in ("nvme0", "nvme1", "nvme2"):
        fake.replay(name, NVME)
    monitor_for(fake, "nvme0", "nvme1", "nvme2").read_all()
    calls = fake.calls()
    assert [(what, device) for what, device, _ in calls] == [
        ("start", "nvme0"), ("end", "nvme0"), ("start", "nvme1"), ("end", "nvme1"), ("start", "nvme2"),
        ("end", "nvme2"),
    ]


def test_a_replaced_drive_is_a_new_drive_and_the_pool_never_loses_bytes(fake, tmp_path, caplog):
    fake.replay("nvme0", NVME)
    monitor = monitor_for(fake)
    monitor.read_all()
    assert monitor.drive_written_bytes(["nvme0"]) == NVME_BYTES
    # The same slot now holds a new drive: a counter far lower than before.
    new = fixture("nvme-null-Micron_7300_MTFDHBE1T6TDG-nvme0.json")  # data_units_written 338,104
    fake.set("nvme0", doc=new, exit=0)
    monitor.read_all()
    got = metrics(monitor, {"nvme0": "data"})
    assert drive(got, "mssql_drive_host_written_bytes_total") == 338_104 * 512_000
    assert monitor.drive_written_bytes(["nvme0"]) == NVME_BYTES + 338_104 * 512_000
    assert "bytes written went backwards" in warnings(caplog)[-1].reason  # type: ignore[attr-defined]
    # A new serial number is a new drive even when its counter is higher.
    newer = json.loads(json.dumps(new))
    newer["serial_number"] = "OTHER-SERIAL"
    newer["nvme_smart_health_information_log"]["data_units_written"] = 400_000
    fake.set("nvme0", doc=newer, exit=0)
    monitor.read_all()
    assert monitor.drive_written_bytes(["nvme0"]) == NVME_BYTES + 338_104 * 512_000 + 400_000 * 512_000
    assert "serial number changed" in warnings(caplog)[-1].reason  # type: ignore[attr-defined]


def test_pool_sum_needs_every_drive(fake):
    fake.replay("nvme0", NVME)
    fake.set("nvme1", mode="vanished")
    monitor = monitor_for(fake, "nvme0", "nvme1")
    monitor.read_all()
    assert monitor.drive_written_bytes(["nvme0"]) == NVME_BYTES
    assert monitor.drive_written_bytes(["nvme0", "nvme1"]) is None  # half a pool is not the pool
    assert monitor.drive_written_bytes(["nvme0", "not-configured"]) is None


def test_the_background_thread_reads_on_its_cadence_and_stops(fake):
    fake.replay("nvme0", NVME)
    config = DriveHealthConfig.model_validate(
        {
            "smartctl": str(fake.path),
            "interval_seconds": 0.3,
            "timeout_seconds": 0.2,
            "drives": [{"name": "nvme0"}],
        }
    )
    monitor = DriveMonitor(config)
    monitor.start()
    try:
        deadline = time.monotonic() + 5
        while len([c for c in fake.calls() if c[0] == "end"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        monitor.stop()
    ends = [when for what, _, when in fake.calls() if what == "end"]
    assert len(ends) >= 2 and ends[1] - ends[0] >= 0.25  # a second round, one interval after the first
    assert drive(metrics(monitor), "mssql_drive_reading_age_seconds") < 1


# --- the real smartmontools (Debian's 7.3, installed by scripts/bootstrap.sh test) ----------------------


def real_smartctl() -> str:
    path = shutil.which("smartctl") or shutil.which("smartctl", path="/usr/sbin:/sbin")
    assert path, "smartctl is missing: scripts/bootstrap.sh test installs smartmontools"
    return path


def test_real_smartctl_scan_is_json():
    command = [real_smartctl(), "--json", "--scan"]
    result = subprocess.run(command, capture_output=True, timeout=30, check=False)
    doc = json.loads(result.stdout)
    assert result.returncode == 0 and doc["smartctl"]["exit_status"] == 0
    assert doc["smartctl"]["version"][0] == 7
    assert isinstance(doc.get("devices", []), list)


@pytest.mark.parametrize(
    ("device_args", "bit"),
    [([], 0b01), (["-d", "sat"], 0b10)],
    ids=["type-not-detected", "open-failed"],
)
def test_real_smartctl_on_a_device_that_does_not_exist(tmp_path, caplog, device_args, bit):
    config = DriveHealthConfig.model_validate(
        {
            "smartctl": real_smartctl(),
            "interval_seconds": 600,
            "timeout_seconds": 20,
            "drives": [
                {"name": "ghost", "device": str(tmp_path / "no-such-disk"), "device_args": device_args}
            ],
        }
    )
    monitor = DriveMonitor(config)
    monitor.read_all()
    got = metrics(monitor)
    assert success(got) == 0 and drive(got, "mssql_drive_read_success", device="ghost") == 0
    (record,) = warnings(caplog)
    # smartctl 7.3: no type detected -> exit 1 (bit 0); -d sat and no node -> exit 2 (bit 1), not asleep.
    assert f"status {bit} (no reading)" in record.reason  # type: ignore[attr-defined]


# --- smartctl through sudo (deploy/sudoers) ---------------------------------------------------------------

SUDOERS = Path(__file__).resolve().parents[2] / "deploy" / "sudoers" / "mssql-memory-exporter-smartctl"


def sudoers_commands() -> list[str]:
    """The allowed command lines of the shipped sudoers file, with sudoers' escapes undone."""
    text = SUDOERS.read_text().replace("\\\n", " ")
    alias = next(line for line in text.splitlines() if line.startswith("Cmnd_Alias"))
    body = alias.split("=", 1)[1]
    commands = re.split(r"(?<!\\),", body)
    return [" ".join(c.replace("\\,", ",").replace("\\=", "=").split()) for c in commands]


def test_sudoers_allows_exactly_the_commands_the_exporter_runs():
    config = DriveHealthConfig.model_validate(
        {
            "smartctl": ["sudo", "-n", "/usr/sbin/smartctl"],
            "drives": [
                {"name": "nvme0n1"},
                {"name": "nvme12"},
                {"name": "sda"},
                {"name": "sdab"},
                {"name": "usb", "device": "/dev/sdc", "device_args": ["-d", "sat"]},
                {"name": "slot3", "device": "/dev/sda", "device_args": ["-d", "megaraid,3"]},
                {"name": "slot12", "device": "/dev/sdb", "device_args": ["-d", "megaraid,12"]},
            ],
        }
    )
    monitor = DriveMonitor(config)
    allowed = sudoers_commands()
    for drive in config.drives:
        argv = monitor.argv(drive)
        assert argv[:2] == ["sudo", "-n"]
        line = " ".join(argv[2:])
        # sudo matches the command line with fnmatch(3); Python's fnmatchcase has the same [...] and *.
        assert any(fnmatch.fnmatchcase(line, pattern) for pattern in allowed), line
    for other in (
        "/usr/sbin/smartctl --json=c -x -n standby /dev/sda -t long",
        "/usr/sbin/smartctl --json=c -x -n standby -s off /dev/sda",
        "/usr/sbin/smartctl --json=c -x -n standby /dev/sda1",
        "/usr/sbin/smartctl -t long /dev/sda",
        "/usr/sbin/smartctl --json=c -x -n standby /dev/mem",
        "/bin/sh -c id",
    ):
        assert not any(fnmatch.fnmatchcase(other, pattern) for pattern in allowed), other


def test_sudoers_file_parses():
    visudo = shutil.which("visudo") or shutil.which("visudo", path="/usr/sbin:/sbin")
    if visudo is None:
        pytest.skip("visudo (Debian's sudo) is not installed")
    result = subprocess.run([visudo, "-cf", str(SUDOERS)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_smartctl_run_through_a_command_and_its_stderr_in_the_log(fake, tmp_path, caplog):
    fake.replay("nvme0", NVME)
    wrapper = ["/usr/bin/env", str(fake.path)]  # as [sudo, -n, smartctl] runs it
    config = DriveHealthConfig.model_validate({"smartctl": wrapper, "drives": [{"name": "nvme0"}]})
    monitor = DriveMonitor(config)
    monitor.read_all()
    assert drive(metrics(monitor), "mssql_drive_host_written_bytes_total") == NVME_BYTES
    # What sudo -n says when the sudoers rule does not cover the command reaches the log.
    refusing = tmp_path / "sudo"
    refusing.write_text("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n")
    refusing.chmod(0o755)
    config = DriveHealthConfig.model_validate(
        {"smartctl": [str(refusing), "-n", "/usr/sbin/smartctl"], "drives": [{"name": "nvme0"}]}
    )
    monitor = DriveMonitor(config)
    monitor.read_all()
    assert success(metrics(monitor)) == 0
    assert "stderr: sudo: a password is required" in warnings(caplog)[-1].reason  # type: ignore[attr-defined]
