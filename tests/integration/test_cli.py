"""The command line, run as a user would: `python -m mssql_memory_exporter ...` in a subprocess."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mssql_memory_exporter import __version__
from mssql_memory_exporter.app.cli import main
from mssql_memory_exporter.app.logsetup import (
    JsonFormatter,
    LogfmtFormatter,
    format_logfmt_value,
    setup_logging,
)

PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
BAD = Path(__file__).parents[1] / "config_testdata" / "bad"

GOOD_CONFIG = """\
default_target: prod-a
auth_modules:
  m:
    username: u
    password_env: MSSQL_EXPORTER_TEST_PASSWORD
targets:
  prod-a:
    host: 127.0.0.1
    port: 1
    driver: freetds
    auth_module: m
"""

# Runs the real CLI with a stand-in for the SQL side, so these tests depend only on the pieces they test.
FAKE_SCRAPE_MAIN = textwrap.dedent(
    """
    import sys, types
    from prometheus_client.core import GaugeMetricFamily

    class Scraper:
        def __init__(self, config, host=None):
            self.config = config

        def probe(self, target, timeout):
            return [GaugeMetricFamily("mssql_up", "fake", value=1)]

        def close(self):
            print("scraper closed", file=sys.stderr, flush=True)

    fake = types.ModuleType("mssql_memory_exporter.scrape.scraper")
    fake.Scraper = Scraper
    sys.modules["mssql_memory_exporter.scrape.scraper"] = fake
    from mssql_memory_exporter.app.cli import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture
def good_config(tmp_path: Path) -> Path:
    path = tmp_path / "exporter.yml"
    path.write_text(GOOD_CONFIG)
    return path


def test_bad_config_exits_2_naming_file_and_field():
    path = BAD / "zero_login_timeout.yml"
    result = run_cli("--config.file", str(path), env={PASSWORD_ENV: "pw"})
    assert result.returncode == 2
    assert f"error: {path}: targets.prod-a.login_timeout_seconds: must be greater than 0" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_every_error_line_is_prefixed(tmp_path: Path):
    path = tmp_path / "c.yml"
    path.write_text("targets:\n  a:\n    port: 0\n")
    result = run_cli("--config.file", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"error: {path}: targets.a.") for line in lines)


def test_inline_password_is_not_echoed():
    result = run_cli("--config.file", str(BAD / "inline_password.yml"), env={PASSWORD_ENV: "pw"})
    assert result.returncode == 2
    assert "use password_env or password_file" in result.stderr
    assert "s3cr3t-inline-value" not in result.stderr


def test_password_pasted_as_env_name_is_not_echoed(tmp_path: Path):
    # A password written where the variable's name belongs is a valid name that is not set: the error
    # must point at the field without repeating what it holds.
    pasted = "Hunter2_W1nter"
    path = tmp_path / "c.yml"
    path.write_text(GOOD_CONFIG.replace(PASSWORD_ENV, pasted))
    assert pasted in path.read_text()
    result = run_cli("--config.file", str(path), env={PASSWORD_ENV: "pw"})
    assert result.returncode == 2
    assert "password_env: the environment variable it names is not set or is empty" in result.stderr
    assert pasted not in result.stderr + result.stdout


def test_missing_config_file(tmp_path: Path):
    result = run_cli("--config.file", str(tmp_path / "absent.yml"))
    assert result.returncode == 2
    assert f"error: {tmp_path / 'absent.yml'}: cannot read config file" in result.stderr
    assert "Traceback" not in result.stderr


def test_default_config_file_name(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "mssql_memory_exporter"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert "error: mssql-exporter.yml: cannot read config file" in result.stderr


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith(f"mssql-memory-exporter {__version__}")


def test_unknown_flag():
    result = run_cli("--no-such-flag")
    assert result.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in result.stderr


def test_abbreviated_flag_is_not_accepted():
    result = run_cli("--config", "x.yml")
    assert result.returncode == 2


@pytest.mark.parametrize(("flag", "value"), [("--log.level", "verbose"), ("--log.format", "text")])
def test_invalid_choices(flag: str, value: str):
    result = run_cli(flag, value)
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_bad_listen_address(good_config: Path):
    result = run_cli(
        "--config.file", str(good_config), "--web.listen-address", "9399", env={PASSWORD_ENV: "pw"}
    )
    assert result.returncode == 2
    assert "error: --web.listen-address: listen address '9399' must be host:port or :port" in result.stderr


def test_main_in_process_returns_2(capsys: pytest.CaptureFixture[str]):
    assert main(["--config.file", str(BAD / "empty_file.yml")]) == 2
    assert "the config is empty" in capsys.readouterr().err


class Exporter:
    """The CLI in a subprocess, with its stderr read line by line in the background."""

    def __init__(self, args: list[str]) -> None:
        self.lines: list[str] = []
        self._listening = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FAKE_SCRAPE_MAIN, *args],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, PASSWORD_ENV: "pw"},
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if "listening" in line:
                self._listening.set()

    def address(self) -> str:
        assert self._listening.wait(20), self.lines
        line = next(line for line in self.lines if "listening" in line)
        match = re.search(r'address"?[=:]"?([^ "]+)', line)
        assert match, line
        return match.group(1)


@pytest.fixture
def exporter(good_config: Path) -> Iterator[Exporter]:
    started = Exporter(["--config.file", str(good_config), "--web.listen-address", "127.0.0.1:0"])
    yield started
    if started.proc.poll() is None:
        started.proc.kill()
        started.proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serves_and_stops_cleanly_on_signal(good_config: Path, signum: int):
    exporter = Exporter(["--config.file", str(good_config), "--web.listen-address", "127.0.0.1:0"])
    try:
        address = exporter.address()
        with urllib.request.urlopen(f"http://{address}/-/healthy", timeout=10) as response:
            assert response.read() == b"OK\n"
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
            body = response.read().decode()
        assert "mssql_up 1.0" in body
        assert "process_" in body
        exporter.proc.send_signal(signum)
        assert exporter.proc.wait(timeout=20) == 0
    finally:
        if exporter.proc.poll() is None:
            exporter.proc.kill()
    text = "\n".join(exporter.lines)
    assert re.search(rf"level=info msg=starting version={re.escape(__version__)} targets=1", text)
    assert "scraper closed" in text
    assert "Traceback" not in text


def test_json_logs(good_config: Path):
    exporter = Exporter(
        ["--config.file", str(good_config), "--web.listen-address", "127.0.0.1:0", "--log.format", "json"]
    )
    try:
        exporter.address()
        exporter.proc.send_signal(signal.SIGTERM)
        assert exporter.proc.wait(timeout=20) == 0
    finally:
        if exporter.proc.poll() is None:
            exporter.proc.kill()
    records = [json.loads(line) for line in exporter.lines if line.startswith("{")]
    starting = next(r for r in records if r["msg"] == "starting")
    assert starting["level"] == "info"
    assert starting["targets"] == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", starting["ts"])
    listening = next(r for r in records if r["msg"] == "listening")
    assert listening["address"].startswith("127.0.0.1:")


def test_port_in_use(good_config: Path, exporter: Exporter):
    address = exporter.address()
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            FAKE_SCRAPE_MAIN,
            "--config.file",
            str(good_config),
            "--web.listen-address",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, PASSWORD_ENV: "pw"},
        check=False,
    )
    assert result.returncode == 1
    assert "cannot listen" in result.stderr
    assert "Traceback" not in result.stderr


# --- log formats ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("a=b", '"a=b"'),
        ("line\nbreak", '"line\\nbreak"'),
        ("back\\slash", '"back\\\\slash"'),
        ("", '""'),
        (None, '""'),
        (True, "true"),
        (3, "3"),
        (0.25, "0.25"),
    ],
)
def test_logfmt_values(value: object, text: str):
    assert format_logfmt_value(value) == text


def _record(message: str, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, message, None, None)
    record.created = 1795309323.456789  # 2026-11-22T01:02:03.456Z
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_logfmt_line():
    line = LogfmtFormatter().format(_record("scrape failed", target="prod-a", err="login failed for user"))
    assert line == (
        'ts=2026-11-22T01:02:03.456Z level=warn msg="scrape failed" target=prod-a err="login failed for user"'
    )


def test_json_line():
    line = JsonFormatter().format(_record("scrape failed", target="prod-a", count=2))
    assert json.loads(line) == {
        "ts": "2026-11-22T01:02:03.456Z",
        "level": "warn",
        "msg": "scrape failed",
        "target": "prod-a",
        "count": 2,
    }


def test_exception_is_one_logfmt_line():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = _record("probe failed", target="t")
        record.exc_info = sys.exc_info()
    line = LogfmtFormatter().format(record)
    assert "\n" not in line
    assert 'err="Traceback' in line and "RuntimeError: boom" in line


def test_setup_logging_levels(capsys: pytest.CaptureFixture[str]):
    logger = logging.getLogger("mssql_memory_exporter.test")
    try:
        setup_logging("warn", "logfmt")
        logger.info("hidden")
        logger.warning("shown", extra={"target": "a"})
        setup_logging("debug", "json")  # a second call replaces the first handler, it does not add one
        logger.debug("debug shown")
        err = capsys.readouterr().err
    finally:
        setup_logging("info", "logfmt")
    assert "hidden" not in err
    assert "level=warn msg=shown target=a" in err
    assert json.loads(err.splitlines()[-1])["msg"] == "debug shown"
    assert len(err.splitlines()) == 2


@pytest.mark.parametrize(("level", "fmt"), [("verbose", "logfmt"), ("info", "text")])
def test_setup_logging_rejects(level: str, fmt: str):
    with pytest.raises(ValueError, match="unknown log"):
        setup_logging(level, fmt)


def test_open_files_limit_is_raised_and_a_short_one_is_reported(caplog):
    import logging
    import resource

    from mssql_memory_exporter.app.cli import raise_open_files_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(256, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        with caplog.at_level(logging.WARNING):
            raise_open_files_limit(10)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
        assert not [r for r in caplog.records if "open files limit" in r.getMessage()]
        if hard != resource.RLIM_INFINITY:
            with caplog.at_level(logging.WARNING):
                raise_open_files_limit(hard)  # 2 descriptors per target: more than the hard limit allows
            assert [r for r in caplog.records if "open files limit" in r.getMessage()]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_two_signals_stop_once(good_config: Path):
    """Ctrl-C followed by systemd's SIGTERM, or an impatient operator: one "stopping" line, a clean
    exit, no traceback."""
    exporter = Exporter(["--config.file", str(good_config), "--web.listen-address", "127.0.0.1:0"])
    try:
        exporter.address()
        exporter.proc.send_signal(signal.SIGINT)
        exporter.proc.send_signal(signal.SIGTERM)
        assert exporter.proc.wait(timeout=20) == 0
    finally:
        if exporter.proc.poll() is None:
            exporter.proc.kill()
    time.sleep(0.2)  # the reader thread drains stderr
    text = "\n".join(exporter.lines)
    assert len(re.findall(r"msg=stopping", text)) == 1, text
    assert "Traceback" not in text
