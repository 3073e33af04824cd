"""Soak: many scrapes of the real exporter process across several stand-ins while faults come and go.

    python -m tests.soak --scrapes 20000        # `make soak`

Every fault the stand-in can play is injected on one target for a stretch of scrapes while every target
keeps being scraped, in shuffled cycles so a short run still sees each one: bad and hung logins (the
target is bounced first, so the exporter has to log in again), hung TCP handshakes, hung and slow
batches, dropped and garbage answers, restarts, and servers that go away (scraped while down) and come
back on the same port. After the last fault the run waits for every target to be up again, then scrapes
a final healthy round whose answers must all be `mssql_up 1`.

During every stretch the config is reloaded (`POST /-/reload`) while the scrapes run, in turn: a good
config that changes one target's labels (its connection stays), a bad one (a port that is not a number:
it must be refused with 500 while the running config serves on), and a good one that changes one
target's login timeout (that target's connection is replaced). A good reload refused, a bad one
accepted, or any other answer fails the run, as do the leaks below.

The printed report has the exporter's RSS, open descriptors, threads and sockets to the stand-ins (any
TCP state) after warm-up and at the end. Threads are counted without the idle scrape workers the exporter
keeps for reuse (it reports them on /metrics); those come and go with the number of overlapping scrapes.
It fails on a bad answer (not a 200 with an `mssql_up` line), a final answer that is not up, anything but
exactly one established connection per target at the end, any growth in threads or descriptors, a scrape
worker still busy at rest, RSS growth of 2 MB or more after warm-up (the first half of the run and at
least a full cycle of faults and reloads: see WARM_STRETCHES), or the test password in the exporter's log.
A shorter run is in the test suite (tests/test_soak.py).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, samples_of, value
from tests.e2e_stack import Stack
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Instance, Scenario
from tests.standin.server import StandInServer

SCENARIOS = ["healthy-oltp", "numa-4-nodes", "named-instance-padded", "memory-pressure"]
FAULTS = [
    "bad_login",
    "hang_connect",
    "hang_login",
    "hang_batch",
    "slow_over_timeout",
    "drop_mid_result",
    "garbage",
    "restart",
    "away",
]
# A stand-in plays these on a new connection only, so the target is bounced when they are injected.
LOGIN_FAULTS = {"bad_login", "hang_connect", "hang_login"}
# These cost a timeout per scrape of the victim, so they are held for fewer scrapes than the cheap ones.
SLOW_FAULTS = {"hang_connect", "hang_login", "hang_batch", "slow_over_timeout"}
STRETCH = 150
SLOW_STRETCH = 24
QUIET_STRETCHES = 2  # fault-free stretches per cycle: the baseline the faults are compared with
TIMEOUT_HEADER = {"X-Prometheus-Scrape-Timeout-Seconds": "2"}
RECOVERY_TIMEOUT_SECONDS = 30.0
FINAL_ROUNDS = 5  # scrapes of each target in the final healthy round
# RSS is judged from a warm snapshot, not from the start one: taken at the first stretch's end after both
# a full cycle of faults (WARM_STRETCHES stretches: every fault, a reload of each kind and the quiet
# stretches once) and half the run (WARM_FRACTION). Until then the
# exporter's memory grows without leaking: every fault starts scrape workers and HTTP threads that were
# not needed before (a hung batch holds one in the driver), and glibc gives a thread that finds the
# existing malloc arenas busy an arena of its own (up to 8 per core), which keeps the pages it once used
# after the thread has gone. Measured (docs/operations.md, "Soak"): in a 4,000-scrape run traced with
# tracemalloc the Python heap grew by 0.6 MB by mid-run and by 0.03 MB more to the end, while malloc's
# thread arenas went from 11 to 14 and their reserved bytes from 3.3 to 11.5 MB; with MALLOC_ARENA_MAX=2
# the same run grew 2.2 MB instead of 4.3 MB. A leak still shows as growth after warm-up.
# One cycle was not enough: a full run grew 3.7 MB from there but 0.75 MB over its second half, the
# arenas filling more slowly as the faults come round again.
WARM_STRETCHES = len(FAULTS) + QUIET_STRETCHES
WARM_FRACTION = 0.5
RSS_GROWTH_LIMIT = 2_000_000  # after warm-up
# The target's labels (the reloads change them) come between the name and the value.
UP_LINE = re.compile(r"^mssql_up(?:\{[^}]*\})? ([01]\.0)$", re.MULTILINE)


@dataclass
class Target:
    name: str
    handler: ScenarioHandler
    server: StandInServer | None
    port: int


@dataclass
class Snapshot:
    rss: int
    fds: int
    threads: int  # without idle scrape and HTTP workers
    sockets: Counter[str]  # TCP state -> sockets from the exporter to a stand-in port
    busy_workers: int

    @property
    def connections(self) -> int:
        return sum(self.sockets.values())

    def describe_sockets(self) -> str:
        return ", ".join(f"{state} {n}" for state, n in sorted(self.sockets.items())) or "none"


@dataclass
class Report:
    targets: int = 0
    scrapes: int = 0
    up: int = 0
    down: int = 0
    bad_answers: list[str] = field(default_factory=list)
    final_answers: list[str] = field(default_factory=list)  # "up" or what came back instead
    recovery_seconds: float | None = None  # from the last fault cleared to every target up; None: never
    start: Snapshot | None = None
    warm: Snapshot | None = None  # after warm-up (WARM_STRETCHES, WARM_FRACTION): RSS is judged from here
    end: Snapshot | None = None
    seconds: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)
    # fault -> `mssql_up 0` answers during its stretches: proof that the fault reached the exporter
    downs_during: dict[str, int] = field(default_factory=dict)
    password_leaked: bool = False
    rss_trace: list[tuple[int, int]] = field(default_factory=list)  # (scrapes done, RSS)
    reloads: Counter[str] = field(default_factory=Counter)  # reload kind -> answered as expected
    reload_errors: list[str] = field(default_factory=list)  # answers a reload should not have had

    def warm_growth(self) -> int:
        """RSS growth from the warm snapshot to the end (from the start if the run was too short to warm)."""
        assert self.start is not None and self.end is not None
        return self.end.rss - (self.warm or self.start).rss

    def second_half_growth(self) -> int:
        """RSS growth over the second half of the run: warm-up (allocator arenas, caches) is over by
        then, so a leak shows here as a steady rise while warm-up does not."""
        if len(self.rss_trace) < 2:
            return 0
        half = self.rss_trace[-1][0] // 2
        mid = min(self.rss_trace, key=lambda point: abs(point[0] - half))
        return self.rss_trace[-1][1] - mid[1]

    def final_not_up(self) -> list[str]:
        return [answer for answer in self.final_answers if answer != "up"]

    def lines(self) -> list[str]:
        assert self.start is not None and self.end is not None
        recovery = "never" if self.recovery_seconds is None else f"{self.recovery_seconds:.1f} s"
        return [
            f"scrapes {self.scrapes} in {self.seconds:.0f} s: up {self.up}, down {self.down},"
            f" bad answers {len(self.bad_answers)}",
            f"faults injected: {dict(sorted(self.faults.items()))}",
            f"down answers during each fault's stretches: {dict(sorted(self.downs_during.items()))}",
            f"every target up again after the last fault: {recovery}",
            f"final healthy round: {len(self.final_answers) - len(self.final_not_up())}"
            f"/{len(self.final_answers)} up",
            f"exporter RSS  start {self.start.rss / 1e6:.1f} MB"
            f"  warm {(self.warm or self.start).rss / 1e6:.1f} MB  end {self.end.rss / 1e6:.1f} MB"
            f"  growth {(self.end.rss - self.start.rss) / 1e6:+.2f} MB"
            f"  (after warm-up {self.warm_growth() / 1e6:+.2f} MB, second half"
            f" {self.second_half_growth() / 1e6:+.2f} MB)",
            f"open fds      start {self.start.fds}  end {self.end.fds}",
            f"threads       start {self.start.threads}  end {self.end.threads}  (idle scrape and HTTP workers"
            f" not counted; busy ones at the end: {self.end.busy_workers})",
            f"sockets to SQL Server ({self.targets} targets)  start {self.start.connections}"
            f" ({self.start.describe_sockets()})  end {self.end.connections} ({self.end.describe_sockets()})",
            f"reloads during the run: {dict(sorted(self.reloads.items()))}, unexpected answers"
            f" {len(self.reload_errors)}",
            f"test password in exporter output: {'YES' if self.password_leaked else 'no'}",
        ]

    def failures(self) -> list[str]:
        """Why the soak fails; empty when it passes. The one verdict `make soak` and CI share."""
        assert self.start is not None and self.end is not None
        problems = []
        if self.bad_answers:
            problems.append(f"{len(self.bad_answers)} bad answers, first: {self.bad_answers[0]}")
        if not self.final_answers or self.final_not_up():
            problems.append(f"final round not all up: {self.final_not_up()[:5] or 'no answers'}")
        if self.end.sockets != Counter({"ESTABLISHED": self.targets}):
            problems.append(
                f"sockets to SQL Server at the end: {self.end.describe_sockets()},"
                f" expected ESTABLISHED {self.targets} (one per target)"
            )
        if self.end.threads > self.start.threads:
            problems.append(f"threads grew from {self.start.threads} to {self.end.threads}")
        if self.end.busy_workers:
            problems.append(f"{self.end.busy_workers} scrape workers still busy at rest")
        if self.end.fds > self.start.fds:
            problems.append(f"open fds grew from {self.start.fds} to {self.end.fds}")
        if self.warm_growth() >= RSS_GROWTH_LIMIT:
            problems.append(f"RSS grew by {self.warm_growth() / 1e6:.2f} MB after warm-up")
        if self.password_leaked:
            problems.append("the test password is in the exporter's log")
        if self.reload_errors:
            problems.append(
                f"{len(self.reload_errors)} reloads answered wrongly, first: {self.reload_errors[0]}"
            )
        return problems


def _snapshot(proc: psutil.Process, ports: set[int], base: str, readings: int = 5) -> Snapshot:
    """The exporter at rest: the least of a few readings 0.1 s apart, so an HTTP handler thread or
    socket just finishing does not count while a leaked one (still there every time) does."""
    best: Snapshot | None = None
    for i in range(readings):
        if i:
            time.sleep(0.1)
        workers = _scrape_workers(base)
        conns = proc.net_connections(kind="tcp")
        sockets = Counter(c.status for c in conns if c.raddr and c.raddr.port in ports)
        now = Snapshot(
            proc.memory_info().rss,
            proc.num_fds(),
            proc.num_threads() - workers["idle"] - workers["http_idle"],
            sockets,
            workers["busy"],
        )
        if best is None:
            best = now
        else:
            best = Snapshot(
                min(best.rss, now.rss),
                min(best.fds, now.fds),
                min(best.threads, now.threads),
                min(best.sockets, now.sockets, key=lambda s: sum(s.values())),
                min(best.busy_workers, now.busy_workers),
            )
    assert best is not None
    return best


def _scrape_workers(base: str) -> dict[str, int]:
    """The exporter's scrape workers by state, from its own /metrics (a missing one fails, named)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        samples = samples_of(response.read().decode())
    workers = {
        state: int(value(samples, "mssql_exporter_scrape_workers", state=state)) for state in ("busy", "idle")
    }
    # The HTTP threads, too, wait for the next request until two minutes unused (web/pool.py).
    workers["http_idle"] = int(value(samples, "mssql_exporter_http_workers", state="idle"))
    return workers


def _probe(base: str, name: str) -> tuple[int, str]:
    request = urllib.request.Request(f"{base}/probe?target={name}", headers=TIMEOUT_HEADER)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except OSError as err:  # a hung or dropped HTTP answer is exactly what must never happen
        return 0, repr(err)


def _verdict(status: int, body: str) -> str:
    """The verdict on one answer: "up", "down", or the answer itself (shortened) when neither."""
    up = UP_LINE.search(body) if status == 200 else None
    if up is not None:
        return "up" if up.group(1) == "1.0" else "down"
    return f"{status}: {body[:200]}"


class Soak:
    def __init__(self, targets: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.targets: list[Target] = []
        for i in range(targets):
            # strict=False: the batch's T-SQL is checked by the stand-in tests; parsing it here would
            # only spend the first ten seconds with the stand-ins, not the exporter, under load.
            handler = ScenarioHandler(
                Instance(Scenario.load(SCENARIOS[i % len(SCENARIOS)])), password=TEST_PASSWORD, strict=False
            )
            server = StandInServer(handler)
            port = server.start()
            self.targets.append(Target(f"t{i}", handler, server, port))

    def config(self, rack: int = 0, slow_login: bool = False) -> dict[str, object]:
        """The exporter's config; `rack` (a label on every target) and `slow_login` (t0's login timeout)
        vary it for the reloads: a label keeps the connections, a login timeout replaces t0's."""
        config = self._config()
        for target in config["targets"].values():  # type: ignore[union-attr]
            target["labels"] = {"rack": str(rack)}
        if slow_login:
            config["targets"]["t0"]["login_timeout_seconds"] = 2  # type: ignore[index]
        return config

    def _config(self) -> dict[str, object]:
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
                    # Short login back-off bounds: the soak clears a bad_login fault and expects the
                    # target back within RECOVERY_TIMEOUT_SECONDS; the default (30 s doubling to 15 min)
                    # would hold it down for minutes, as it should for a real refused password.
                    "login_backoff_seconds": 1,
                    "login_backoff_max_seconds": 2,
                    "auth_module": "standin",
                }
                for t in self.targets
            },
        }

    def schedule(self) -> Iterator[str | None]:
        """Faults in shuffled cycles, each once per cycle, with fault-free stretches among them."""
        while True:
            cycle: list[str | None] = [*FAULTS, *([None] * QUIET_STRETCHES)]
            self.rng.shuffle(cycle)
            yield from cycle

    @staticmethod
    def _down(target: Target) -> None:
        if target.server is not None:
            target.server.stop()  # closes every client socket, as a SQL Server going away does
            target.server = None

    @staticmethod
    def _up(target: Target) -> None:
        if target.server is None:
            target.server = StandInServer(target.handler, port=target.port)
            target.server.start()

    def inject(self, target: Target, fault: str) -> None:
        faults = target.handler.faults
        if fault == "away":  # down for the whole stretch, scraped all the while; back in clear()
            self._down(target)
        elif fault == "restart":  # counters reset and every session dropped, as in a real restart
            target.handler.instance.restart()
            self._down(target)
            self._up(target)
        elif fault == "slow_over_timeout":
            faults.delay_seconds = 2.5
        else:
            setattr(faults, fault, True)
            if fault in LOGIN_FAULTS:
                self._down(target)  # the exporter's open connection would never see a login fault
                self._up(target)

    def clear(self, target: Target) -> None:
        faults = target.handler.faults
        for flag in ("bad_login", "hang_connect", "hang_login", "hang_batch", "drop_mid_result", "garbage"):
            setattr(faults, flag, False)
        faults.delay_seconds = 0.0
        self._up(target)

    def stop(self) -> None:
        for t in self.targets:
            self._down(t)


def run(
    scrapes: int, targets: int = 4, seed: int = 7, workers: int = 4, warmup: int = 200, reloads: bool = True
) -> Report:
    soak = Soak(targets, seed)
    report = Report(targets=targets)
    ports = {t.port for t in soak.targets}
    try:
        with Stack(Path(tempfile.mkdtemp(prefix="soak-"))) as stack:
            base = stack.start_exporter(
                soak.config(),
                env={PASSWORD_ENV: TEST_PASSWORD},
                args=("--log.level", "debug", "--web.enable-lifecycle"),  # reloads over HTTP
            )
            process = stack.process("exporter")
            exporter = psutil.Process(process.popen.pid)
            reloader = Reloads(soak, report, base, stack.workdir / "exporter.yml")
            reloader.enabled = reloads
            _drive(soak, report, base, exporter, ports, scrapes, workers, warmup, reloader)
            report.password_leaked = TEST_PASSWORD in process.log.read_text(errors="replace")
    finally:
        soak.stop()
    return report


class Reloads:
    """Config reloads sent while a stretch's scrapes run, one per stretch, kinds in turn."""

    KINDS = ("labels", "bad", "reconnect")

    def __init__(self, soak: Soak, report: Report, base: str, path: Path) -> None:
        self.soak, self.report, self.base, self.path = soak, report, base, path
        self.count = 0
        self.rack = 0
        self.slow_login = False

    def _write(self, config: dict[str, object] | str) -> None:
        # Renamed into place: the exporter must never read half a file.
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False))
        tmp.replace(self.path)

    enabled = True  # --no-reloads: the same run without them, to compare

    def during(self, delay: float) -> threading.Thread:
        if not self.enabled:
            thread = threading.Thread(target=lambda: None, daemon=True)
            thread.start()
            return thread
        kind = self.KINDS[self.count % len(self.KINDS)]
        self.count += 1
        thread = threading.Thread(target=self._send, args=(kind, delay), daemon=True)
        thread.start()
        return thread

    def _send(self, kind: str, delay: float) -> None:
        time.sleep(delay)  # into the stretch, so scrapes are in flight
        if kind == "labels":
            # Back and forth between two values, as a config edited and reverted: a new value on every
            # reload would make every series new each time, filling the exposition's series cache
            # (bounded, 50,000 entries) rather than showing what a reload keeps or leaks.
            self.rack = 1 - self.rack
        elif kind == "reconnect":
            self.slow_login = not self.slow_login
        good = self.soak.config(self.rack, self.slow_login)
        if kind == "bad":
            bad = yaml.safe_dump(good, sort_keys=False).replace(
                f"port: {self.soak.targets[0].port}", "port: x", 1
            )
            self._write(bad)
        else:
            self._write(good)
        request = urllib.request.Request(f"{self.base}/-/reload", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, body = response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read().decode(errors="replace")
        except OSError as err:
            status, body = 0, repr(err)
        expected = 500 if kind == "bad" else 200
        if status == expected and (kind != "bad" or "targets.t0.port" in body):
            self.report.reloads[kind] += 1
        else:
            self.report.reload_errors.append(f"{kind}: {status} {body[:200]}")
        if kind == "bad":
            self._write(good)  # the file as the running config has it


def _drive(
    soak: Soak,
    report: Report,
    base: str,
    exporter: psutil.Process,
    ports: set[int],
    scrapes: int,
    workers: int,
    warmup: int,
    reloads: Reloads,
) -> None:
    names = [t.name for t in soak.targets]

    def round_of(count: int) -> list[tuple[int, str]]:
        return list(pool.map(lambda i: _probe(base, names[i % len(names)]), range(count)))

    with ThreadPoolExecutor(workers) as pool:
        if _wait_all_up(base, names) is None:
            raise RuntimeError(f"the targets were not all up within {RECOVERY_TIMEOUT_SECONDS:g} s of start")
        round_of(warmup)  # allocator arenas and caches settle before the start snapshot
        # Reloads too: each kind twice (which brings labels and login timeout back where they were), so
        # their first-time allocations (the refused config's error path, a second label set's series
        # texts) are in the start snapshot, not counted as growth.
        for _ in range(2 * len(Reloads.KINDS)):
            reloads.during(0.0).join(timeout=60)
            round_of(len(names) * 2)
        round_of(warmup // 2)
        report.start = _snapshot(exporter, ports, base)
        started = time.monotonic()
        done = 0
        schedule = soak.schedule()
        while done < scrapes:
            # One stretch: a fault on one target (or none) while every target keeps being scraped.
            victim = soak.rng.choice(soak.targets)
            fault = next(schedule)
            stretch = min(scrapes - done, SLOW_STRETCH if fault in SLOW_FAULTS else STRETCH)
            if fault is not None:
                soak.inject(victim, fault)
                report.faults[fault] = report.faults.get(fault, 0) + 1
            reload = reloads.during(soak.rng.uniform(0.0, 0.5))
            answers = round_of(stretch)
            reload.join(timeout=60)
            soak.clear(victim)
            before = report.down
            for status, body in answers:
                _tally(report, status, body)
            if fault is not None:
                report.downs_during[fault] = report.downs_during.get(fault, 0) + report.down - before
            done += stretch
            report.rss_trace.append((done, exporter.memory_info().rss))
            warmed = len(report.rss_trace) >= WARM_STRETCHES and done >= scrapes * WARM_FRACTION
            if report.warm is None and warmed and done < scrapes:
                report.warm = _snapshot(exporter, ports, base)
        report.recovery_seconds = _wait_all_up(base, names)
        report.final_answers = [_verdict(*answer) for answer in round_of(len(names) * FINAL_ROUNDS)]
        report.seconds = time.monotonic() - started
        report.end = _snapshot(exporter, ports, base)


def _wait_all_up(base: str, names: list[str]) -> float | None:
    """Seconds until every target answered up once more (hung requests the driver has to give up on
    take a while), or None if some target did not within RECOVERY_TIMEOUT_SECONDS."""
    started = time.monotonic()
    pending = set(names)
    while pending and time.monotonic() - started < RECOVERY_TIMEOUT_SECONDS:
        pending = {name for name in sorted(pending) if _verdict(*_probe(base, name)) != "up"}
        if pending:
            time.sleep(0.2)
    return None if pending else time.monotonic() - started


def _tally(report: Report, status: int, body: str) -> None:
    report.scrapes += 1
    verdict = _verdict(status, body)
    if verdict == "up":
        report.up += 1
    elif verdict == "down":
        report.down += 1
    else:
        report.bad_answers.append(verdict)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--scrapes", type=int, default=20000)
    parser.add_argument("--targets", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-reloads", dest="reloads", action="store_false", help="no config reloads")
    args = parser.parse_args()
    report = run(args.scrapes, args.targets, args.seed, reloads=args.reloads)
    for line in report.lines():
        print(line)
    for bad in report.bad_answers[:10]:
        print("bad answer:", bad)
    problems = report.failures()
    for problem in problems:
        print("problem:", problem)
    print("soak:", "FAIL" if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
