"""(e) Start-up with a large fleet: seconds to listening, bytes written to disk, peak RSS.

Each row starts a fresh exporter process with N targets and polls its port until it accepts a TCP
connection. The targets are FreeTDS targets that check the server certificate (`encryption: require`),
so each one has a section in the exporter's private freetds.conf, the part of start-up that grew with
the square of the fleet before issue 14 (the file was rewritten once per target). Nothing is contacted
during start-up: the exporter logs in at a target's first probe, so the hosts need not exist.

At the moment the port accepts, the bench reads the process's `/proc/PID/io` (`write_bytes`: bytes it
caused to be written to storage; `wchar`: bytes it passed to write(), logs on stderr included) and its
peak RSS (`VmHWM`). Then it sends SIGTERM and records the exit status and what the process left in the
TMPDIR it was given (its private FreeTDS directory, which must be gone). A start-up that has not
listened within the time limit is stopped the same way and reported as such, with what it had written
by then.

    PYTHONPATH=. .venv/bin/python -m bench.startup                      # 1,000 / 10,000 / 50,000
    PYTHONPATH=. .venv/bin/python -m bench.startup --ref main --timeout 60   # and a git revision's
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from bench.common import BUILD, ROOT, free_port, peak_rss, print_table

SIZES = (1000, 10_000, 50_000)
QUICK_SIZES = (100, 1000)
TIMEOUT = 300.0
STOP_TIMEOUT = 20.0  # after SIGTERM; the exporter stops within a second
PASSWORD_ENV = "MSSQL_EXPORTER_BENCH_PASSWORD"  # any value: nothing logs in during start-up


@dataclass
class StartUp:
    targets: int
    version: str
    listened: bool
    seconds: float  # to listening, or until the bench gave up
    write_bytes: int
    wchar: int
    rss_peak: float
    exit_status: int | None  # after SIGTERM; None if it had to be killed
    left_behind: list[str]
    config_bytes: int

    @property
    def write_bytes_per_target(self) -> float:
        return self.write_bytes / self.targets


def fleet_config(targets: int) -> Path:
    """The config of `targets` certificate-checking FreeTDS targets, written once per size."""
    path = BUILD / f"bench-startup-{targets}.yml"
    if not path.exists():
        BUILD.mkdir(exist_ok=True)
        body = {
            "auth_modules": {"m": {"username": "exporter", "password_env": PASSWORD_ENV}},
            "targets": {
                f"sql-{i:06d}": {
                    "host": f"sql-{i:06d}.example.net",
                    "driver": "freetds",
                    "encryption": "require",
                    "auth_module": "m",
                }
                for i in range(targets)
            },
        }
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(body))
        tmp.replace(path)
    return path


def _io(pid: int) -> dict[str, int]:
    lines = Path(f"/proc/{pid}/io").read_text().splitlines()
    return {key: int(value) for key, value in (line.split(": ") for line in lines)}


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def measure(
    targets: int, code: Path = ROOT, version: str = "this checkout", timeout: float = TIMEOUT
) -> StartUp:
    config = fleet_config(targets)
    tmpdir = BUILD / f"bench-startup-tmp-{targets}"
    shutil.rmtree(tmpdir, ignore_errors=True)
    tmpdir.mkdir(parents=True)
    port = free_port()
    env = {
        **os.environ,
        PASSWORD_ENV: "not-used",
        "TMPDIR": str(tmpdir),
        "PYTHONPATH": os.pathsep.join([str(code / "exporter"), str(ROOT)]),
        "PYTHONDONTWRITEBYTECODE": "1",  # .pyc files would count as the exporter's writes
    }
    command = [sys.executable, "-m", "mssql_memory_exporter", "--config.file", str(config)]
    started = time.monotonic()
    proc = subprocess.Popen(
        [*command, "--web.listen-address", f"127.0.0.1:{port}"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # info lines, one per target; they go to a pipe, not to disk
    )
    listened = False
    try:
        while time.monotonic() - started < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"the exporter ({version}) exited during start-up: rc={proc.returncode}")
            if _accepts(port):
                listened = True
                break
            time.sleep(0.05)
        seconds = time.monotonic() - started
        io = _io(proc.pid)
        rss = peak_rss(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            exit_status: int | None = proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            exit_status = None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    left = sorted(p.name for p in tmpdir.iterdir())
    shutil.rmtree(tmpdir, ignore_errors=True)  # what an old version left behind is reported, not kept
    return StartUp(
        targets=targets,
        version=version,
        listened=listened,
        seconds=seconds,
        write_bytes=io["write_bytes"],
        wchar=io["wchar"],
        rss_peak=rss,
        exit_status=exit_status,
        left_behind=left,
        config_bytes=config.stat().st_size,
    )


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def _exit(status: int | None) -> str:
    if status is None:
        return f"hung, SIGKILL after {STOP_TIMEOUT:g} s"
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return str(status)


def table(results: list[StartUp], timeout: float) -> tuple[list[str], list[list[object]]]:
    headers = [
        "version",
        "targets",
        "seconds to listening",
        "written to disk",
        "per target",
        "write() calls' bytes",
        "peak RSS MB",
        "after SIGTERM: exit",
        "left in TMPDIR",
    ]
    rows = []
    for r in results:
        rows.append(
            [
                r.version,
                f"{r.targets:,}",
                f"{r.seconds:.1f}" if r.listened else f"did not start within {timeout:g} s",
                _bytes(r.write_bytes),
                _bytes(r.write_bytes_per_target),
                _bytes(r.wchar),
                f"{r.rss_peak / 1e6:.1f}",
                _exit(r.exit_status),
                ", ".join(r.left_behind) or "nothing",
            ]
        )
    return headers, rows


TITLE = "(e) Start-up with N targets: a fresh exporter process per row"
NOTES = (
    "    N FreeTDS targets with encryption: require (one freetds.conf section each); nothing is contacted.\n"
    "    seconds: process start to the port accepting. written to disk: /proc/PID/io write_bytes at that\n"
    "    moment (whole pages; includes files written and removed again). write() calls' bytes: wchar,\n"
    "    stderr log lines included. Then SIGTERM: the exit status and what is left in the TMPDIR given to\n"
    "    the process (the private FreeTDS directory must be gone). A row that did not start was stopped\n"
    "    at the time limit with SIGTERM, its figures are what it had done by then."
)


def summary(r: StartUp) -> dict[str, object]:
    return {
        "version": r.version,
        "targets": r.targets,
        "listened": r.listened,
        "seconds": r.seconds,
        "write_bytes": r.write_bytes,
        "wchar": r.wchar,
        "rss_peak_bytes": r.rss_peak,
        "exit_status": r.exit_status,
        "left_behind": r.left_behind,
        "config_bytes": r.config_bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, action="append", help="fleet sizes (default 1k, 10k, 50k)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds a start-up may take")
    parser.add_argument("--ref", help="also measure the exporter of this git revision (bench/compare.py)")
    args = parser.parse_args(argv)
    sizes = args.targets or list(SIZES)
    results = [measure(n, timeout=args.timeout) for n in sizes]
    if args.ref:
        from bench.compare import remove_worktree, worktree

        path = worktree(args.ref)
        try:
            results += [measure(n, code=path, version=args.ref, timeout=args.timeout) for n in sizes]
        finally:
            remove_worktree(path)
    headers, rows = table(results, args.timeout)
    print_table(TITLE, headers, rows, NOTES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
