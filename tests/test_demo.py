"""The demo (`make run` without CONFIG), as a user runs it: it starts whole, fails whole and stops whole
(issue 14, item 4).

Every demo here is the real `make run` (or scripts/run.sh), the real stand-in and the real exporter over
FreeTDS, on free ports, in a session of its own: when it is over, no process of that session may remain
and both ports must be free. Signals go where a user's would: `kill <pid of make>` (SIGTERM), Ctrl-C
(SIGINT to the terminal's process group), a closed terminal (SIGHUP to the job's process group), and each
signal to the script alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import samples_of, value
from tests.e2e_stack import free_port

ROOT = Path(__file__).resolve().parent.parent
# The stand-in imports sqlfluff before it listens: seconds, more on a shared, busy machine.
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
# Settings a developer's shell or an outer `make test` may carry; each demo sets its own.
SCRUBBED = ("CONFIG", "LISTEN", "STANDIN_PORT", "SCENARIO", "STANDIN_ARGS", "MAKEFLAGS", "MAKELEVEL")


def session_processes(sid: int) -> dict[int, str]:
    """pid -> command line of every process in session `sid` (zombies included: they are not gone)."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        # Fields after the command name in parentheses: state, ppid, pgrp, session, ...
        if int(stat.rpartition(")")[2].split()[3]) == sid:
            found[int(entry.name)] = cmdline.strip()
    return found


def listening(port: int) -> bool:
    """True when something listens on 127.0.0.1:port. SO_REUSEADDR lets the bind pass over connections in
    TIME_WAIT; Linux still refuses it while a socket listens there."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen(1)
        except OSError:
            return True
    return False


@dataclass
class Demo:
    process: subprocess.Popen[bytes]
    output: Path
    http_port: int
    standin_port: int

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    def wait_for_line(self, pattern: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text(), re.MULTILINE):
            if self.process.poll() is not None:
                pytest.fail(f"the demo exited ({self.process.returncode}) before {pattern!r}:\n{self.text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {pattern!r} within {timeout:.0f} s:\n{self.text()}")
            time.sleep(0.05)

    def wait_for_exit(self, timeout: float = STOP_TIMEOUT) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            left = session_processes(self.process.pid)
            pytest.fail(f"still running {timeout:.0f} s later: {left}\n{self.text()}")

    def child(self, fragment: str) -> int:
        pids = [pid for pid, cmd in session_processes(self.process.pid).items() if fragment in cmd]
        assert len(pids) == 1, f"one {fragment!r} expected: {session_processes(self.process.pid)}"
        return pids[0]

    def assert_gone(self) -> None:
        """Nothing the demo started runs on, and neither port is held."""
        assert session_processes(self.process.pid) == {}, f"left behind:\n{self.text()}"
        assert not listening(self.http_port), f"the exporter's port {self.http_port} is still held"
        assert not listening(self.standin_port), f"the stand-in's port {self.standin_port} is still held"


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Demo]]:
    started: list[Demo] = []

    def start(
        argv: list[str], http_port: int | None = None, standin_port: int | None = None, **env: str
    ) -> Demo:
        http_port = http_port or free_port()
        standin_port = standin_port or free_port()
        output = tmp_path / f"demo-{len(started)}.log"
        environ = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
        environ.update(LISTEN=f"127.0.0.1:{http_port}", STANDIN_PORT=str(standin_port), **env)
        with output.open("wb") as sink:
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own session and process group, as a terminal's job
            )
        demo = Demo(process, output, http_port, standin_port)
        started.append(demo)
        return demo

    yield start
    # A failed test must not leave a demo running on the shared machine: kill what is left, by pid.
    for demo in started:
        for pid in session_processes(demo.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.process.wait(10)


MAKE_RUN = ["make", "--no-print-directory", "run"]
SCRIPT = ["bash", "scripts/run.sh"]


def probe(port: int) -> dict:
    # The stand-in parses the exporter's first batch with sqlfluff: seconds of CPU on a busy machine, so the
    # probe offers a long scrape timeout, as Prometheus does with this header. A stand-in that is not there
    # yet refuses the connection at once, whatever the timeout.
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/probe?target=demo", headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"}
    )
    with urllib.request.urlopen(request, timeout=90) as response:
        return samples_of(response.read().decode())


def test_first_probe_after_listening_reads_the_standin(launch) -> None:
    demo = launch(MAKE_RUN)
    demo.wait_for_line(r"msg=listening")
    # The very first probe, as soon as the exporter says it listens: the stand-in must already answer.
    assert value(probe(demo.http_port), "mssql_up", scenario="memory-pressure") == 1
    text = demo.text()
    assert text.index("stand-in playing") < text.index("msg=starting"), "the exporter started first"
    assert f"http://localhost:{demo.http_port}/probe?target=demo" in text, "the banner names the URL to open"
    os.killpg(demo.process.pid, signal.SIGINT)
    assert demo.wait_for_exit() != 0
    demo.assert_gone()


def test_the_standin_parses_the_exporters_batches_before_it_listens(launch) -> None:
    """Issue 36: on a busy machine every first probe timed out (10 s, then HYT00 at 20 s) while the
    stand-in parsed the batch with sqlfluff. It parses ahead now, before it says it listens, so the first
    probe is answered within Prometheus' default 10 s scrape timeout, however long the parse took."""
    demo = launch(SCRIPT)
    demo.wait_for_line(r"msg=listening")
    text = demo.text()
    parsed = re.search(r"parsed (\d+) exporter batch texts ahead", text)
    assert parsed and int(parsed.group(1)) >= 2, text
    assert text.index("parsed") < text.index("stand-in playing") < text.index("msg=starting")
    request = urllib.request.Request(
        f"http://127.0.0.1:{demo.http_port}/probe?target=demo",
        headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert value(samples_of(response.read().decode()), "mssql_up", scenario="memory-pressure") == 1
    os.killpg(demo.process.pid, signal.SIGTERM)
    demo.wait_for_exit()
    demo.assert_gone()


@pytest.mark.parametrize(
    ("argv", "signum", "to_group"),
    [
        pytest.param(MAKE_RUN, signal.SIGTERM, False, id="kill-make"),
        pytest.param(MAKE_RUN, signal.SIGINT, True, id="ctrl-c-make"),
        pytest.param(MAKE_RUN, signal.SIGHUP, True, id="terminal-closed-make"),
        pytest.param(SCRIPT, signal.SIGTERM, False, id="term-script"),
        pytest.param(SCRIPT, signal.SIGINT, False, id="int-script"),
        pytest.param(SCRIPT, signal.SIGHUP, False, id="hup-script"),
    ],
)
def test_a_signal_stops_the_demo_whole(launch, argv: list[str], signum: int, to_group: bool) -> None:
    demo = launch(argv)
    demo.wait_for_line(r"msg=listening")
    if to_group:
        os.killpg(demo.process.pid, signum)
    else:
        os.kill(demo.process.pid, signum)
    code = demo.wait_for_exit()
    assert code != 0, "a demo stopped by a signal must not report success"
    if argv is SCRIPT:
        assert code == -signum, "the script dies of the signal, as the shell expects"
    demo.assert_gone()


def test_standin_that_cannot_bind_fails_the_demo_before_the_exporter(launch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        demo = launch(MAKE_RUN, standin_port=port)
        code = demo.wait_for_exit(START_TIMEOUT)
        text = demo.text()
        assert code != 0, text
        assert f"error: stand-in cannot listen on 127.0.0.1:{port}: Address already in use" in text, text
        assert "Traceback" not in text, "a port in use is one line, not a traceback"
        assert "msg=starting" not in text, "the exporter was started against a stand-in that is not there"
        assert session_processes(demo.process.pid) == {}
        assert not listening(demo.http_port)


def test_standin_that_does_not_listen_in_time_fails_the_demo(launch) -> None:
    # A millisecond is shorter than any Python start-up: a real stand-in, genuinely not listening yet.
    demo = launch(MAKE_RUN, DEMO_READY_TIMEOUT="0.001")
    code = demo.wait_for_exit(START_TIMEOUT)
    text = demo.text()
    assert code != 0, text
    assert f"the stand-in did not listen on 127.0.0.1:{demo.standin_port} within 0.001 s" in text, text
    assert "msg=starting" not in text, "the exporter was started against a stand-in that is not ready"
    demo.assert_gone()


def test_standin_death_stops_the_exporter(launch) -> None:
    demo = launch(MAKE_RUN)
    demo.wait_for_line(r"msg=listening")
    os.kill(demo.child("tests.standin"), signal.SIGKILL)
    assert demo.wait_for_exit() != 0
    assert "the stand-in exited (killed by SIGKILL)" in demo.text()
    demo.assert_gone()


def test_exporter_that_cannot_listen_stops_the_standin(launch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        demo = launch(MAKE_RUN, http_port=port)
        code = demo.wait_for_exit(START_TIMEOUT)
        text = demo.text()
        assert code != 0, text
        assert "cannot listen" in text, text
        assert session_processes(demo.process.pid) == {}
        assert not listening(demo.standin_port), "the stand-in was left running"


def test_a_wrong_scenario_lists_the_valid_ones(launch) -> None:
    """Issue 25: a mistyped SCENARIO reached the stand-in and failed there without saying what exists."""
    demo = launch(MAKE_RUN, SCENARIO="memory-presure")
    code = demo.wait_for_exit(START_TIMEOUT)
    text = demo.text()
    assert code != 0, text
    assert "SCENARIO 'memory-presure' is not a scenario; valid: " in text, text
    valid = text.split("valid: ", 1)[1].split(" (or a path", 1)[0].split(", ")
    assert "memory-pressure" in valid and "healthy-oltp" in valid and "base" not in valid
    assert "msg=starting" not in text
    demo.assert_gone()


def exporter_config(demo: Demo) -> Path:
    command = session_processes(demo.process.pid)[demo.child("mssql-memory-exporter")]
    return Path(command.split("--config.file ", 1)[1].split()[0])


def test_two_demos_at_once_each_read_their_own_config(launch) -> None:
    """Issue 25: every demo wrote build/demo-config.yml, so a second demo replaced the first one's config
    (read again by the first at its next reload or restart)."""
    first = launch(MAKE_RUN, SCENARIO="healthy-oltp")
    second = launch(MAKE_RUN, SCENARIO="memory-pressure")
    first.wait_for_line(r"msg=listening")
    second.wait_for_line(r"msg=listening")
    configs = exporter_config(first), exporter_config(second)
    assert configs[0] != configs[1]
    assert f"port: {first.standin_port}" in configs[0].read_text()
    assert f"port: {second.standin_port}" in configs[1].read_text()
    assert value(probe(first.http_port), "mssql_up", scenario="healthy-oltp") == 1
    assert value(probe(second.http_port), "mssql_up", scenario="memory-pressure") == 1
    for demo in (first, second):
        os.killpg(demo.process.pid, signal.SIGTERM)
        demo.wait_for_exit()
        demo.assert_gone()
    assert not configs[0].exists() and not configs[1].exists()
