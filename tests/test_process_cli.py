"""--version, --config.check, --healthcheck and mssql_exporter_build_info, as an operator runs them
(issue 25): the real CLI in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter import __version__
from mssql_memory_exporter.app.build_info import REVISION_ENV, build_info_families
from mssql_memory_exporter.app.healthcheck import pid1_listen_address

from tests.conftest import exposition, samples_of

ROOT = Path(__file__).resolve().parent.parent
PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
WEBCONFIG = ROOT / "tests" / "webconfig_testdata"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, PASSWORD_ENV: "pw", **env},
        check=False,
    )


def good_config(path: Path) -> Path:
    body = {
        "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {"sql": {"host": "sql.example.net", "auth_module": "m"}},
    }
    path.write_text(yaml.safe_dump(body))
    return path


def git_head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def test_version_prints_the_revision_python_pyodbc_and_drivers():
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    head = git_head()
    assert f"mssql-memory-exporter {__version__} (revision {head})" in result.stdout
    assert re.search(r"python \d+\.\d+\.\d+, pyodbc \d", result.stdout)
    assert "FreeTDS" in result.stdout


def test_the_revision_baked_into_the_environment_wins():
    commit = "0123456789abcdef0123456789abcdef01234567"
    assert f"(revision {commit})" in cli("--version", **{REVISION_ENV: commit}).stdout
    assert "(revision unknown)" in cli("--version", **{REVISION_ENV: "not a commit; rm -rf"}).stdout


def test_build_info_metric_has_one_series_with_every_label():
    samples = samples_of(exposition(build_info_families()))
    [(name, labels)] = [key for key in samples if key[0] == "mssql_exporter_build_info"]
    assert {k for k, _ in labels} == {"version", "revision", "python", "pyodbc", "driver"}
    assert samples[(name, labels)] == 1
    assert dict(labels)["version"] == __version__


def test_config_check_accepts_a_good_config_without_listening(tmp_path: Path):
    config = good_config(tmp_path / "ok.yml")
    # A listen address that is taken would fail start-up; the check must not even try.
    result = cli("--config.check", "--config.file", str(config), "--web.listen-address", "127.0.0.1:1")
    assert result.returncode == 0, result.stderr
    assert f"{config}: valid (1 targets)" in result.stdout
    assert "listening" not in result.stderr


def test_config_check_refuses_a_bad_config_naming_the_field(tmp_path: Path):
    config = tmp_path / "bad.yml"
    config.write_text(yaml.safe_dump({"targets": {"sql": {"host": "h", "auth_module": "nope"}}}))
    result = cli("--config.check", "--config.file", str(config))
    assert result.returncode == 2
    assert f"error: {config}: targets.sql.auth_module: no auth module named 'nope'" in result.stderr


def test_config_check_checks_the_web_config_too(tmp_path: Path):
    config = good_config(tmp_path / "ok.yml")
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\n")
    result = cli("--config.check", "--config.file", str(config), "--web.config.file", str(web))
    assert result.returncode == 2 and "nonexistent" in result.stderr, result.stderr
    web.write_text("basic_auth_users: {}\n")
    result = cli("--config.check", "--config.file", str(config), "--web.config.file", str(web))
    assert result.returncode == 0, result.stderr
    assert f"{config} and {web}: valid" in result.stdout


def test_config_check_prints_secret_file_warnings(tmp_path: Path):
    secret = tmp_path / "password"
    secret.write_text("pw\n")
    secret.chmod(0o644)
    config = tmp_path / "c.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "auth_modules": {"m": {"username": "u", "password_file": str(secret)}},
                "targets": {"sql": {"host": "h", "auth_module": "m"}},
            }
        )
    )
    result = cli("--config.check", "--config.file", str(config))
    assert result.returncode == 0
    assert "warning: auth_modules.m.password_file: " in result.stderr and "every user" in result.stderr


def test_healthcheck_uses_the_listen_address_of_the_exporter_in_pid_1(tmp_path: Path):
    cmdline = tmp_path / "cmdline"
    args = ["/opt/mssql-memory-exporter/bin/python", "/opt/mssql-memory-exporter/bin/mssql-memory-exporter"]
    cmdline.write_bytes(b"\0".join(a.encode() for a in [*args, "--web.listen-address=:19399"]) + b"\0")
    assert pid1_listen_address(cmdline) == ":19399"
    cmdline.write_bytes(b"\0".join(a.encode() for a in [*args, "--web.listen-address", "[::1]:9500"]) + b"\0")
    assert pid1_listen_address(cmdline) == "[::1]:9500"
    cmdline.write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    assert pid1_listen_address(cmdline) == ":9399"
    cmdline.write_bytes(b"/sbin/init\0")
    assert pid1_listen_address(cmdline) is None


@pytest.fixture
def running(tmp_path: Path):
    config = good_config(tmp_path / "c.yml")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mssql_memory_exporter",
            "--config.file",
            str(config),
            "--web.listen-address",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, PASSWORD_ENV: "pw"},
    )
    assert proc.stderr is not None
    port = None
    for line in proc.stderr:
        match = re.search(r"msg=listening address=127\.0\.0\.1:(\d+)", line)
        if match:
            port = int(match.group(1))
            break
    yield port
    proc.terminate()
    proc.wait(timeout=60)


def test_healthcheck_on_a_configured_port(running):
    result = cli("--healthcheck", "--web.listen-address", f"127.0.0.1:{running}")
    assert result.returncode == 0, result.stdout
    assert "healthy" in result.stdout
    # The port the old HEALTHCHECK hard-coded is not the one served: that check would fail.
    assert cli("--healthcheck", "--web.listen-address", "127.0.0.1:1").returncode == 1


def test_a_wheel_built_from_a_checkout_carries_its_revision(tmp_path: Path):
    """An installed package has no git beside it: the build (setup.py's build_py hook) writes the commit
    into the package, where build_info.revision() reads it."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("mssql_memory_exporter/REVISION").decode().strip() == git_head()


# Issue 36 item 7: a config that makes the YAML library raise something else than its own error (a
# 5000-digit port: ValueError; 3,000 nested mappings: RecursionError) printed a traceback and exited 1.
HOSTILE_CONFIGS = {
    "5000-digit-port": "targets:\n  x: {host: h, auth_module: m, port: " + "9" * 5000 + "}\n",
    "deep-mappings": "targets:\n  x:\n    labels: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_CONFIGS))
def test_config_check_and_start_up_refuse_a_hostile_config_in_one_line(tmp_path: Path, name: str):
    config = tmp_path / "c.yml"
    config.write_text(HOSTILE_CONFIGS[name])
    for args in (["--config.check"], ["--web.listen-address", "127.0.0.1:0"]):
        result = cli(*args, "--config.file", str(config))
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr, result.stderr
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"error: {config}: invalid YAML: "), result.stderr
