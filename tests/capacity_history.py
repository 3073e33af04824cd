"""A year of SQL Server capacity history as OpenMetrics text, for `promtool tsdb create-blocks-from
openmetrics`, with the figures a capacity report must find in it worked out by hand.

One sample per hour, on the hour. Each instance writes to its pools at one rate per memory size: the
hour ending at t is written at the rate of the memory size at t, so a memory change at C makes the
counter's slope change at C exactly (Micron's effect: memory raised, tempdb writes rise with it). The
counters start from a large value (a pool in service for a while), so no rate is ever clamped at zero.

The report's grid is anchored half an hour after the last sample (`REPORT_END_OFFSET`), so every report
window ends between two samples and holds the same samples under Prometheus 2.x (closed windows) and 3.x
(left-open windows).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HOUR = 3600
DAY = 86400
YEAR = 365 * DAY
PLANNED = 157_788_000.0  # 5 years of 365.25 days, as the exporter exports it
REPORT_END_OFFSET = 1800
COUNTER_BASE = 5e14


@dataclass(frozen=True)
class Pool:
    name: str
    rated_bytes: float | None  # None: the pool exports no rating (a bad input the report must name)
    # bytes per second written at each memory size: {max server memory bytes: rate}
    rate_by_memory: dict[float, float]
    life_used: float | None = None  # the drives' own wear, one drive
    implied_endurance_bytes: float | None = None  # pool:mssql_ssd_drive_implied_endurance_bytes:sum


@dataclass(frozen=True)
class Instance:
    name: str
    shard: str
    # (from hours before the last sample, max server memory bytes), oldest first; target memory follows
    memory: list[tuple[int, float]]
    pools: list[Pool]
    first_hours_before_end: int = 364 * 24  # when its data begins


@dataclass(frozen=True)
class History:
    last_sample: int  # unix seconds, on the hour
    instances: list[Instance] = field(default_factory=list)
    # Ratings and planned lives never change: the benchmark writes them daily to keep its text small.
    constants_every_hours: int = 1

    @property
    def report_end(self) -> int:
        return self.last_sample + REPORT_END_OFFSET

    def memory_at(self, instance: Instance, t: int) -> float:
        value = instance.memory[0][1]
        for hours_before, memory in instance.memory:
            if t >= self.last_sample - hours_before * HOUR:
                value = memory
        return value

    def openmetrics(self, shard: str) -> str:
        return "".join(self._lines(shard)) + "# EOF\n"

    def write_openmetrics(self, shard: str, path: Path) -> None:
        """The same text, streamed to a file (a year of hundreds of targets is a gigabyte)."""
        with path.open("w") as out:
            for line in self._lines(shard):
                out.write(line)
            out.write("# EOF\n")

    def _lines(self, shard: str) -> Iterator[str]:
        mine = [i for i in self.instances if i.shard == shard]
        families = [
            ("mssql_config_max_server_memory_bytes", "gauge"),
            ("mssql_memory_target_bytes", "gauge"),
            ("mssql_ssd_pool_written_bytes", "counter"),
            ("mssql_ssd_pool_rated_endurance_bytes", "gauge"),
            ("mssql_ssd_pool_planned_lifetime_seconds", "gauge"),
            ("mssql_ssd_pool_drive_life_used_ratio", "gauge"),
            ("pool:mssql_ssd_drive_implied_endurance_bytes:sum", "gauge"),
        ]
        for family, kind in families:
            yield f"# TYPE {family} {kind}\n"
            for instance in mine:
                yield from self._family(family, instance)

    def _times(self, instance: Instance, every_hours: int = 1) -> range:
        first = self.last_sample - instance.first_hours_before_end * HOUR
        return range(first, self.last_sample + 1, every_hours * HOUR)

    def _family(self, family: str, instance: Instance) -> Iterator[str]:
        base = f'job="mssql",instance="{instance.name}"'
        if family in ("mssql_config_max_server_memory_bytes", "mssql_memory_target_bytes"):
            for t in self._times(instance):
                yield f"{family}{{{base}}} {self.memory_at(instance, t):.0f} {t}\n"
            return
        for pool in instance.pools:
            labels = f'{base},pool="{pool.name}"'
            if family == "mssql_ssd_pool_written_bytes":
                value = COUNTER_BASE
                for i, t in enumerate(self._times(instance)):
                    if i:
                        value += pool.rate_by_memory[self.memory_at(instance, t)] * HOUR
                    yield f'{family}_total{{{labels},source="sqlserver"}} {value:.0f} {t}\n'
                continue
            value_of = {
                "mssql_ssd_pool_rated_endurance_bytes": pool.rated_bytes,
                "mssql_ssd_pool_planned_lifetime_seconds": PLANNED,
                "mssql_ssd_pool_drive_life_used_ratio": pool.life_used,
                "pool:mssql_ssd_drive_implied_endurance_bytes:sum": pool.implied_endurance_bytes,
            }
            fixed = value_of[family]
            if fixed is None:
                continue
            extra = ',device="nvme0n1"' if family == "mssql_ssd_pool_drive_life_used_ratio" else ""
            for t in self._times(instance, self.constants_every_hours):
                yield f"{family}{{{labels}{extra}}} {fixed:g} {t}\n"


# SQL Server memory is set in MB of 2^20 bytes: the history keeps to whole GiB, as DBAs size it.
GIB = 2**30


def fleet(last_sample: int) -> History:
    """Four instances on two shards: the scenario the capacity tests check by hand."""
    return History(
        last_sample,
        [
            # Memory doubled half-way through the year; tempdb's writes rise from 50 to 80 MB/s.
            Instance(
                "sql-a",
                "0",
                [(365 * 24, 256 * GIB), (182 * 24, 512 * GIB)],
                [Pool("tempdb", 28e15, {256 * GIB: 50e6, 512 * GIB: 80e6})],
            ),
            # Steady; a second pool without a rating; drives read and the implied endurance recorded.
            Instance(
                "sql-b",
                "0",
                [(365 * 24, 128 * GIB)],
                [
                    Pool("data", 7.008e15, {128 * GIB: 10e6}, life_used=0.2, implied_endurance_bytes=5e16),
                    Pool("scratch", None, {128 * GIB: 1e6}),
                ],
            ),
            Instance(
                "sql-c",
                "1",
                [(365 * 24, 64 * GIB), (100 * 24, 96 * GIB)],
                [Pool("tempdb", 7.008e15, {64 * GIB: 20e6, 96 * GIB: 30e6})],
            ),
            # In service for the last 30 days only; memory cut two hours before the end: the last period
            # is too short for a figure.
            Instance(
                "sql-d",
                "1",
                [(365 * 24, 32 * GIB), (2, 24 * GIB)],
                [Pool("tempdb", 3.5e15, {32 * GIB: 5e6, 24 * GIB: 7e6})],
                first_hours_before_end=30 * 24,
            ),
        ],
    )
