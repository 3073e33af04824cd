"""What the benchmark modules share: the stand-in farm and exporter processes, timing helpers, tables.

The exporter always runs as its own process when its RSS or CPU is reported, so the figures are its
own; the stand-ins run in another process (bench/standin_farm.py), so their CPU is not the exporter's.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import psutil
import yaml

ROOT = Path(__file__).resolve().parent.parent
for entry in (str(ROOT / "exporter"), str(ROOT)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD  # noqa: E402

BUILD = ROOT / "build"
SCRAPE_TIMEOUT_HEADER = {"X-Prometheus-Scrape-Timeout-Seconds": "10"}


# ---- numbers --------------------------------------------------------------------------------------


def pct(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile; with fewer than 100 values p99 is the maximum."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1000:.{digits}f}"


def mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:.1f}"


def print_table(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], notes: str = ""
) -> None:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    print("=" * len(title))
    line = "  ".join(
        h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(cells[0], widths, strict=True))
    )
    print(line)
    print("-" * len(line))
    for row in cells[1:]:
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    if notes:
        print(notes)
    sys.stdout.flush()


# ---- the machine ----------------------------------------------------------------------------------


def raise_fd_limit() -> tuple[int, int]:
    """Soft limit of open files up to the hard limit: the fleet holds a socket per target in three
    processes (inherited by the children started after this)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _command_output(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "unknown"
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (out.stdout or out.stderr).strip() or "unknown"


def machine_info() -> dict[str, str]:
    import prometheus_client
    import pyodbc

    model = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    freetds = _command_output(["dpkg-query", "-W", "-f=${Version}", "tdsodbc"])
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "cpu": f"{psutil.cpu_count(logical=True)} logical cores"
        f" ({psutil.cpu_count(logical=False)} physical), {model}",
        "memory": f"{psutil.virtual_memory().total / 2**30:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "pyodbc": pyodbc.version,
        "prometheus_client": getattr(prometheus_client, "__version__", None)
        or _pip_version("prometheus-client"),
        "freetds": f"tdsodbc {freetds}",
        "msodbc": _msodbc(),
        "unixodbc": _command_output(["odbcinst", "--version"]),
        "open files limit": "{} soft / {} hard".format(*resource.getrlimit(resource.RLIMIT_NOFILE)),
    }


def _pip_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"


class MachineLoad:
    """CPU of the whole machine between start() and stop(), and how much of it was this benchmark's:
    this process plus its children that have exited (the farm and exporter processes, once reaped).
    Other sessions on a shared machine show up as the difference."""

    def start(self) -> None:
        self._t0 = psutil.cpu_times()
        self._own0 = os.times()
        self._wall0 = time.monotonic()

    def stop(self) -> dict[str, float]:
        t1 = psutil.cpu_times()
        own1 = os.times()
        wall = time.monotonic() - self._wall0
        idle = (t1.idle - self._t0.idle) + (getattr(t1, "iowait", 0.0) - getattr(self._t0, "iowait", 0.0))
        total = sum(t1) - sum(self._t0)
        busy_share = 1.0 - idle / total if total > 0 else float("nan")
        cores = psutil.cpu_count() or 1
        own = sum(own1[:4]) - sum(self._own0[:4])  # user, system, children_user, children_system
        return {
            "busy_percent": 100.0 * busy_share,
            "busy_cores": busy_share * cores,
            "bench_cores": own / wall if wall > 0 else float("nan"),
            "wall": wall,
        }


def load_note(load: dict[str, float]) -> str:
    others = max(0.0, load["busy_cores"] - load["bench_cores"])
    return (
        f"    machine during this table: {load['busy_cores']:.2f} of {psutil.cpu_count()} cores busy"
        f" ({load['busy_percent']:.0f}%); this benchmark's processes {load['bench_cores']:.2f} cores,"
        f" other processes {others:.2f} cores, over {load['wall']:.0f} s."
    )


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def peak_rss(pid: int) -> float:
    """VmHWM: the process's peak resident set, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024
    return float("nan")


# ---- ports ----------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not start listening on port {port}")


def child_env(code: Path = ROOT) -> dict[str, str]:
    """The environment of the processes the bench starts; `code` is the checkout whose exporter runs."""
    return {
        **os.environ,
        "MSSQL_STANDIN_PASSWORD": TEST_PASSWORD,
        PASSWORD_ENV: TEST_PASSWORD,
        "PYTHONPATH": os.pathsep.join([str(code / "exporter"), str(ROOT)]),
    }


# ---- the stand-in farm ----------------------------------------------------------------------------


class Farm:
    """K stand-in servers in one helper process (bench/standin_farm.py), one port each."""

    def __init__(self, scenario: str, count: int = 1) -> None:
        self.scenario = scenario
        self.count = count
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.standin_farm", "--scenario", scenario, "--count", str(count)],
            env=child_env(),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # its failures should be seen
            text=True,
            bufsize=1,
        )
        self._lock = threading.Lock()
        hello = self._read()
        self.ports: list[int] = hello["ports"]
        self.process = psutil.Process(self._proc.pid)

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"stand-in farm ({self.scenario} x{self.count}) exited: rc={self._proc.wait()}"
            )
        return json.loads(line)

    def stats(self) -> dict[str, Any]:
        """Per server, per session in connection order: [batches, bytes_in, bytes_out]; and errors."""
        with self._lock:
            stdin: IO[str] | None = self._proc.stdin
            assert stdin is not None
            stdin.write("stats\n")
            stdin.flush()
            return self._read()

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write("quit\n")
                self._proc.stdin.flush()
                self._proc.wait(20)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(10)

    def __enter__(self) -> Farm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def session_totals(stats: dict[str, Any], server: int | None = None, session: int | None = None) -> list[int]:
    """[batches, bytes_in, bytes_out] summed over the chosen servers and sessions."""
    servers = stats["servers"] if server is None else [stats["servers"][server]]
    total = [0, 0, 0]
    for sessions in servers:
        chosen = sessions if session is None else sessions[session : session + 1]
        for s in chosen:
            for i in range(3):
                total[i] += s[i]
    return total


def _msodbc() -> str:
    from mssql_memory_exporter.connection.msodbc import packaged_driver

    packaged = packaged_driver()
    return packaged.describe() if packaged is not None else "not installed (the msodbc extra)"


# ---- the exporter process -------------------------------------------------------------------------


def target_yaml(port: int, query_timeout: float = 10, login_timeout: float = 5) -> dict[str, object]:
    return {
        "host": "127.0.0.1",
        "port": port,
        "driver": "freetds",
        "encryption": "off",
        "login_timeout_seconds": login_timeout,
        "query_timeout_seconds": query_timeout,
        "auth_module": "standin",
    }


class Exporter:
    """The exporter as users run it: its own process, configured by file, probed over HTTP. `code` is the
    checkout whose exporter package runs (another one for bench/compare.py)."""

    def __init__(self, targets: dict[str, dict[str, object]], name: str, code: Path = ROOT) -> None:
        BUILD.mkdir(exist_ok=True)
        config_path = BUILD / f"bench-{name}.yml"
        config_path.write_text(
            yaml.safe_dump(
                {
                    "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                    "targets": targets,
                }
            )
        )
        self.port = free_port()
        script = ROOT / ".venv" / "bin" / "mssql-memory-exporter"
        command = [str(script)] if script.exists() else [sys.executable, "-m", "mssql_memory_exporter"]
        self._proc = subprocess.Popen(
            [
                *command,
                "--config.file",
                str(config_path),
                "--web.listen-address",
                f"127.0.0.1:{self.port}",
                "--log.level",
                "warn",
            ],
            env=child_env(code),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=None,  # warnings (failed scrapes) show up in the bench output
        )
        wait_for_port(self.port, "the exporter")
        self.process = psutil.Process(self._proc.pid)
        self.pid = self._proc.pid

    def rss(self) -> float:
        return float(self.process.memory_info().rss)

    def peak_rss(self) -> float:
        return peak_rss(self.pid)

    def cpu(self) -> float:
        return cpu_seconds(self.process)

    def client(self) -> HttpClient:
        return HttpClient(self.port)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HttpClient:
    """One keep-alive HTTP connection to the exporter (reopened once if the server closed it)."""

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self._port = port
        self._timeout = timeout
        self._conn: http.client.HTTPConnection | None = None

    def get(self, path: str) -> str:
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=self._timeout)
            try:
                self._conn.request("GET", path, headers=SCRAPE_TIMEOUT_HEADER)
                response = self._conn.getresponse()
                body = response.read().decode()
                if response.status != 200:
                    raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:200]}")
                if response.getheader("Connection", "").lower() == "close":
                    self.close()
                return body
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def get_new_connection(port: int, path: str, timeout: float = 60.0) -> str:
    """One GET on a connection of its own, closed after the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={**SCRAPE_TIMEOUT_HEADER, "Connection": "close"})
        response = conn.getresponse()
        body = response.read().decode()
        if response.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:200]}")
        return body
    finally:
        conn.close()
