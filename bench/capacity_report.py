"""(i) The capacity report over a year of a fleet, through Thanos Query: 1 h data against raw.

A year of N targets (default 500) at one sample an hour (memory, target memory, one pool counter; rating
and planned life daily), memory raised half-way through the year on every target: backfilled with
promtool, uploaded to a filesystem bucket, downsampled by one compactor pass (raw kept, so both can be
read), served by a store gateway behind Thanos Query. `mssql-capacity-report` then runs twice, with
`--resolution 1h` (max_source_resolution=1h: the 1 h blocks) and `--resolution raw` (the raw blocks
only): wall seconds, and the bytes of series data the store gateway fetched from the bucket
(thanos_bucket_store_series_data_size_fetched_bytes, summed over data types), per run.

    PYTHONPATH=. .venv/bin/python -m bench.capacity_report [--targets 500]

Needs Thanos from scripts/thanos.sh (the test bootstrap builds it) and Debian's promtool.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests import tools
from tests.capacity_backfill import BLOCK_DURATION, report
from tests.capacity_history import GIB, HOUR, History, Instance, Pool
from tests.e2e_stack import Stack, free_port

FETCHED = re.compile(r"^thanos_bucket_store_series_data_size_fetched_bytes_sum\{[^}]*\} (\S+)$", re.M)


def fleet_history(targets: int, last: int) -> History:
    return History(
        last,
        [
            Instance(
                f"sql-{i:04d}",
                "0",
                [(365 * 24, 256 * GIB), (182 * 24, 512 * GIB)],
                [Pool("tempdb", 28e15, {256 * GIB: 50e6 + i, 512 * GIB: 80e6 + i})],
            )
            for i in range(targets)
        ],
        constants_every_hours=24,
    )


def fetched_bytes(store_http: str) -> float:
    with urllib.request.urlopen(f"{store_http}/metrics", timeout=30) as response:
        text = response.read().decode()
    return sum(float(v) for v in FETCHED.findall(text))


def run(targets: int, workdir: Path) -> dict[str, object]:
    thanos = tools.THANOS.path
    last = (int(time.time()) // HOUR - 3) * HOUR
    history = fleet_history(targets, last)
    source = workdir / "history.om"
    started = time.monotonic()
    history.write_openmetrics("0", source)
    generated = time.monotonic() - started
    blocks, bucket = workdir / "blocks", workdir / "bucket"
    bucket.mkdir()
    objstore = workdir / "bucket.yml"
    objstore.write_text(f"type: FILESYSTEM\nconfig:\n  directory: {bucket}\n")
    started = time.monotonic()
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    f"--max-block-duration={BLOCK_DURATION}", str(source), str(blocks)],
                   check=True, capture_output=True, timeout=3600)
    source.unlink()
    backfilled = time.monotonic() - started
    subprocess.run([thanos, "tools", "bucket", "upload-blocks", f"--path={blocks}", '--label=shard="0"',
                    "--shipper.upload-compacted", f"--objstore.config-file={objstore}"],
                   check=True, capture_output=True, timeout=3600)
    started = time.monotonic()
    subprocess.run([thanos, "compact", f"--data-dir={workdir / 'compact'}",
                    f"--objstore.config-file={objstore}", "--consistency-delay=0s",
                    "--http-address=127.0.0.1:0"],
                   check=True, capture_output=True, timeout=3600)
    compacted = time.monotonic() - started
    results: dict[str, object] = {"targets": targets, "generate_s": generated, "backfill_s": backfilled,
                                  "compact_s": compacted}
    with Stack(workdir / "stack") as stack:
        grpc, http = free_port(), free_port()
        store_http = f"http://127.0.0.1:{http}"
        stack.start_process("store", [
            thanos, "store", f"--data-dir={workdir / 'store'}", f"--objstore.config-file={objstore}",
            f"--grpc-address=127.0.0.1:{grpc}", f"--http-address=127.0.0.1:{http}"],
            f"{store_http}/-/ready", timeout=600)
        query_port = free_port()
        query = f"http://127.0.0.1:{query_port}"
        stack.start_process("query", [
            thanos, "query", f"--http-address=127.0.0.1:{query_port}",
            f"--grpc-address=127.0.0.1:{free_port()}", f"--endpoint=127.0.0.1:{grpc}"],
            f"{query}/-/ready", timeout=120)
        for resolution in ("1h", "raw"):
            before = fetched_bytes(store_http)
            started = time.monotonic()
            result = report(query, "--end", str(history.report_end), "--format", "csv",
                            "--resolution", resolution, "--timeout", "600", timeout=3600)
            seconds = time.monotonic() - started
            rows = result.rows()
            results[resolution] = {
                "seconds": seconds,
                "fetched_bytes": fetched_bytes(store_http) - before,
                "rows": len(rows),
                "rows_with_share": sum(1 for r in rows if r["share"]),
                "exit": result.returncode,
            }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=500)
    args = parser.parse_args(argv)
    if not Path(tools.THANOS.path).exists():
        print(f"capacity report bench skipped: no Thanos at {tools.THANOS.path} (bash scripts/thanos.sh)")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp:
        results = run(args.targets, Path(tmp))
    hour, raw = results["1h"], results["raw"]
    print(f"(i) capacity report, {args.targets} targets, one year, through Thanos Query")
    print("| data | seconds | series bytes fetched | rows (with share) |")
    print("|---|---:|---:|---:|")
    for name, r in (("1 h", hour), ("raw", raw)):
        fetched = r["fetched_bytes"] / 1e6
        print(f"| {name} | {r['seconds']:.1f} | {fetched:.1f} MB | {r['rows']} ({r['rows_with_share']}) |")
    print(f"raw / 1 h: {raw['seconds'] / hour['seconds']:.2f}x the time, "
          f"{raw['fetched_bytes'] / max(hour['fetched_bytes'], 1):.2f}x the bytes")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
