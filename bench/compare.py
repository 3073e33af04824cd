"""Before and after in one run: the exporter of this checkout against the one of a git revision.

    PYTHONPATH=. .venv/bin/python -m bench.compare --ref 72c5cc2

On a shared two-core machine the same benchmark can read 50% slower from one hour to the next, so a
change is judged by both versions measured side by side: one stand-in, one exporter process per
version, each probed over its own keep-alive connection in alternating rounds (the order flips every
round), so a noisy minute hits both. Per round and version: the exporter process's CPU time per probe
and the median probe latency. The table gives the median over rounds and the ratio this/ref; the
revision's code is checked out into build/ (a detached git worktree) and removed afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import BUILD, ROOT, Exporter, Farm, MachineLoad, load_note, print_table, target_yaml

PROBE = "/probe?target=bench"


@dataclass
class Side:
    label: str
    code: Path
    cpu_ms: list[float] = field(default_factory=list)  # per round: exporter CPU per probe
    latency_ms: list[float] = field(default_factory=list)  # per round: median probe latency
    # Collectors this side's target turns off: a checkout that gained collectors is compared doing the
    # reference's work (the reference may predate the option, so it is only ever set on this checkout).
    exclude: tuple[str, ...] = ()
    # Collector files this side switches on (`collector_files`, shipped:NAME or a path): with --ref HEAD,
    # what a custom collector costs per probe, the same code measured with and without it.
    collector_files: tuple[str, ...] = ()


def worktree(ref: str) -> Path:
    """The revision checked out beside this one; the caller removes it."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if commit.returncode != 0:
        raise SystemExit(f"error: {ref!r} is not a commit of this repository")
    path = BUILD / f"compare-{commit.stdout.strip()[:12]}"
    remove_worktree(path)
    BUILD.mkdir(exist_ok=True)
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), commit.stdout.strip()],
        cwd=ROOT,
        check=True,
    )
    return path


def remove_worktree(path: Path) -> None:
    if path.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False)
    subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=False)


def measure(sides: list[Side], scenario: str, rounds: int, probes: int, warmup: int) -> dict[str, float]:
    load = MachineLoad()
    with Farm(scenario) as farm:
        exporters = [
            Exporter(
                {"bench": side_target(farm.ports[0], side)},
                name=f"compare-{i}",
                code=side.code,
                settings={"collector_files": list(side.collector_files)} if side.collector_files else None,
            )
            for i, side in enumerate(sides)
        ]
        try:
            clients = [exporter.client() for exporter in exporters]
            for client in clients:
                for _ in range(warmup):
                    body = client.get(PROBE)
                if "mssql_up 1.0" not in body:
                    raise RuntimeError("a warm-up probe failed")
            load.start()
            for r in range(rounds):
                order = range(len(sides)) if r % 2 == 0 else reversed(range(len(sides)))
                for i in order:
                    cpu0 = exporters[i].cpu()
                    latencies = []
                    for _ in range(probes):
                        t0 = time.perf_counter()
                        clients[i].get(PROBE)
                        latencies.append(time.perf_counter() - t0)
                    sides[i].cpu_ms.append((exporters[i].cpu() - cpu0) / probes * 1000)
                    sides[i].latency_ms.append(statistics.median(latencies) * 1000)
            for client in clients:
                client.close()
        finally:
            for exporter in exporters:
                exporter.close()
    return load.stop()


def side_target(port: int, side: Side) -> dict[str, object]:
    target = target_yaml(port)
    if side.exclude:
        target["collectors"] = {"exclude": list(side.exclude)}
    return target


def ratio(this: float, ref: float) -> str:
    """this / ref, or why there is none: the process CPU clock counts whole ticks (10 ms), so a short run
    (a handful of probes, as the test of this script makes) can measure 0 ms for the reference."""
    if ref <= 0:
        return "n/a (ref measured 0: run more --probes)"
    return f"{this / ref:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n")[0])
    parser.add_argument("--ref", required=True, help="git revision to compare this checkout against")
    parser.add_argument("--scenario", default="healthy-oltp")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--probes", type=int, default=200, help="probes per round and version")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="COLLECTOR",
        help="a collector this checkout turns off (repeatable), to compare like for like with an older ref",
    )
    parser.add_argument(
        "--collector-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a collector file this checkout switches on (repeatable; shipped:blocking or a path): with "
        "--ref HEAD, what a custom collector costs per probe",
    )
    args = parser.parse_args(argv)
    path = worktree(args.ref)
    try:
        label = "this checkout" + (f" without {', '.join(args.exclude)}" if args.exclude else "")
        label += f" with {', '.join(args.collector_file)}" if args.collector_file else ""
        this = Side(label, ROOT, exclude=tuple(args.exclude), collector_files=tuple(args.collector_file))
        sides = [this, Side(args.ref, path)]
        machine = measure(sides, args.scenario, args.rounds, args.probes, args.warmup)
    finally:
        remove_worktree(path)
    this, ref = sides
    rows = []
    for side in sides:
        cpu = statistics.median(side.cpu_ms)
        lat = statistics.median(side.latency_ms)
        rows.append(
            [
                side.label,
                f"{cpu:.2f} ({min(side.cpu_ms):.2f}-{max(side.cpu_ms):.2f})",
                f"{lat:.2f} ({min(side.latency_ms):.2f}-{max(side.latency_ms):.2f})",
            ]
        )
    rows.append(
        [
            "this / ref",
            ratio(statistics.median(this.cpu_ms), statistics.median(ref.cpu_ms)),
            ratio(statistics.median(this.latency_ms), statistics.median(ref.latency_ms)),
        ]
    )
    print_table(
        f"Exporter per probe, {args.scenario}, keep-alive HTTP: {args.rounds} alternating rounds of"
        f" {args.probes} probes per version (median over rounds, range in brackets)",
        ["version", "exporter CPU ms/probe", "probe latency p50 ms"],
        rows,
        load_note(machine),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
