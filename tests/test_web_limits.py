"""The exporter at its limits (issue 36, items 3 and 4): out of file descriptors, and a pool full of probes
stuck on a silent server. The first runs the real CLI in a subprocess under `ulimit -n 128`; the second
an in-process server whose probe hangs."""

from __future__ import annotations

import http.client
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from mssql_memory_exporter.config import TargetConfig, parse_config
from mssql_memory_exporter.web import ExporterHTTPServer, make_server
from prometheus_client.core import GaugeMetricFamily, Metric

from tests.test_web import PASSWORD_ENV

FILES_LIMIT = 128
IDLE_CONNECTIONS = 200


@pytest.fixture(autouse=True)
def enough_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = IDLE_CONNECTIONS + 256
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(needed, hard), hard))


def write_config(path: Path, targets: int = 1) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
                "targets": {
                    f"t{n}": {"host": f"t{n}.example.com", "auth_module": "m"} for n in range(targets)
                },
            }
        )
    )
    return path


class Exporter:
    """The real CLI in a subprocess; its log lines collected as they come."""

    def __init__(
        self,
        args: list[str],
        env: dict[str, str] | None = None,
        wrap: list[str] | None = None,
        **popen: object,
    ) -> None:
        self.lines: list[str] = []
        self.seen = threading.Condition()
        self.proc = subprocess.Popen(
            [*(wrap or []), sys.executable, "-m", "mssql_memory_exporter", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, PASSWORD_ENV: "pw", "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
            **popen,  # type: ignore[arg-type]
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self.seen:
                self.lines.append(line.rstrip("\n"))
                self.seen.notify_all()
        with self.seen:
            self.seen.notify_all()

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            return next((m for line in self.lines if (m := regex.search(line))), None)

        with self.seen:
            self.seen.wait_for(lambda: found() is not None or self.proc.poll() is not None, timeout)
            match = found()
        assert match is not None, f"no {pattern!r} in the log: {self.lines[-20:]}"
        return match

    def count(self, pattern: str) -> int:
        with self.seen:
            return sum(1 for line in self.lines if re.search(pattern, line))

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def exporters() -> Iterator[list[Exporter]]:
    running: list[Exporter] = []
    yield running
    for exporter in running:
        exporter.stop()


def healthy(port: int, timeout: float) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/-/healthy")
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def _limit_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILES_LIMIT, FILES_LIMIT))


def test_out_of_descriptors_accept_backs_off_logs_once_and_serves_when_they_free_up(
    tmp_path: Path, exporters: list[Exporter]
):
    """At `ulimit -n 128` with 200 kept-alive connections, accept() fails with EMFILE while the connection
    waits in the listen queue: it used to be retried at once, for ever (26,000 calls in 8 s, a core
    busy), with nothing logged."""
    exporter = Exporter(
        ["--config.file", str(write_config(tmp_path / "c.yml")), "--web.listen-address", "127.0.0.1:0"],
        preexec_fn=_limit_files,
    )
    exporters.append(exporter)
    port = int(exporter.wait_for(r"msg=listening address=\S*:(\d+)").group(1))
    clients: list[socket.socket] = []
    try:
        for _ in range(IDLE_CONNECTIONS):  # the kernel completes them all; the exporter runs out
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(sock)
        exporter.wait_for('msg="cannot accept connections')
        before = exporter.cpu_seconds()
        time.sleep(4)
        spent = exporter.cpu_seconds() - before
        # Backing off to 1 s, the process is almost idle; retrying at once it used a core.
        assert spent < 1.0, f"{spent:.2f} s of CPU in 4 s while out of descriptors"
        assert exporter.count("cannot accept connections") == 1  # once per episode
        # Descriptors free up: the ones still queued, and a new scraper, are served.
        for sock in clients[:100]:
            sock.close()
        del clients[:100]
        assert healthy(port, timeout=30) == 200
        exporter.wait_for('msg="accepting connections again" failed_accepts=')
    finally:
        for sock in clients:
            sock.close()


class HangingProbe:
    """A target that never answers: each probe waits until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self.lock = threading.Lock()

    def __call__(self, target: TargetConfig, timeout: float) -> list[Metric]:
        with self.lock:
            self.started += 1
        self.release.wait(60)
        family = GaugeMetricFamily("mssql_up", "Fake.")
        family.add_metric([], 0.0)
        return [family]


PROBES = 40


def test_health_and_readiness_answer_within_a_second_while_40_probes_hang(monkeypatch: pytest.MonkeyPatch):
    """Before: with 40 probes of a hung target, /-/healthy waited 9-10 s for a thread; Kubernetes'
    liveness probe gives 1 s."""
    monkeypatch.setenv(PASSWORD_ENV, "pw")
    config = parse_config(
        {
            "auth_modules": {"m": {"username": "u", "password_env": PASSWORD_ENV}},
            "targets": {"hung": {"host": "hung.example.com", "auth_module": "m"}},
        }
    )
    probe = HangingProbe()
    server: ExporterHTTPServer = make_server(config, probe, "127.0.0.1:0")
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    port = int(server.server_address[1])
    assert server.worker_limit() < PROBES  # the probes fill every thread and some wait for one
    pool = ThreadPoolExecutor(PROBES)
    try:
        scrapes = [pool.submit(_scrape, port) for _ in range(PROBES)]
        deadline = time.monotonic() + 30
        while probe.started < server.worker_limit() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert probe.started == server.worker_limit()
        for path in ("/-/healthy", "/-/ready") * 5:
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                assert (response.status, response.read()) == (200, b"OK\n"), path
            finally:
                conn.close()
            assert time.monotonic() - started < 1.0, path
        probe.release.set()
        assert {scrape.result(timeout=60) for scrape in scrapes} == {200}
    finally:
        probe.release.set()
        pool.shutdown(wait=True)
        server.shutdown()
        server.server_close()


def _scrape(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", "/probe?target=hung", headers={"X-Prometheus-Scrape-Timeout-Seconds": "60"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
