"""Where a probe's CPU goes: py-spy samples the exporter process over a few thousand probes.

    PYTHONPATH=. .venv/bin/python -m bench.profile --probes 3000 [--scenario healthy-oltp] [--gzip]

One stand-in, one exporter process (as users run it), probed over one keep-alive connection while
py-spy (a sampling profiler: it reads the process from outside, so the probes run at full speed) records
the stack of the thread holding the GIL 250 times a second (`--all-threads`: every running thread). Each
sample is put in the first stage its stack reaches, in
the order below (deepest first: a label escaped while a collector runs counts as the collector's), and
the table gives each stage's share of the samples in which the process was running Python or the
driver, not waiting. `--raw FILE` keeps py-spy's collapsed stacks for a flame graph
(`py-spy` itself, or any collapsed-stack viewer).

py-spy is a test/bench extra (pyproject.toml); without it the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, Exporter, Farm, MachineLoad, load_note, print_table, target_yaml

# (stage, what in a frame "function (path:line)" marks it), most specific first.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("logging", ("logging/__init__.py", "repeat_log.py", "logsetup.py")),
    ("gzip", ("gzip.py", "zlib")),
    ("exposition (text format)", ("metrics/exposition.py",)),
    ("family building (emit, merge)", ("metrics/families.py", "FamilyBuilder", "collectors/base.py")),
    ("collectors (row parsing, arithmetic)", ("/collectors/", "/host/")),
    ("routing result sets to sections", ("connection/batch.py",)),
    ("driver: round trip, fetching, decoding rows", ("connection/session.py", "connection/workers.py")),
    ("plan, collector selection, batch lookup", ("scrape/selection.py", "_batch_for", "enabled_for")),
    ("scraper's own loop", ("scrape/scraper.py", "scrape/platform.py")),
    ("HTTP (parsing, routing, sending)", ("/web/", "socketserver.py", "http/server.py", "h11")),
)


def stage_of(stack: str) -> str:
    frames = stack.split(";")
    for stage, marks in STAGES:
        if any(mark in frame for frame in frames for mark in marks):
            return stage
    return "other (interpreter, threads, start-up)"


def summarise(raw: Path) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """Samples per stage, per leaf function, and in all (idle samples are left out by py-spy)."""
    stages: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        stages[stage_of(stack)] += n
        leaves[stack.split(";")[-1]] += n
    return stages, leaves, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="healthy-oltp")
    parser.add_argument("--probes", type=int, default=3000)
    parser.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    parser.add_argument("--collect", action="append", default=[], help="narrow the probe (collect[])")
    parser.add_argument(
        "--all-threads",
        action="store_true",
        help="sample every running thread, not only the one holding the GIL (counts C work that released it,"
        " such as the driver's socket reads, but also threads a loaded machine has not yet scheduled)",
    )
    parser.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--top", type=int, default=15, help="leaf functions to list")
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(ROOT / ".venv" / "bin" / "py-spy")
    if not Path(spy).exists():
        print("error: py-spy is not installed (pip install the project's test extra)", file=sys.stderr)
        return 2
    path = "/probe?target=bench" + "".join(f"&collect[]={c}" for c in args.collect)
    raw = args.raw or Path(tempfile.mkstemp(suffix=".collapsed")[1])
    load = MachineLoad()
    with Farm(args.scenario) as farm, Exporter({"bench": target_yaml(farm.ports[0])}, name="profile") as exp:
        client = exp.client()
        for _ in range(50):
            client.get(path)
        spy_proc = subprocess.Popen(
            [spy, "record", "--pid", str(exp.pid), "--format", "raw", "--rate", str(args.rate),
             "--nonblocking", "--output", str(raw), *([] if args.all_threads else ["--gil"])],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # py-spy attaches
        load.start()
        cpu0 = exp.cpu()
        t0 = time.perf_counter()
        for _ in range(args.probes):
            client.get(path)
        wall = time.perf_counter() - t0
        cpu = exp.cpu() - cpu0
        machine = load.stop()
        spy_proc.send_signal(2)  # SIGINT: py-spy writes its output and exits
        _, err = spy_proc.communicate(timeout=60)
        client.close()
    if not raw.exists() or raw.stat().st_size == 0:
        print(f"error: py-spy recorded nothing: {err.strip()}", file=sys.stderr)
        return 1
    stages, leaves, total = summarise(raw)
    per_probe = cpu / args.probes * 1000
    rows = [
        [stage, f"{100 * n / total:.1f}%", f"{per_probe * n / total:.3f}"]
        for stage, n in stages.most_common()
    ]
    print_table(
        f"Where the exporter's CPU goes: {args.scenario}, {args.probes} probes, {total} samples"
        f" ({per_probe:.2f} ms of CPU per probe, {wall / args.probes * 1000:.2f} ms per probe)",
        ["stage", "share of samples", "ms per probe"],
        rows,
        load_note(machine),
    )
    print_table(
        "Leaf functions (where the sample was taken)",
        ["function", "share"],
        [[leaf, f"{100 * n / total:.1f}%"] for leaf, n in leaves.most_common(args.top)],
    )
    if args.raw is None:
        raw.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
