"""(d) A fleet: N stand-in targets probed through /probe?target=NAME of ONE exporter process.

N stand-ins (healthy-oltp) run in one helper process, one port each; the exporter's config lists N
targets on 127.0.0.1 at those ports. A load driver here gives every target its own schedule at the
scrape interval, staggered evenly across it (target i at i x interval / N), as Prometheus spreads its
scrapes; a pool of worker threads, each with one keep-alive HTTP connection, issues the probes. Round
0 is the warm-up (every target logs in, and its first scrape is a refresh of file names); the rounds
after it are measured. Latency is what the driver sees (HTTP request to last byte). CPU per probe is
the exporter process's CPU time over the measured window divided by the probes in it. On a 2-core
machine the stand-ins and the driver compete with the exporter for CPU, so latency carries their
noise; the exporter's CPU per probe is the figure that carries over to other machines.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import psutil

from bench.common import (
    Exporter,
    Farm,
    HttpClient,
    MachineLoad,
    cpu_seconds,
    mb,
    ms,
    pct,
    session_totals,
    target_yaml,
)

SCENARIO = "healthy-oltp"


@dataclass
class Probe:
    target: int
    round: int
    due: float
    start: float = 0.0
    end: float = 0.0
    ok: bool = False
    error: str = ""


@dataclass
class Fleet:
    targets: int
    interval: float
    rounds: int
    workers: int
    measured: list[Probe]
    warmup: list[Probe]
    window: float
    exporter_cpu: float
    farm_cpu: float
    driver_cpu: float
    machine: dict[str, float]
    round_trips: int
    rss_idle: float
    rss_after: float
    rss_peak: float
    threads: int
    fds: int
    fds_idle: int
    warmup_late: int  # warm-up probes still running when the measured window opened

    @property
    def latencies(self) -> list[float]:
        return [p.end - p.start for p in self.measured if p.ok]

    @property
    def lateness(self) -> list[float]:
        return [p.start - p.due for p in self.measured]

    @property
    def failures(self) -> int:
        return sum(1 for p in self.measured if not p.ok)

    @property
    def others_cores(self) -> float:
        """Busy cores not used by the exporter, the stand-ins or the driver: other processes."""
        own = (self.exporter_cpu + self.farm_cpu + self.driver_cpu) / self.window
        return max(0.0, self.machine["busy_cores"] - own)

    @property
    def fds_per_target(self) -> float:
        return (self.fds - self.fds_idle) / self.targets

    def targets_within(self, soft_limit: int = 1024) -> int:
        """Targets the exporter can hold open under a soft limit of open files (systemd's default
        soft LimitNOFILE is 1024), at the open files per target measured here; each open HTTP connection
        takes one more."""
        per = self.fds_per_target
        return int((soft_limit - self.fds_idle) / per) if per > 0 else 0


def measure(
    n_targets: int, interval: float = 15.0, rounds: int = 3, workers: int = 64, timeout: float = 10.0
) -> Fleet:
    """`timeout`: each target's query timeout and the scrape timeout the driver sends (Prometheus'
    header); the tests pass a patient one, so a loaded machine slows the table down but cannot empty it."""
    with Farm(SCENARIO, n_targets) as farm:
        targets = {f"t{i:03d}": target_yaml(port, query_timeout=timeout) for i, port in enumerate(farm.ports)}
        names = list(targets)
        with Exporter(targets, name=f"fleet-{n_targets}") as exporter:
            rss_idle = exporter.rss()
            fds_idle = exporter.process.num_fds()
            local = threading.local()
            clients: list[HttpClient] = []
            clients_lock = threading.Lock()

            def run(probe: Probe) -> None:
                client = getattr(local, "client", None)
                if client is None:
                    client = local.client = HttpClient(
                        exporter.port, timeout=timeout + 30, scrape_timeout=timeout
                    )
                    with clients_lock:
                        clients.append(client)
                probe.start = time.monotonic()
                try:
                    body = client.get(f"/probe?target={names[probe.target]}")
                    probe.ok = "mssql_up 1.0" in body
                    if not probe.ok:
                        probe.error = "mssql_up 0"
                except Exception as exc:  # a failed probe is a result, not a crash of the bench
                    probe.error = f"{type(exc).__name__}: {exc}"
                probe.end = time.monotonic()

            t0 = time.monotonic() + 1.0
            probes = sorted(
                (
                    Probe(i, k, t0 + k * interval + i * interval / n_targets)
                    for k in range(rounds + 1)
                    for i in range(n_targets)
                ),
                key=lambda p: p.due,
            )
            me = psutil.Process()
            load = MachineLoad()
            snap: dict[str, object] = {}
            warming: list[Future[None]] = []
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="driver") as pool:
                for probe in probes:
                    if probe.round == 1 and not snap:
                        # The measured window opens with the first probe of round 1, once every warm-up
                        # probe has ended: a late one (first logins on a loaded machine) would otherwise
                        # put its round trip and CPU into the window.
                        wait(warming)
                        _sleep_until(probe.due - 0.002)
                        load.start()
                        snap = {
                            "wall": time.monotonic(),
                            "exporter": exporter.cpu(),
                            "farm": cpu_seconds(farm.process),
                            "driver": cpu_seconds(me),
                            "stats": session_totals(farm.stats()),
                        }
                    _sleep_until(probe.due)
                    future = pool.submit(run, probe)
                    if probe.round == 0:
                        warming.append(future)
            machine = load.stop()
            window = time.monotonic() - float(snap["wall"])  # type: ignore[arg-type]
            exporter_cpu = exporter.cpu() - float(snap["exporter"])  # type: ignore[arg-type]
            farm_cpu = cpu_seconds(farm.process) - float(snap["farm"])  # type: ignore[arg-type]
            driver_cpu = cpu_seconds(me) - float(snap["driver"])  # type: ignore[arg-type]
            stats_end = session_totals(farm.stats())
            round_trips = stats_end[0] - snap["stats"][0]  # type: ignore[index]
            warmup = [p for p in probes if p.round == 0]
            window_opened = t0 + interval
            result = Fleet(
                targets=n_targets,
                interval=interval,
                rounds=rounds,
                workers=workers,
                measured=[p for p in probes if p.round > 0],
                warmup=warmup,
                window=window,
                exporter_cpu=exporter_cpu,
                farm_cpu=farm_cpu,
                driver_cpu=driver_cpu,
                machine=machine,
                round_trips=round_trips,
                rss_idle=rss_idle,
                rss_after=exporter.rss(),
                rss_peak=exporter.peak_rss(),
                threads=exporter.process.num_threads(),
                fds=exporter.process.num_fds(),
                fds_idle=fds_idle,
                warmup_late=sum(1 for p in warmup if p.end > window_opened),
            )
            for client in clients:
                client.close()
    errors = sorted({p.error for p in result.measured + result.warmup if p.error})
    if errors:
        print(f"fleet of {n_targets}: failed probes: {errors[:5]}")
    return result


def _sleep_until(when: float) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def table(results: list[Fleet]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "targets",
        "probes (failed)",
        "latency p50/p99/max",
        "driver lag p99",
        "exporter CPU/probe",
        "exporter cores",
        "exporter RSS idle/after/peak MB",
        "threads, fds (per target)",
        "round trips/probe",
        "stand-ins + driver cores",
        "machine busy (others) cores",
        "first probe p50/p99",
    ]
    rows = []
    for f in results:
        lat = f.latencies
        first = [p.end - p.start for p in f.warmup if p.ok]
        probes = len(f.measured)
        rows.append(
            [
                f.targets,
                f"{probes} ({f.failures})",
                f"{ms(statistics.median(lat), 1)} / {ms(pct(lat, 99), 1)} / {ms(max(lat), 1)} ms",
                f"{ms(pct(f.lateness, 99), 1)} ms",
                f"{ms(f.exporter_cpu / probes)} ms",
                f"{f.exporter_cpu / f.window:.3f}",
                f"{mb(f.rss_idle)} / {mb(f.rss_after)} / {mb(f.rss_peak)}",
                f"{f.threads}, {f.fds} ({f.fds_per_target:.1f})",
                f"{f.round_trips / probes:.2f}",
                f"{f.farm_cpu / f.window:.3f} + {f.driver_cpu / f.window:.3f}",
                f"{f.machine['busy_cores']:.2f} ({f.others_cores:.2f}) of {psutil.cpu_count()}",
                f"{ms(statistics.median(first), 1)} / {ms(pct(first, 99), 1)} ms",
            ]
        )
    return headers, rows


def summary(f: Fleet) -> dict[str, object]:
    lat = f.latencies
    first = [p.end - p.start for p in f.warmup if p.ok]
    probes = len(f.measured)
    return {
        "targets": f.targets,
        "interval_s": f.interval,
        "measured_rounds": f.rounds,
        "driver_workers": f.workers,
        "probes": probes,
        "failed": f.failures,
        # Why, per reason: a failure says what it was (a timeout, a refused login) in the results too.
        "errors": dict(Counter(p.error for p in f.measured if not p.ok)),
        "latency_ms": {
            "p50": statistics.median(lat) * 1000,
            "p99": pct(lat, 99) * 1000,
            "max": max(lat) * 1000,
        },
        "driver_lag_ms_p99": pct(f.lateness, 99) * 1000,
        "window_s": f.window,
        "exporter_cpu_ms_per_probe": f.exporter_cpu / probes * 1000,
        "exporter_cores": f.exporter_cpu / f.window,
        "standin_farm_cores": f.farm_cpu / f.window,
        "driver_cores": f.driver_cpu / f.window,
        "machine_busy_percent": f.machine["busy_percent"],
        "round_trips_per_probe": f.round_trips / probes,
        "rss_idle_mb": f.rss_idle / 1e6,
        "rss_after_mb": f.rss_after / 1e6,
        "rss_peak_mb": f.rss_peak / 1e6,
        "exporter_threads": f.threads,
        "exporter_fds": f.fds,
        "exporter_fds_idle": f.fds_idle,
        "exporter_fds_per_target": f.fds_per_target,
        "targets_within_1024_open_files": f.targets_within(1024),
        "other_processes_cores": f.others_cores,
        "first_probe_ms": {"p50": statistics.median(first) * 1000, "p99": pct(first, 99) * 1000},
        "warmup_probes_running_into_window": f.warmup_late,
    }
