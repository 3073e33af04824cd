"""Backfilling tests/capacity_history.py's year into TSDB blocks with the real promtool, and running the
real `mssql-capacity-report` console script against an endpoint; the expected rows worked out by hand."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.capacity_history import DAY, GIB, HOUR, PLANNED, History

# Long blocks (promtool cuts them at about 20 days within this limit): few blocks for a year, each long
# enough for the compactor to downsample (raw blocks longer than 40 h to 5 m, 5 m blocks longer than
# 10 days to 1 h), as the blocks of a compacted bucket are.
BLOCK_DURATION = "744h"


def backfill(promtool: str, history: History, shard: str, out: Path) -> Path:
    source = out.parent / f"history-{shard}.om"
    source.write_text(history.openmetrics(shard))
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", f"--max-block-duration={BLOCK_DURATION}",
         str(source), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, f"promtool backfill failed:\n{result.stdout}\n{result.stderr}"
    return out


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str

    def rows(self) -> list[dict[str, str]]:
        return list(csv.DictReader(io.StringIO(self.stdout)))


def report(url: str, *args: str, timeout: float = 240) -> Completed:
    """The console script as installed (.venv/bin/mssql-capacity-report)."""
    script = Path(sys.executable).parent / "mssql-capacity-report"
    result = subprocess.run([str(script), "--prometheus", url, *args], capture_output=True, text=True,
                            timeout=timeout, check=False)
    return Completed(result.returncode, result.stdout, result.stderr)


def expected_rows(history: History, stamp_delay: float = 0) -> list[dict[str, object]]:
    """The rows by hand. L is the last sample, R = L + 30 min the report's end; the grid steps hourly
    back from R. A period starts half an hour after the first sample (the first grid step whose window
    holds data); a memory change at C is flagged at C + 30 min (the first two-hour window with both
    sizes) and takes (C - 1.5 h, C + 30 min] out of both periods; each period's rate is its slope.

    `stamp_delay`: Thanos stamps each downsampled aggregate at the end of its window, so on 1 h data a
    series' first sample and each memory change show an hour late, and every break of the periods moves
    an hour later."""
    last, end = history.last_sample, history.report_end
    first = last - 364 * DAY + stamp_delay
    change_a, change_c = last - 182 * DAY + stamp_delay, last - 100 * DAY + stamp_delay
    # The newest block is too short for 1 h data: its 5 m aggregates, 5 minutes late, stay on the grid.
    change_d = last - 2 * HOUR
    first_d = last - 30 * DAY + stamp_delay

    def row(instance: str, pool: str, start: float, stop: float, memory: float, rate: float | None,
            rated: float | None, note: str = "") -> dict[str, object]:
        projected = None if rate is None else rate * PLANNED
        return {
            "instance": instance, "pool": pool, "from": start, "to": stop, "memory": memory,
            "rate": rate, "projected": projected, "rated": rated,
            "share": None if projected is None or rated is None else projected / rated, "note": note,
        }

    return [
        row("sql-a", "tempdb", first + 1800, change_a - 5400, 256 * GIB, 50e6, 28e15),
        row("sql-a", "tempdb", change_a + 1800, end, 512 * GIB, 80e6, 28e15),
        row("sql-b", "data", first + 1800, end, 128 * GIB, 10e6, 7.008e15),
        row("sql-b", "scratch", first + 1800, end, 128 * GIB, 1e6, None, "pool has no rating"),
        row("sql-c", "tempdb", first + 1800, change_c - 5400, 64 * GIB, 20e6, 7.008e15),
        row("sql-c", "tempdb", change_c + 1800, end, 96 * GIB, 30e6, 7.008e15),
        row("sql-d", "tempdb", first_d + 1800, change_d - 5400, 32 * GIB, 5e6, 3.5e15),
        row("sql-d", "tempdb", change_d + 1800, end, 24 * GIB, None, None, "shorter than the 5h"),
    ]
