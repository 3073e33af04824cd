"""(j) Scale-out: the same fleet served by 1, 2 and 4 exporter processes, each a hashmod shard.

    PYTHONPATH=. .venv/bin/python -m bench.scale_out --targets 2000 --processes 1 --processes 2 --processes 4

N stand-ins (healthy-oltp) run in one helper process (bench/standin_farm.py). P exporter processes each
load the same config (every target listed); target i is probed only by the process its name hashes to,
as Prometheus' `hashmod` relabelling shards targets (the md5 of the target name, its low 64 bits modulo
P: docs/scaling.md). Every target is probed once per interval, staggered evenly across it; round 0 is
the warm-up (logins, the first refresh scrape), the rounds after it are measured.

The figure that carries over to other machines is the exporters' CPU per probe and, from it, the cores
1,000 targets take at a 15 s interval (CPU per probe x 1,000 / 15). This machine has 2 cores, and the
stand-ins build their answers in Python (about 10 times the exporter's CPU per probe): at 15 s they
could not answer 2,000 targets, so the fleet runs at a longer interval (`--interval`, default 90 s)
and the 15 s figure is computed. The latency columns are therefore the stand-ins' as much as the
exporters'.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bench.common import (
    Exporter,
    Farm,
    HttpClient,
    MachineLoad,
    mb,
    ms,
    pct,
    print_table,
    raise_fd_limit,
    target_yaml,
)

SCENARIO = "healthy-oltp"
REFERENCE_INTERVAL = 15.0


def shard(name: str, processes: int) -> int:
    """Prometheus' hashmod: the md5 of the source labels' value, its last 8 bytes as an unsigned
    big-endian integer, modulo the shard count (relabel.go's HashMod)."""
    digest = hashlib.md5(name.encode()).digest()  # what Prometheus uses; not for security
    return int.from_bytes(digest[8:], "big") % processes


@dataclass
class Run:
    targets: int
    processes: int
    interval: float
    probes: int = 0
    failed: int = 0
    window: float = 0.0
    cpu: list[float] = field(default_factory=list)  # per process, over the measured window
    shard_sizes: list[int] = field(default_factory=list)  # targets per process
    rss_peak: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    machine: dict[str, float] = field(default_factory=dict)

    @property
    def cpu_per_probe(self) -> float:
        return sum(self.cpu) / self.probes if self.probes else float("nan")

    @property
    def cores_per_1000_at_15s(self) -> float:
        return self.cpu_per_probe * 1000 / REFERENCE_INTERVAL


def measure(farm: Farm, processes: int, interval: float, rounds: int, workers: int = 64) -> Run:
    names = [f"t{i:04d}" for i in range(len(farm.ports))]
    ports = farm.ports
    targets = {name: target_yaml(port, query_timeout=30) for name, port in zip(names, ports, strict=True)}
    owner = [shard(name, processes) for name in names]
    run = Run(len(names), processes, interval)
    exporters = [Exporter(targets, name=f"scale-{processes}-{k}") for k in range(processes)]
    try:
        local = threading.local()
        clients: list[HttpClient] = []
        lock = threading.Lock()
        results: list[tuple[int, float, bool]] = []  # (round, latency, ok)

        def probe(i: int, k: int) -> None:
            mine = getattr(local, "clients", None)
            if mine is None:
                mine = local.clients = [e.client() for e in exporters]
                with lock:
                    clients.extend(mine)
            t0 = time.monotonic()
            try:
                ok = "mssql_up 1.0" in mine[owner[i]].get(f"/probe?target={names[i]}")
            except Exception:  # a failed probe is a result, not a crash of the bench
                ok = False
            with lock:
                results.append((k, time.monotonic() - t0, ok))

        t0 = time.monotonic() + 1.0
        n = len(names)
        schedule = sorted(
            (t0 + k * interval + i * interval / n, i, k) for k in range(rounds + 1) for i in range(n)
        )
        load = MachineLoad()
        cpu0: list[float] = []
        opened = 0.0
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="driver") as pool:
            for due, i, k in schedule:
                if k == 1 and not cpu0:
                    _sleep_until(due)
                    load.start()
                    opened = time.monotonic()
                    cpu0 = [e.cpu() for e in exporters]
                _sleep_until(due)
                pool.submit(probe, i, k)
        run.machine = load.stop()
        run.window = time.monotonic() - opened
        run.cpu = [e.cpu() - c for e, c in zip(exporters, cpu0, strict=True)]
        run.rss_peak = [e.peak_rss() for e in exporters]
        measured = [(lat, ok) for k, lat, ok in results if k > 0]
        run.probes = len(measured)
        run.failed = sum(1 for _, ok in measured if not ok)
        run.latencies = [lat for lat, ok in measured if ok]
        run.shard_sizes = [owner.count(p) for p in range(processes)]
        for client in clients:
            client.close()
    finally:
        for exporter in exporters:
            exporter.close()
    return run


def _sleep_until(when: float) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def table(runs: list[Run]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "processes",
        "targets per process",
        "probes (failed)",
        "exporter CPU/probe",
        "exporter cores (sum; busiest process)",
        "cores per 1,000 targets at 15 s",
        "latency p50 / p99",
        "peak RSS per process MB",
        "machine busy cores",
    ]
    rows = []
    for r in runs:
        lat = r.latencies or [float("nan")]
        busiest = max(c / r.window for c in r.cpu)
        rows.append(
            [
                r.processes,
                " / ".join(str(n) for n in r.shard_sizes),
                f"{r.probes} ({r.failed})",
                f"{r.cpu_per_probe * 1000:.2f} ms",
                f"{sum(r.cpu) / r.window:.3f}; {busiest:.3f}",
                f"{r.cores_per_1000_at_15s:.3f}",
                f"{ms(statistics.median(lat), 1)} / {ms(pct(lat, 99), 1)} ms",
                " / ".join(mb(x) for x in r.rss_peak),
                f"{r.machine['busy_cores']:.2f} of 2",
            ]
        )
    return headers, rows


def summary(r: Run) -> dict[str, object]:
    lat = r.latencies or [float("nan")]
    return {
        "targets": r.targets,
        "processes": r.processes,
        "interval_s": r.interval,
        "targets_per_process": r.shard_sizes,
        "probes": r.probes,
        "failed": r.failed,
        "window_s": r.window,
        "exporter_cpu_ms_per_probe": r.cpu_per_probe * 1000,
        "exporter_cores_per_process": [c / r.window for c in r.cpu],
        "cores_per_1000_targets_at_15s": r.cores_per_1000_at_15s,
        "latency_ms": {"p50": statistics.median(lat) * 1000, "p99": pct(lat, 99) * 1000},
        "rss_peak_mb": [x / 1e6 for x in r.rss_peak],
        "machine_busy_cores": r.machine.get("busy_cores"),
    }


def run_all(targets: int, processes: list[int], interval: float, rounds: int) -> list[Run]:
    raise_fd_limit()
    with Farm(SCENARIO, targets) as farm:
        return [measure(farm, p, interval, rounds) for p in processes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_out", description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--processes", type=int, action="append", help="exporter processes; default 1, 2, 4")
    parser.add_argument("--interval", type=float, default=90.0, help="seconds between probes of a target")
    parser.add_argument("--rounds", type=int, default=1, help="measured rounds after the warm-up round")
    args = parser.parse_args(argv)
    runs = run_all(args.targets, args.processes or [1, 2, 4], args.interval, args.rounds)
    headers, rows = table(runs)
    print_table(
        f"(j) {args.targets} targets over {', '.join(str(r.processes) for r in runs)} exporter processes"
        f" (hashmod shards), a probe per target every {args.interval:.0f} s; cores at 15 s from CPU/probe",
        headers,
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
