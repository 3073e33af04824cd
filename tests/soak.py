"""Soak: many scrapes of the real exporter process across several stand-ins while faults come and go.

    python -m tests.soak --scrapes 20000        # `make soak`
Reports the exporter's RSS, open file descriptors and TCP connections to SQL Server after warm-up and at
the end, and every answer that was not a 200 with an `mssql_up` line. A shorter run is in the test suite.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD
from tests.e2e_stack import Stack
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Instance, Scenario
from tests.standin.server import StandInServer

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ["healthy-oltp", "numa-4-nodes", "named-instance-padded", "memory-pressure"]
# Faults, each held on one target for a stretch of scrapes. Hangs cost a timeout per scrape, so they
# are held for fewer scrapes than the cheap ones.
FAULTS = ["bad_login", "drop_mid_result", "garbage", "hang_batch", "slow_over_timeout", "restart", "away"]
TIMEOUT_HEADER = {"X-Prometheus-Scrape-Timeout-Seconds": "2"}


@dataclass
class Target:
    name: str
    handler: ScenarioHandler
    server: StandInServer
    port: int


@dataclass
class Snapshot:
    rss: int
    fds: int
    connections: int


@dataclass
class Report:
    scrapes: int = 0
    up: int = 0
    down: int = 0
    bad_answers: list[str] = field(default_factory=list)
    start: Snapshot | None = None
    end: Snapshot | None = None
    seconds: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)
    password_leaked: bool = False
    rss_trace: list[tuple[int, int]] = field(default_factory=list)  # (scrapes done, RSS)

    def second_half_growth(self) -> int:
        """RSS growth over the second half of the run: warm-up (allocator arenas, caches) is over by
        then, so a leak shows here as a steady rise while warm-up does not."""
        if len(self.rss_trace) < 2:
            return 0
        half = self.rss_trace[-1][0] // 2
        mid = min(self.rss_trace, key=lambda point: abs(point[0] - half))
        return self.rss_trace[-1][1] - mid[1]

    def lines(self) -> list[str]:
        assert self.start is not None and self.end is not None
        return [
            f"scrapes {self.scrapes} in {self.seconds:.0f} s: up {self.up}, down {self.down},"
            f" bad answers {len(self.bad_answers)}",
            f"faults injected: {dict(sorted(self.faults.items()))}",
            f"exporter RSS  start {self.start.rss / 1e6:.1f} MB  end {self.end.rss / 1e6:.1f} MB"
            f"  growth {(self.end.rss - self.start.rss) / 1e6:+.2f} MB"
            f"  (second half {self.second_half_growth() / 1e6:+.2f} MB)",
            f"open fds      start {self.start.fds}  end {self.end.fds}",
            f"connections to SQL Server  start {self.start.connections}  end {self.end.connections}",
            f"test password in exporter output: {'YES' if self.password_leaked else 'no'}",
        ]


def _snapshot(proc: psutil.Process, ports: set[int]) -> Snapshot:
    conns = [
        c
        for c in proc.net_connections(kind="tcp")
        if c.raddr and c.raddr.port in ports and c.status == "ESTABLISHED"
    ]
    return Snapshot(proc.memory_info().rss, proc.num_fds(), len(conns))


def _probe(base: str, name: str) -> tuple[int, str]:
    request = urllib.request.Request(f"{base}/probe?target={name}", headers=TIMEOUT_HEADER)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except OSError as err:  # a hung or dropped HTTP answer is exactly what must never happen
        return 0, repr(err)


class Soak:
    def __init__(self, targets: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.targets: list[Target] = []
        for i in range(targets):
            handler = ScenarioHandler(
                Instance(Scenario.load(SCENARIOS[i % len(SCENARIOS)])), password=TEST_PASSWORD
            )
            server = StandInServer(handler)
            port = server.start()
            self.targets.append(Target(f"t{i}", handler, server, port))
        self.lock = threading.Lock()

    def config(self) -> dict[str, object]:
        return {
            "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {
                t.name: {
                    "host": "127.0.0.1",
                    "port": t.port,
                    "driver": "freetds",
                    "encryption": "off",
                    "login_timeout_seconds": 1,
                    "query_timeout_seconds": 1,
                    "auth_module": "standin",
                }
                for t in self.targets
            },
        }

    def inject(self, target: Target, fault: str) -> None:
        faults = target.handler.faults
        if fault == "restart":
            target.handler.instance.restart()
        elif fault == "away":  # SQL Server goes away and comes back on the same port
            target.server.stop()
            time.sleep(0.2)
            target.server = StandInServer(target.handler, port=target.port)
            target.server.start()
        elif fault == "slow_over_timeout":
            faults.delay_seconds = 2.5
        else:
            setattr(faults, fault, True)

    @staticmethod
    def clear(target: Target) -> None:
        faults = target.handler.faults
        faults.bad_login = faults.drop_mid_result = faults.garbage = faults.hang_batch = False
        faults.delay_seconds = 0.0

    def stop(self) -> None:
        for t in self.targets:
            t.server.stop()


def run(scrapes: int, targets: int = 4, seed: int = 7, workers: int = 4, warmup: int = 200) -> Report:
    soak = Soak(targets, seed)
    report = Report()
    ports = {t.port for t in soak.targets}
    try:
        with Stack(Path(tempfile.mkdtemp(prefix="soak-"))) as stack:
            base = stack.start_exporter(
                soak.config(), env={PASSWORD_ENV: TEST_PASSWORD}, args=("--log.level", "debug")
            )
            process = stack.process("exporter")
            exporter = psutil.Process(process.popen.pid)
            _drive(soak, report, base, exporter, ports, scrapes, workers, warmup)
            report.password_leaked = TEST_PASSWORD in process.log.read_text(errors="replace")
    finally:
        soak.stop()
    return report


def _drive(
    soak: Soak,
    report: Report,
    base: str,
    exporter: psutil.Process,
    ports: set[int],
    scrapes: int,
    workers: int,
    warmup: int,
) -> None:
    names = [t.name for t in soak.targets]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: _probe(base, names[i % len(names)]), range(warmup)))
        report.start = _snapshot(exporter, ports)
        started = time.monotonic()
        done = 0
        while done < scrapes:
            # One stretch: a fault on one target (or none) while every target keeps being scraped.
            victim = soak.rng.choice(soak.targets)
            fault = soak.rng.choice([*FAULTS, None, None])
            stretch = min(scrapes - done, 60 if fault in ("hang_batch", "slow_over_timeout") else 400)
            if fault is not None:
                soak.inject(victim, fault)
                report.faults[fault] = report.faults.get(fault, 0) + 1
            answers = list(pool.map(lambda i: _probe(base, names[i % len(names)]), range(stretch)))
            soak.clear(victim)
            for status, body in answers:
                _tally(report, status, body)
            done += stretch
            report.rss_trace.append((done, exporter.memory_info().rss))
        # Let connections stuck behind hung requests time out, then read the end state after a healthy
        # round so every target has its one connection back.
        time.sleep(3)
        list(pool.map(lambda i: _probe(base, names[i % len(names)]), range(len(names) * 5)))
        report.seconds = time.monotonic() - started
        report.end = _snapshot(exporter, ports)


def _tally(report: Report, status: int, body: str) -> None:
    report.scrapes += 1
    if status == 200 and "\nmssql_up 1.0" in "\n" + body:
        report.up += 1
    elif status == 200 and "\nmssql_up 0.0" in "\n" + body:
        report.down += 1
    else:
        report.bad_answers.append(f"{status}: {body[:200]}")


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--scrapes", type=int, default=20000)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    report = run(args.scrapes, args.targets, args.seed)
    for line in report.lines():
        print(line)
    for bad in report.bad_answers[:10]:
        print("bad answer:", bad)
    assert report.start is not None and report.end is not None
    ok = (
        not report.bad_answers
        and report.end.rss - report.start.rss < 5_000_000
        and report.end.fds <= report.start.fds
        and report.end.connections <= args.targets
        and not report.password_leaked
    )
    print("soak:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
