"""Shared figures of the file and volume tests: the stand-in's tempdb and data volumes, and series sums."""

from __future__ import annotations

import re

TEMPDB_VOLUME = "/var/opt/mssql/tempdb"
DATA_VOLUME = "/var/opt/mssql/data"
MB = 1_000_000
# A per-directory volume lookup (the batch's tempdb_volumes section applies the function to tempdb's files
# by column, every scrape, and is not one).
LOOKUP = re.compile(r"dm_os_volume_stats\(\d+, \d+\)")


def series(samples: dict, name: str) -> dict[tuple, float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def total(samples: dict, name: str, **match: str) -> float:
    return sum(
        v for labels, v in series(samples, name).items() if all((k, m) in labels for k, m in match.items())
    )
