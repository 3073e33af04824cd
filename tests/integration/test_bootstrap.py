"""What each front-door target installs: `make run CONFIG=...` must not install Prometheus, Alertmanager or
systemd (about 150 MB; on a systemd host Debian also enables the prometheus service). The scripts run for
real, with apt-get, dpkg-query and odbcinst replaced on PATH by recorders, so nothing is installed here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEST_TOOLS = {
    "prometheus", "prometheus-alertmanager", "systemd", "smartmontools",
    "krb5-kdc", "krb5-admin-server", "krb5-user", "faketime", "jsonnet",
}
# What Microsoft's ODBC Driver 18 (the msodbc extra) links to, besides unixODBC: ldd of its library.
MSODBC_LIBS = {"libkrb5-3", "libgssapi-krb5-2", "libstdc++6", "libltdl7"}
RUNTIME = {"tdsodbc", "unixodbc", "python3-venv"} | MSODBC_LIBS
GSSAPI_BUILD = {"libkrb5-dev", "gcc"}  # the test extras' python-gssapi builds from source


@pytest.fixture
def recorder(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH on which no Debian package is installed and apt-get only writes down what it was asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    scripts = {
        "dpkg-query": "exit 1",  # nothing installed
        "apt-get": f'echo "$*" >> {log}',
        "odbcinst": "exit 0",  # the FreeTDS driver counts as registered
        "systemctl": f'echo "systemctl $*" >> {log}',
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return env, log


def installed(log: Path) -> set[str]:
    words: set[str] = set()
    for line in log.read_text().splitlines() if log.exists() else []:
        if line.startswith("install"):
            words |= {w for w in line.split()[1:] if not w.startswith("-")}
    return words


@pytest.mark.parametrize(
    ("mode", "expected"), [
        ("runtime", RUNTIME),
        ("standin", RUNTIME | GSSAPI_BUILD),
        ("test", RUNTIME | GSSAPI_BUILD | TEST_TOOLS),
    ]
)
def test_each_mode_lists_its_packages(mode: str, expected: set[str]):
    result = subprocess.run(
        ["bash", "scripts/bootstrap.sh", "--list", mode], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert set(result.stdout.split()) == expected


def test_make_run_with_a_config_installs_only_what_the_exporter_needs(recorder, tmp_path: Path):
    env, log = recorder
    config = tmp_path / "bad.yml"
    config.write_text("targets: {}\n")  # start-up stops at once: only the bootstrap before it matters
    result = subprocess.run(
        ["bash", "scripts/run.sh"], cwd=ROOT, env={**env, "CONFIG": str(config)},
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr  # the exporter ran and refused the config
    assert installed(log) == RUNTIME, log.read_text()


def test_the_test_bootstrap_installs_the_tools_and_leaves_their_services_off(recorder):
    env, log = recorder
    result = subprocess.run(
        ["bash", "scripts/bootstrap.sh", "test"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert installed(log) == RUNTIME | GSSAPI_BUILD | TEST_TOOLS, log.read_text()
    if Path("/run/systemd/system").is_dir():  # only a systemd host enables services on install
        assert "systemctl disable --now prometheus" in log.read_text()


def test_odbc18_libraries_the_bootstrap_installs_are_what_the_driver_links_to():
    """The runtime list names every library ldd finds the packaged Driver 18 needing outside glibc and
    the wheel (fails when the driver grows a dependency the bootstrap does not install)."""
    from tests.conftest import require_odbc18

    library = require_odbc18()
    result = subprocess.run(["ldd", library], capture_output=True, text=True, check=True)
    needed = {line.split()[0] for line in result.stdout.splitlines() if "=>" in line}
    glibc = {"libdl.so.2", "libm.so.6", "libc.so.6", "libpthread.so.0", "libresolv.so.2"}
    needed -= glibc | {"libodbcinst.so.2"}  # the wheel brings its own
    assert "not found" not in result.stdout, result.stdout
    # Each remaining soname comes from one of the listed packages (or one they depend on).
    owners = set()
    for soname in needed:
        found = subprocess.run(["dpkg", "-S", f"*/{soname}"], capture_output=True, text=True, check=False)
        owners |= {line.split(":")[0] for line in found.stdout.splitlines()}
    direct = {"libkrb5-3", "libgssapi-krb5-2", "libstdc++6", "libltdl7"}
    assert direct <= owners and direct == MSODBC_LIBS, (owners, needed)
