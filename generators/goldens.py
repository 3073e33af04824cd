"""The golden expositions (tests/golden/*.prom): what every collector exports for each of four stand-in
scenarios at a fixed scenario time, read through the stand-in's interpreter in process (tests/offline.py:
no socket, no driver). tests/test_collectors.py fails while one is stale.

    python -m generators.goldens [--check]     # `make generate` runs it; review `git diff tests/golden`

A change here is a change of what Prometheus receives: read the diff before committing it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from generators.generated_section import generator_main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
SCENARIOS = ("healthy-oltp", "memory-pressure", "named-instance-padded", "numa-4-nodes")
# The start time follows the wall clock at which the scenario runs; everything else is exact.
WALL_CLOCK = "mssql_start_time_seconds "


def exposition(scenario: str) -> str:
    """One scenario's exposition as its golden file holds it."""
    from tests.offline import collect, results_for  # the stand-in: the test extras, not the runtime

    text = collect(results_for(scenario))
    return "\n".join(line for line in text.splitlines() if not line.startswith(WALL_CLOCK)) + "\n"


def render() -> dict[str, str]:
    return {f"{scenario}.prom": exposition(scenario) for scenario in SCENARIOS}


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main("python -m generators.goldens", __doc__, GOLDEN, lambda _: render(), argv)


if __name__ == "__main__":
    sys.exit(main())
