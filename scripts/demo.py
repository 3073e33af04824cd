"""The demo behind `make run` without CONFIG: the SQL Server stand-in, then the exporter reading it.

Run by scripts/run.sh with the project's venv (`.venv/bin/python scripts/demo.py`), from the repository
root. Settings come from the environment, as `make run VAR=value` passes them:

  LISTEN        the exporter's listen address (default :9399)
  STANDIN_PORT  the stand-in's TCP port on 127.0.0.1 (default 14330)
  SCENARIO      the scenario the stand-in plays (default memory-pressure; tests/standin/scenarios/*.yml;
                a name that is not one is refused with the list of valid names)
  STANDIN_ARGS  faults on a timetable, e.g. "--fault hang_batch@60-90" (tests/standin/schedule.py)
  DEMO_READY_TIMEOUT  seconds the stand-in gets to listen (default 120)

The two run as one: the stand-in starts first and the exporter only once the stand-in listens (so the
first probe reads it), either one exiting stops the other and the demo exits non-zero, and SIGTERM,
SIGINT or SIGHUP stops both before the demo itself dies of that signal. A bash script could not do this
reliably: `wait` returns on the first child only with job control, and a trap runs only between commands.

Under `make run`, GNU make passes SIGTERM on to its recipe (so `kill <make's pid>` stops the demo), and
Ctrl-C or a closed terminal signal the whole process group. SIGINT or SIGHUP sent to make's pid alone
reach nobody else: make then waits for the demo to end by itself.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import select
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each demo writes its config to a file of its own here (two demos on other ports must not read each
# other's, and a reload re-reads it), removed when the demo ends.
CONFIG_DIR = ROOT / "build"
SCENARIO_DIR = ROOT / "tests" / "standin" / "scenarios"
# What every scenario extends; not one to play on its own.
NOT_SCENARIOS = frozenset({"base"})
PASSWORD_ENV = "MSSQL_STANDIN_PASSWORD"
# The stand-in imports sqlfluff and checks the exporter's batch texts with it before it listens: some
# seconds here, far more on a loaded machine.
READY_TIMEOUT_DEFAULT = "120"
# Each process gets this long to stop after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
POLL = 0.2
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class DemoError(Exception):
    """A reason the demo cannot run or goes on running; the message is printed as one line."""


def say(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def port_setting(name: str, default: str) -> int:
    text = os.environ.get(name) or default
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise DemoError(f"{name} must be a TCP port number (1-65535), got {text!r}")
    return int(text)


def seconds_setting(name: str, default: str) -> float:
    text = os.environ.get(name) or default
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise DemoError(f"{name} must be a positive number of seconds, got {text!r}")
    return seconds


def listen_port(listen: str) -> str:
    """The port of a listen address such as ':9399', '127.0.0.1:9400' or '[::1]:9400'."""
    port = listen.rpartition(":")[2]
    if not port.isdigit():
        raise DemoError(f"LISTEN must be [host]:port, got {listen!r}")
    return port


def scenario_setting() -> str:
    """SCENARIO: a scenario's name, or a path to a scenario file; a wrong one lists the valid names."""
    text = os.environ.get("SCENARIO") or "memory-pressure"
    names = sorted(p.stem for p in SCENARIO_DIR.glob("*.yml") if p.stem not in NOT_SCENARIOS)
    if Path(text).suffix in (".yml", ".yaml"):
        if Path(text).is_file():
            return text
        raise DemoError(f"SCENARIO {text!r}: no such file")
    if text not in names:
        raise DemoError(
            f"SCENARIO {text!r} is not a scenario; valid: {', '.join(names)} (or a path to a scenario .yml)"
        )
    return text


def write_config(port: int, scenario: str) -> Path:
    """The exporter's config for this demo, in a file of its own; returns its path."""
    CONFIG_DIR.mkdir(exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="demo-config-", suffix=".yml", dir=CONFIG_DIR)
    with os.fdopen(fd, "w") as fh:
        fh.write(
            f"""# Written by scripts/demo.py; the password is generated per run and passed by environment.
default_target: demo
auth_modules:
  demo:
    username: exporter
    password_env: {PASSWORD_ENV}
targets:
  demo:
    host: 127.0.0.1
    port: {port}
    driver: freetds
    encryption: "off"
    workload: oltp
    labels: {{scenario: {Path(scenario).stem}}}
    auth_module: demo
"""
        )
    return Path(name)


def child_setup(supervisor: int) -> Callable[[], None]:
    def setup() -> None:
        # Ctrl-C and a terminal's hang-up reach the whole process group. The supervisor answers them by
        # stopping the children in order; a child acting on its own would die mid-import with a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        # Should the supervisor itself be killed (SIGKILL leaves it no say), the kernel stops the child:
        # no stand-in or exporter is left behind holding its port.
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != supervisor:  # the supervisor died before the line above
            os._exit(1)

    return setup


def exit_text(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


class Demo:
    def __init__(self) -> None:
        self.received: list[int] = []
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.config: Path | None = None  # this demo's own config file, removed at the end

    def remove_config(self) -> None:
        if self.config is not None:
            self.config.unlink(missing_ok=True)

    def on_signal(self, signum: int, _frame: object) -> None:
        self.received.append(signum)

    def start(self, name: str, argv: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()) -> None:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
            # preexec_fn is unsafe only with threads (a lock held at fork); the supervisor has none.
            preexec_fn=child_setup(os.getpid()),
        )
        self.children.append((name, process))

    def check(self) -> None:
        """Raise when a signal arrived or a child exited."""
        if self.received:
            raise Stopped(self.received[0])
        for name, process in self.children:
            code = process.poll()
            if code is not None:
                raise DemoError(f"the {name} exited ({exit_text(code)})")

    def wait_for_standin(self, ready_fd: int, port: int, limit: float) -> None:
        """Until the stand-in says it listens (on the descriptor it was given) and accepts a connection.

        Its own word comes first: a port that accepts could be another program's, which the stand-in then
        fails to bind."""
        deadline = time.monotonic() + limit
        said = b""
        while b"\n" not in said:
            self.check()
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the stand-in did not listen on 127.0.0.1:{port} within {limit:g} s "
                    "(a very busy machine? DEMO_READY_TIMEOUT gives it longer)"
                )
            readable, _, _ = select.select(
                [ready_fd], [], [], min(POLL, max(0.0, deadline - time.monotonic()))
            )
            if readable:
                chunk = os.read(ready_fd, 64)
                if not chunk:  # it closed the descriptor without a word: it is exiting
                    name, process = self.children[0]
                    try:
                        status = exit_text(process.wait(STOP_TIMEOUT))
                    except subprocess.TimeoutExpired:
                        status = "closed its ready descriptor without listening"
                    raise DemoError(f"the {name} did not start ({status}); the exporter was not started")
                said += chunk
        while True:
            self.check()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise DemoError(
                        f"the stand-in does not accept connections on 127.0.0.1:{port}: {exc}"
                    ) from None
            time.sleep(POLL)

    def stop_children(self) -> None:
        """SIGTERM, last started first (the exporter before the server it reads), then SIGKILL on time-out
        or on another signal: a second Ctrl-C means now."""
        signals_before = len(self.received)
        for name, process in reversed(self.children):
            if process.poll() is not None:
                continue
            process.terminate()
            deadline = time.monotonic() + STOP_TIMEOUT
            while process.poll() is None:
                if time.monotonic() > deadline or len(self.received) > signals_before:
                    say(f"the {name} did not stop; killing it")
                    process.kill()
                    process.wait()
                    break
                time.sleep(0.05)


class Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run(demo: Demo) -> None:
    listen = os.environ.get("LISTEN") or ":9399"
    http_port = listen_port(listen)
    port = port_setting("STANDIN_PORT", "14330")
    scenario = scenario_setting()
    ready_timeout = seconds_setting("DEMO_READY_TIMEOUT", READY_TIMEOUT_DEFAULT)
    standin_args = shlex.split(os.environ.get("STANDIN_ARGS", ""))
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{PASSWORD_ENV: secrets.token_urlsafe(18)})
    config = demo.config = write_config(port, scenario)

    ready_r, ready_w = os.pipe()
    try:
        try:
            # --parse-ahead: the stand-in checks the exporter's batch texts before it listens, so the first
            # probe is answered within its timeout on a loaded machine too (issue 36).
            standin = ["-m", "tests.standin", "--scenario", scenario, "--port", str(port), "--parse-ahead"]
            demo.start(
                "stand-in",
                [sys.executable, *standin, "--ready-fd", str(ready_w), *standin_args],
                env,
                pass_fds=(ready_w,),
            )
        finally:
            os.close(ready_w)  # the stand-in holds the only write end now: its exit reads as end of file
        demo.wait_for_standin(ready_r, port, ready_timeout)
    finally:
        os.close(ready_r)

    print(
        f"""
  ============================================================================
   DEMO MODE: no CONFIG given, so the exporter reads the bundled SQL Server
   stand-in (a test double speaking TDS), playing the '{scenario}' scenario.
   This is not a real SQL Server.   Point it at yours:  make run CONFIG=my.yml

   Open:      http://localhost:{http_port}/probe?target=demo
   Also:      http://localhost:{http_port}/metrics   (the exporter's own)
   Stop:      Ctrl-C
  ============================================================================
""",
        file=sys.stderr,
        flush=True,
    )
    exporter = str(Path(sys.executable).parent / "mssql-memory-exporter")
    demo.start("exporter", [exporter, "--config.file", str(config), "--web.listen-address", listen], env)
    while True:
        demo.check()
        time.sleep(POLL)


def main() -> int:
    demo = Demo()
    for signum in STOP_SIGNALS:
        signal.signal(signum, demo.on_signal)
    try:
        run(demo)
    except Stopped as stopped:
        say(f"{stopped}: stopping the exporter and the stand-in")
        demo.stop_children()
        demo.remove_config()  # the signal below ends this process before `finally` runs
        # Die of the signal itself, as the shell and make expect of a program a signal stopped.
        signal.signal(stopped.signum, signal.SIG_DFL)
        os.kill(os.getpid(), stopped.signum)
        return 128 + stopped.signum
    except DemoError as exc:
        running = [name for name, process in demo.children if process.poll() is None]
        say(f"{exc}; stopping the {' and the '.join(running)}" if running else str(exc))
        demo.stop_children()
        return 1
    except BaseException:
        demo.stop_children()
        raise
    finally:
        demo.remove_config()
    return 0


if __name__ == "__main__":
    sys.exit(main())
