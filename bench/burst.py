"""(h) Bursts: N probes sent to ONE exporter process at the same instant, over N new connections.

A Prometheus with hundreds of targets on one exporter can open that many connections at once (after a
restart, a network blip, or simply when its scrape offsets line up). Four stand-ins (healthy-oltp) are
the targets, probed in turn; every connection is opened at once (non-blocking connects, so every SYN
leaves together), each sends `GET /probe?target=NAME` with Prometheus' timeout header and
`Accept-Encoding: gzip`, and one selector loop here reads every answer. Latency runs from the burst's
start to an answer's last byte, so it includes the wait in the listen queue and for a worker. Also: the
exporter's peak thread count (sampled every 10 ms), and the kernel's ListenOverflows counter (SYNs
dropped because a listen queue was full; machine-wide, so another program's overflows would count too).
All traffic stays on 127.0.0.1; each burst is bounded by DEADLINE.
"""

from __future__ import annotations

import gzip
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.common import SCRAPE_TIMEOUT_HEADER, Exporter, Farm, cpu_seconds, ms, pct, target_yaml

SCENARIO = "healthy-oltp"
TARGETS = 4
SIZES = (200, 2000)
QUICK_SIZES = (50,)
DEADLINE = 120.0  # seconds a burst may take in all, past any scrape timeout
SCRAPE_TIMEOUT = float(SCRAPE_TIMEOUT_HEADER["X-Prometheus-Scrape-Timeout-Seconds"])
NETSTAT = Path("/proc/net/netstat")


@dataclass
class Burst:
    size: int
    latencies: list[float] = field(default_factory=list)  # answered probes with mssql_up 1
    down: int = 0  # answered 200, but mssql_up 0 (the target's previous scrape still running, ...)
    late: int = 0  # answered 503: waited past its scrape timeout for a free thread, so not scraped
    failed: int = 0  # no answer by the deadline, a refused or reset connection, or not 200
    threads_idle: int = 0
    threads_peak: int = 0
    listen_overflows: int = 0
    exporter_cpu: float = 0.0
    wall: float = 0.0
    gzipped: int = 0


def measure(size: int, code: Path | None = None) -> Burst:
    with Farm(SCENARIO, TARGETS) as farm:
        targets = {f"t{i}": target_yaml(port) for i, port in enumerate(farm.ports)}
        extra = {} if code is None else {"code": code}
        with Exporter(targets, name=f"burst-{size}", **extra) as exporter:
            for name in targets:  # warm-up: every target logged in and past its first (refresh) scrape
                for _ in range(2):
                    exporter.client().get(f"/probe?target={name}")
            return _burst(exporter, list(targets), size)


def _burst(exporter: Exporter, names: list[str], size: int) -> Burst:
    result = Burst(size)
    result.threads_idle = exporter.process.num_threads()
    sampler = _ThreadSampler(exporter.process)
    overflows = _listen_overflows()
    cpu = cpu_seconds(exporter.process)
    sampler.start()
    started = time.monotonic()
    socks: dict[socket.socket, _Exchange] = {}
    with selectors.DefaultSelector() as selector:
        for i in range(size):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", exporter.port))
            request = (
                f"GET /probe?target={names[i % len(names)]} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"X-Prometheus-Scrape-Timeout-Seconds: {SCRAPE_TIMEOUT:g}\r\nAccept-Encoding: gzip\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            socks[sock] = _Exchange(request)
            selector.register(sock, selectors.EVENT_WRITE)
        open_ = size
        while open_ and (left := started + DEADLINE - time.monotonic()) > 0:
            for key, events in selector.select(min(left, 1.0)):
                sock = key.fileobj
                exchange = socks[sock]
                if exchange.step(sock, events):
                    selector.unregister(sock)
                    open_ -= 1
                    if exchange.done_at:
                        exchange.done_at -= started
                elif events & selectors.EVENT_WRITE and not exchange.pending:
                    selector.modify(sock, selectors.EVENT_READ)
    result.wall = time.monotonic() - started
    sampler.stop()
    result.exporter_cpu = cpu_seconds(exporter.process) - cpu
    result.threads_peak = sampler.peak
    result.listen_overflows = _listen_overflows() - overflows
    for sock, exchange in socks.items():
        sock.close()
        verdict = exchange.verdict()
        if verdict == "up":
            result.latencies.append(exchange.done_at)
        elif verdict == "down":
            result.down += 1
        elif verdict == "late":
            result.late += 1
        else:
            result.failed += 1
        result.gzipped += exchange.gzipped
    return result


class _Exchange:
    def __init__(self, request: bytes) -> None:
        self.pending = request
        self.answer = bytearray()
        self.done_at = 0.0
        self.error = ""
        self.gzipped = False

    def step(self, sock: socket.socket, events: int) -> bool:
        """Advances the exchange; True once it is over (answer complete, closed, or failed)."""
        try:
            if self.pending and events & selectors.EVENT_WRITE:
                sent = sock.send(self.pending)
                self.pending = self.pending[sent:]
                return False
            chunk = sock.recv(65536)
        except BlockingIOError:
            return False
        except OSError as exc:
            self.error = str(exc)
            return True
        if chunk:
            self.answer += chunk
            return False
        self.done_at = time.monotonic()
        return True

    def verdict(self) -> str:
        head, _, body = bytes(self.answer).partition(b"\r\n\r\n")
        if not self.error and head.startswith(b"HTTP/1.1 503 "):
            return "late"
        if self.error or not head.startswith(b"HTTP/1.1 200 "):
            return "failed"
        if b"\r\ncontent-encoding: gzip" in head.lower():
            self.gzipped = True
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError):
                return "failed"
        return "up" if b"\nmssql_up 1.0\n" in body else "down"


class _ThreadSampler:
    def __init__(self, process: psutil.Process) -> None:
        self._process = process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.peak = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                self.peak = max(self.peak, self._process.num_threads())
            except psutil.Error:
                return


def _listen_overflows() -> int:
    """TcpExt ListenOverflows: connections dropped because an accept queue was full (whole machine)."""
    try:
        lines = NETSTAT.read_text().splitlines()
    except OSError:
        return 0
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            fields = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            return int(fields.get("ListenOverflows", 0))
    return 0


TITLE = (
    f"(h) Bursts: N probes at the same instant over N new connections to ONE exporter ({TARGETS} targets,"
    f" scrape timeout {SCRAPE_TIMEOUT:g} s)"
)
NOTES = (
    "    latency of the up-1 answers: burst start to last byte (listen queue and worker wait included)."
    " up 0: answered with\n"
    "    mssql_up 0 (a target's previous scrape still running at the probe's deadline). 503 late: waited"
    " past its scrape\n"
    "    timeout for a free thread, so not scraped. failed: no answer within"
    f" {DEADLINE:g} s, refused or reset.\n"
    "    threads: the exporter process's, idle before the burst / peak during it. listen overflows: the"
    " kernel's TcpExt\n"
    "    ListenOverflows during the burst (machine-wide). CPU/probe: the exporter's CPU time over the burst"
    " / probes."
)


def table(results: list[Burst]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "probes at once",
        "up 1 / up 0 / 503 late / failed",
        "latency p50 / p99 / max",
        f"within {SCRAPE_TIMEOUT:g} s",
        "gzip",
        "exporter threads idle / peak",
        "listen overflows",
        "exporter CPU / probe",
    ]
    rows = []
    for r in results:
        lat = r.latencies
        within = sum(1 for t in lat if t <= SCRAPE_TIMEOUT)
        rows.append(
            [
                r.size,
                f"{len(lat)} / {r.down} / {r.late} / {r.failed}",
                f"{ms(pct(lat, 50), 0)} / {ms(pct(lat, 99), 0)} / {ms(max(lat), 0)} ms" if lat else "-",
                f"{within} of {r.size}",
                r.gzipped,
                f"{r.threads_idle} / {r.threads_peak}",
                r.listen_overflows,
                f"{ms(r.exporter_cpu / r.size)} ms",
            ]
        )
    return headers, rows


def summary(r: Burst) -> dict[str, object]:
    return {
        "probes": r.size,
        "up": len(r.latencies),
        "down": r.down,
        "late": r.late,
        "failed": r.failed,
        "latency_ms": {p: round(pct(r.latencies, p) * 1000, 2) for p in (50, 99)} if r.latencies else {},
        "max_latency_ms": round(max(r.latencies) * 1000, 2) if r.latencies else None,
        "within_scrape_timeout": sum(1 for t in r.latencies if t <= SCRAPE_TIMEOUT),
        "gzipped": r.gzipped,
        "threads_idle": r.threads_idle,
        "threads_peak": r.threads_peak,
        "listen_overflows": r.listen_overflows,
        "exporter_cpu_ms_per_probe": round(r.exporter_cpu / r.size * 1000, 3),
        "wall_seconds": round(r.wall, 2),
    }
