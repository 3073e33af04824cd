"""tempdb's figures worked out from a scenario's own numbers (sizes in MB of 10^6 bytes, 8 KiB pages,
64 MB autogrowth steps), never read back from the stand-in's model: shared by the tempdb collectors' tests."""

from __future__ import annotations

import math

from tests.conftest import scrape, value

PAGE = 8192
MB = 1_000_000
TEMPDB = "/var/opt/mssql/tempdb"


def pages(mb: float) -> int:
    """What a size in MB is in SQL Server's 8 KiB pages, as sys.database_files counts it."""
    return int(mb * MB / PAGE)


def grown(startup_mb: float, step_mb: float, needed_mb: float) -> int:
    """Pages of a file that autogrew by whole steps until it held `needed_mb`."""
    start, step, needed = pages(startup_mb), pages(step_mb), pages(needed_mb)
    return start + max(0, math.ceil((needed - start) / step)) * step


def space(samples: dict, file: str, usage: str, volume: str = TEMPDB) -> float:
    labels = {"file": file, "file_type": "data", "volume": volume, "usage": usage}
    return value(samples, "mssql_tempdb_file_space_bytes", **labels)


def size(samples: dict, file: str, volume: str = TEMPDB, file_type: str = "data") -> float:
    return value(samples, "mssql_tempdb_file_size_bytes", file=file, file_type=file_type, volume=volume)


def scrape_at(s, scraper, config, t: float) -> dict:
    s.clock.advance(t - s.clock.now())
    got = scrape(scraper, config)
    for collector in ("tempdb_files", "tempdb_usage", "tempdb_volumes", "tempdb_log", "volumes"):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    return got
