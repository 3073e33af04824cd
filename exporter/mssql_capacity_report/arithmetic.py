"""The endurance arithmetic of one period (docs/endurance.md) and the decimal units the text shows.

projected life bytes = write rate (bytes/s over the period) x planned lifetime (s)
share                = projected life bytes / rated endurance (bytes)

Drive ratings are decimal (1 TB = 10^12 bytes), so the text is too: TB and PB, never TiB. SQL Server's
memory is set in MB that are binary (1 MB = 2^20 bytes; 'max server memory (MB)'), so memory is shown the
way a DBA sets it: 262,144 MB (256 GiB), and SQL Server's default of 2,147,483,647 MB as "unlimited".
"""

from __future__ import annotations

import math

__all__ = ["decimal_bytes", "decimal_rate", "duration", "projected_life_bytes", "share", "sql_memory"]

_DECIMAL = [(1e18, "EB"), (1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")]


def projected_life_bytes(write_rate_bytes_per_second: float, planned_lifetime_seconds: float) -> float:
    return write_rate_bytes_per_second * planned_lifetime_seconds


def share(projected_bytes: float, rated_bytes: float) -> float | None:
    """None for a rating of zero or less: a share of nothing is not a number to print."""
    if rated_bytes <= 0 or not math.isfinite(rated_bytes):
        return None
    return projected_bytes / rated_bytes


def decimal_bytes(value: float) -> str:
    for size, unit in _DECIMAL:
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f} B"


def decimal_rate(bytes_per_second: float) -> str:
    return f"{decimal_bytes(bytes_per_second)}/s"


MIB = 2**20
GIB = 2**30
# sp_configure's default and maximum for max server memory: no limit set.
UNLIMITED_MAX_SERVER_MEMORY_MB = 2_147_483_647


def sql_memory(value: float) -> str:
    """Bytes of SQL Server memory in SQL Server's binary MB, with GiB beside it from 1 GiB up."""
    megabytes = value / MIB
    if megabytes >= UNLIMITED_MAX_SERVER_MEMORY_MB:
        return "unlimited"
    text = f"{megabytes:,.0f} MB"
    if value >= GIB:
        gib = value / GIB
        text += f" ({gib:.0f} GiB)" if abs(gib - round(gib)) < 0.005 else f" ({gib:.2f} GiB)"
    return text


def duration(seconds: float) -> str:
    """5h, 3d, 12d 4h: what a reviewer reads, not a PromQL duration."""
    hours = round(seconds / 3600)
    if hours < 24:
        return f"{hours}h"
    days, rest = divmod(hours, 24)
    return f"{days}d" if rest == 0 else f"{days}d {rest}h"
