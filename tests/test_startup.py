"""Start-up as the operator runs it: the real exporter process, its private FreeTDS directory, signals.

Issue 14: start-up rewrote the private freetds.conf once per target (bytes written grew with the
square of the fleet), and a SIGTERM before "listening" killed the process and left the directory in
/tmp. Each test points TMPDIR at a directory of its own, so what the exporter leaves behind is
exactly what that directory holds afterwards.

Pauses during start-up come from HOOKED_MAIN, which wraps two start-up steps of the real CLI so that a
test can signal at a known point (a slow config read, or right after the directory was made) instead
of racing a timer. Speed is measured by `make bench` (bench/startup.py), never asserted here.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

PREFIX = "mssql-exporter-freetds-"  # freetds.PREFIX; spelled out so this file runs against older code

PASSWORD_ENV = "MSSQL_EXPORTER_TEST_PASSWORD"
ROOT = Path(__file__).resolve().parent.parent

# The real CLI, with a pause (or a failure) injected at one named point of start-up.
HOOKED_MAIN = textwrap.dedent(
    """
    import os, sys, time
    from mssql_memory_exporter.app import cli
    from mssql_memory_exporter.connection import freetds

    POINT = os.environ.get("STARTUP_TEST_POINT", "")

    def reached(point):
        if point != POINT:
            return
        print(f"test hook: reached {point}", file=sys.stderr, flush=True)
        if os.environ.get("STARTUP_TEST_ACTION") == "raise":
            raise RuntimeError("injected start-up failure")
        time.sleep(120)  # a slow step: the test sends its signal now

    real_load_config = cli.load_config
    def load_config(path):
        reached("config")
        return real_load_config(path)
    cli.load_config = load_config

    real_prepare = freetds.prepare
    def prepare(targets):
        path = real_prepare(targets)
        print(f"test hook: freetds.conf at {path}", file=sys.stderr, flush=True)
        reached("prepared")
        return path
    freetds.prepare = prepare

    raise SystemExit(cli.main(sys.argv[1:]))
    """
)


def write_config(path: Path, targets: int) -> Path:
    """`targets` FreeTDS targets that check the server certificate: each one gets a freetds.conf
    section. Nothing is contacted before a probe, so the hosts need not exist."""
    body = {
        "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
        "targets": {
            f"sql-{i:06d}": {
                "host": f"sql-{i:06d}.example.net",
                "driver": "freetds",
                "encryption": "require",
                "auth_module": "m",
            }
            for i in range(targets)
        },
    }
    path.write_text(yaml.safe_dump(body))
    return path


@dataclass
class Run:
    proc: subprocess.Popen[str]
    tmpdir: Path
    lines: list[str]
    seen: threading.Condition

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        regex = re.compile(pattern)
        with self.seen:
            found = self.seen.wait_for(
                lambda: (
                    next((m for line in self.lines if (m := regex.search(line))), None)
                    or self.proc.poll() is not None
                ),
                timeout,
            )
            match = next((m for line in self.lines if (m := regex.search(line))), None)
        assert match is not None, f"no {pattern!r} in the log ({found=}): {self.lines[-20:]}"
        return match

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.tmpdir.iterdir())

    def log(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def start(tmp_path: Path) -> Iterator:
    runs: list[Run] = []

    def run(
        config: Path,
        *,
        hooked: bool = True,
        listen: str = "127.0.0.1:0",
        args: tuple[str, ...] = (),
        **env: str,
    ) -> Run:
        tmpdir = tmp_path / f"tmp{len(runs)}"
        tmpdir.mkdir()
        code = ["-c", HOOKED_MAIN] if hooked else ["-m", "mssql_memory_exporter"]
        proc = subprocess.Popen(
            [sys.executable, *code, "--config.file", str(config), "--web.listen-address", listen, *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            # No .pyc writes: they would count as the process's disk writes.
            env={
                **os.environ,
                PASSWORD_ENV: "pw",
                "TMPDIR": str(tmpdir),
                "PYTHONDONTWRITEBYTECODE": "1",
                **env,
            },
        )
        started = Run(proc, tmpdir, [], threading.Condition())

        def read() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                with started.seen:
                    started.lines.append(line.rstrip("\n"))
                    started.seen.notify_all()
            with started.seen:
                started.seen.notify_all()

        threading.Thread(target=read, daemon=True).start()
        runs.append(started)
        return started

    yield run
    for started in runs:
        if started.proc.poll() is None:
            started.proc.kill()
            started.proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_after_the_directory_was_made_stops_start_up_and_removes_it(start, tmp_path: Path, signum):
    run = start(write_config(tmp_path / "fleet.yml", 50), STARTUP_TEST_POINT="prepared")
    conf = Path(run.wait_for(r"freetds.conf at (\S+)").group(1))
    run.wait_for("reached prepared")
    assert conf.is_file() and conf.parent.parent == run.tmpdir  # the window the test is about
    run.proc.send_signal(signum)
    assert run.proc.wait(timeout=30) == 0, run.log()
    assert run.leftovers() == [], run.log()
    name = signal.Signals(signum).name
    assert re.search(rf"level=info msg=stopping signal={name} during=start-up", run.log()), run.log()
    assert "listening" not in run.log() and "Traceback" not in run.log()


def test_sigterm_while_a_large_config_is_read_stops_cleanly(start, tmp_path: Path):
    # 5,000 targets take seconds to parse and validate: the signal lands in the middle of it.
    run = start(write_config(tmp_path / "fleet.yml", 5000), STARTUP_TEST_POINT="config")
    run.wait_for("reached config")
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=30) == 0, run.log()
    assert "msg=stopping signal=SIGTERM during=start-up" in run.log()
    assert run.leftovers() == [] and "Traceback" not in run.log()


def test_sigterm_during_a_real_start_up_without_hooks(start, tmp_path: Path):
    """No pause injected: the signal goes out when the process logs "starting", so it lands while the
    5,000 targets' drivers are checked and their sections written (the old code took seconds there and
    died, leaving its directory) or, on a fast machine, just after "listening". Either way the exit is
    clean and nothing is left behind."""
    run = start(write_config(tmp_path / "fleet.yml", 5000), hooked=False)
    run.wait_for("msg=starting")
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=30) == 0, run.log()
    assert run.leftovers() == [], run.log()


def test_listen_failure_after_the_directory_was_made_removes_it(start, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = start(write_config(tmp_path / "fleet.yml", 10), listen=f"127.0.0.1:{port}")
        assert run.proc.wait(timeout=30) == 1, run.log()
    assert 'msg="cannot listen"' in run.log() and "freetds.conf at" in run.log()
    assert run.leftovers() == [], run.log()


def test_exception_after_the_directory_was_made_removes_it(start, tmp_path: Path):
    run = start(
        write_config(tmp_path / "fleet.yml", 10), STARTUP_TEST_POINT="prepared", STARTUP_TEST_ACTION="raise"
    )
    assert run.proc.wait(timeout=30) == 1, run.log()
    assert "injected start-up failure" in run.log() and "freetds.conf at" in run.log()
    assert run.leftovers() == [], run.log()


def test_stop_after_listening_removes_the_directory(start, tmp_path: Path):
    run = start(write_config(tmp_path / "fleet.yml", 10), hooked=False)
    run.wait_for("msg=listening")
    (private,) = run.leftovers()
    assert private.startswith(PREFIX) and ((run.tmpdir / private).stat().st_mode & 0o777) == 0o700
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=30) == 0, run.log()
    assert run.leftovers() == []


def written_at_start_up(start, config: Path) -> tuple[int, int]:
    """(bytes the process wrote to disk by the time it listens, size of its freetds.conf)."""
    run = start(config, hooked=False)
    run.wait_for("msg=listening")
    io = dict(line.split(": ") for line in Path(f"/proc/{run.proc.pid}/io").read_text().splitlines())
    (private,) = run.leftovers()
    size = (run.tmpdir / private / "freetds.conf").stat().st_size
    run.proc.send_signal(signal.SIGTERM)
    assert run.proc.wait(timeout=30) == 0
    return int(io["write_bytes"]), size


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/<pid>/io")
def test_bytes_written_at_start_up_grow_linearly_with_the_fleet(start, tmp_path: Path):
    small, small_size = written_at_start_up(start, write_config(tmp_path / "small.yml", 100))
    large, large_size = written_at_start_up(start, write_config(tmp_path / "large.yml", 1000))
    page_slack = 64 * 1024  # write_bytes counts whole pages, and the file is written through a temp file
    # Once, not once per target: the old code wrote about 0.75 MB for 100 targets and 72 MB for 1,000.
    assert small <= small_size + page_slack, (small, small_size)
    assert large <= large_size + page_slack, (large, large_size)
    assert large <= 10 * small + page_slack, (small, large)  # ten times the targets, ten times the bytes


# tgkill(2): a signal to one thread of another process. Python has no binding for it.
_TGKILL = {"x86_64": 234, "aarch64": 131}.get(os.uname().machine)


def signal_thread(pid: int, tid: int, signum: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_TGKILL, pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill failed")


@pytest.mark.skipif(_TGKILL is None or not Path("/proc/self/task").exists(), reason="needs Linux tgkill")
def test_sigterm_delivered_to_the_http_thread_stops_the_exporter(start, tmp_path: Path):
    """The kernel hands a process-directed SIGTERM to any thread; Python runs the handler on the main
    thread only. The exporter used to wait for its stop event in a lock wait that such a signal does not
    interrupt, so it hung (28 of 80 stops sent just as it began listening) until SIGKILL, which left
    the private directory behind. Here the signal goes to the HTTP thread on purpose."""
    run = start(write_config(tmp_path / "fleet.yml", 10), hooked=False)
    run.wait_for("msg=listening")
    pid = run.proc.pid
    deadline = time.monotonic() + 20
    while not (others := [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]):
        assert time.monotonic() < deadline, "the HTTP thread never started"
        time.sleep(0.05)
    time.sleep(0.5)  # the main thread is waiting for the stop by now
    signal_thread(pid, others[0], signal.SIGTERM)
    assert run.proc.wait(timeout=20) == 0, run.log()
    assert run.leftovers() == [] and "msg=stopped" in run.log()


def _read_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_logins_check_the_file_without_reading_or_rewriting_it(tmp_path: Path):
    """Every FreeTDS login of a checking target calls freetds.ensure(). It used to read the whole file
    back and compare it: a fleet's first round of logins read sections x targets bytes (150 MB at
    1,000 targets). Now it compares two lstat() results with what was written."""
    from mssql_memory_exporter.config import load_config
    from mssql_memory_exporter.connection import freetds

    os.environ[PASSWORD_ENV] = "pw"
    config = load_config(str(write_config(tmp_path / "fleet.yml", 1000)))
    targets = list(config.targets.values())
    conf = freetds.prepare(targets)
    assert conf is not None
    written = conf.stat()
    before = _read_bytes()
    for target in targets:
        freetds.ensure(target)
    assert _read_bytes() - before < 100_000  # the file is about 160 kB; reading it once would exceed this
    after = conf.stat()
    assert (after.st_ino, after.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)  # not rewritten

    # A file put in its place (same name, other content) is not the one written: rewritten at a login.
    text = conf.read_text()
    conf.write_text("[mssql-exporter-x]\n\thost = elsewhere.example.net\n")
    freetds.ensure(targets[0])
    assert conf.read_text() == text
