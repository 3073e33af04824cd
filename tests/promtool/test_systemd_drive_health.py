"""The systemd drop-in for drive health (deploy/systemd/mssql-memory-exporter.service.d/drive-health.conf),
as an operator installs it next to the shipped unit: systemd itself loads the pair (`systemd-analyze
verify`) and says, setting by setting, what the drop-in relaxes (`systemd-analyze security --offline`),
which must be exactly what sudo and smartctl need; and the user it runs as is the one the sudoers rule
names.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests import tools
from tests.integration.test_compose import ROOT, SYSTEMD_UNIT

DROP_IN = SYSTEMD_UNIT.parent / f"{SYSTEMD_UNIT.name}.d" / "drive-health.conf"
SUDOERS = ROOT / "deploy" / "sudoers" / "mssql-memory-exporter-smartctl"

# What sudo (a setuid program that switches user) and smartctl (ATA/SCSI pass-through, NVMe admin
# commands, the disk nodes) need, as systemd-analyze security names the settings. Nothing else may move.
RELAXED = {
    "NoNewPrivileges=",
    "PrivateDevices=",
    "CapabilityBoundingSet=~CAP_SET(UID|GID|PCAP)",
    "CapabilityBoundingSet=~CAP_SYS_RAWIO",
    "CapabilityBoundingSet=~CAP_SYS_ADMIN",
}
DISKS = {"block-sd:r", "block-blkext:r", "char-nvme:r"}
CHECK = re.compile(r"^([✓✗]) (\S+)\s+(.*?)\s*(?:\d+\.\d+)?\s*$")

needs_systemd_analyze = tools.needs(tools.SYSTEMD_ANALYZE)


def installed(tmp_path: Path, drop_in: str | None) -> Path:
    """The unit (and the drop-in, when given) laid out as under /etc/systemd/system. verify insists that
    the programs of ExecStart and ExecStartPre (the --config.check) exist; the virtualenv is not installed
    here."""
    unit = tmp_path / SYSTEMD_UNIT.name
    text = SYSTEMD_UNIT.read_text(encoding="utf-8")
    unit.write_text(re.sub(r"^(ExecStart(?:Pre)?)=\S+", r"\1=/bin/true", text, flags=re.M), encoding="utf-8")
    if drop_in is not None:
        directory = tmp_path / f"{SYSTEMD_UNIT.name}.d"
        directory.mkdir()
        (directory / DROP_IN.name).write_text(drop_in, encoding="utf-8")
    return unit


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def security(unit: Path) -> dict[str, tuple[bool, str]]:
    """systemd-analyze's verdict per setting: (hardened, its description)."""
    result = run(["systemd-analyze", "security", "--offline=true", "--no-pager", str(unit)])
    checks = {}
    for line in result.stdout.splitlines():
        match = CHECK.match(line)
        if match:
            checks[match.group(2)] = (match.group(1) == "✓", match.group(3))
    assert checks, result.stdout + result.stderr
    return checks


@needs_systemd_analyze
def test_the_unit_with_the_drop_in_passes_verify(tmp_path: Path) -> None:
    unit = installed(tmp_path, DROP_IN.read_text(encoding="utf-8"))
    result = run(["systemd-analyze", "verify", str(unit)])
    names = (unit.name, DROP_IN.name)
    lines = (result.stdout + result.stderr).splitlines()
    problems = [line for line in lines if any(name in line for name in names)]
    assert result.returncode == 0 and not problems, "\n".join(problems) or result.stderr


@needs_systemd_analyze
def test_verify_reads_the_drop_in_where_it_is_installed(tmp_path: Path) -> None:
    # Without this, a clean verify could mean the drop-in was never read.
    unit = installed(tmp_path, DROP_IN.read_text(encoding="utf-8") + "NoSuchSetting=1\n")
    result = run(["systemd-analyze", "verify", str(unit)])
    said = result.stdout + result.stderr
    assert re.search(rf"{re.escape(DROP_IN.name)}:\d+: Unknown key", said), said


@needs_systemd_analyze
def test_the_drop_in_relaxes_exactly_what_sudo_and_smartctl_need(tmp_path: Path) -> None:
    (tmp_path / "alone").mkdir()
    base = security(installed(tmp_path / "alone", None))
    relaxed = security(installed(tmp_path, DROP_IN.read_text(encoding="utf-8")))
    assert set(base) == set(relaxed)
    changed = {name for name in base if base[name][0] != relaxed[name][0]}
    assert changed == RELAXED
    assert all(base[name][0] and not relaxed[name][0] for name in RELAXED)
    # The device ACL grows by the disks only (the unit's own char-rtc stays), read-only.
    listed = {item for item in relaxed["DeviceAllow="][1].split() if ":" in item}
    before = {item for item in base["DeviceAllow="][1].split() if ":" in item}
    assert listed - before == DISKS
    # Still no root: a static user, the one below.
    assert relaxed["User=/DynamicUser="][0] and "static non-root" in relaxed["User=/DynamicUser="][1]


@needs_systemd_analyze
def test_without_a_static_user_sudo_cannot_gain_root(tmp_path: Path) -> None:
    """DynamicUser=yes makes systemd force NoNewPrivileges=yes, whatever the unit says: a drop-in that
    only said NoNewPrivileges=no (as docs/permissions.md once did) left sudo broken."""
    text = DROP_IN.read_text(encoding="utf-8")
    static = re.compile(r"^(DynamicUser|User|Group)=.*\n", re.M)
    assert len(static.findall(text)) == 3
    checks = security(installed(tmp_path, static.sub("", text)))
    assert checks["NoNewPrivileges="][0], "systemd no longer forces NoNewPrivileges under DynamicUser"


def test_the_drop_in_runs_as_the_user_the_sudoers_rule_names() -> None:
    text = DROP_IN.read_text(encoding="utf-8")
    settings = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    user = settings["User"]
    grants = re.findall(r"^(\S+)\s+ALL\s*=\s*\(root\)", SUDOERS.read_text(), re.M)
    assert grants == [user]
    assert settings["DynamicUser"] == "no" and settings["Group"] == user
    # The install lines in its header create that user.
    assert re.search(rf"useradd --system .*\b{re.escape(user)}$", text, re.M)
    assert "AmbientCapabilities" not in settings, "the exporter's own process must hold no capability"
