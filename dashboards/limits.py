"""The typed spec as the dashboards read it (`Limits`), and how its figures are written in panel text."""

from __future__ import annotations

from dataclasses import dataclass

from alerts import names as names_
from alerts.names import COVERAGE_SUFFIX, RuleNames
from alerts.spec import EnduranceSpec, MemorySpec, Spec
from alerts.spec import number as num

from .grafana import Link, Thresholds


def pct(ratio: float) -> str:
    """A ratio as a percentage, without trailing zeros (an eighth: 12.5%, a whole: 100%)."""
    return f"{ratio:.6%}"[:-1].rstrip("0").rstrip(".") + "%"


def duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = seconds / size
            return f"{num(count)} {unit}{'' if count == 1 else 's'}"
    return f"{num(seconds)} s"


@dataclass(frozen=True)
class Limits:
    """The typed spec as the dashboards read it: thresholds from `memory` and `endurance`, windows and
    rule names, and figures derived from them. Holds no number of its own."""

    spec: Spec

    @classmethod
    def from_spec(cls, spec: Spec) -> Limits:
        return cls(spec)

    @property
    def memory(self) -> MemorySpec:
        return self.spec.memory

    @property
    def endurance(self) -> EnduranceSpec:
        return self.spec.endurance

    @property
    def page_bytes(self) -> float:
        return self.memory.page_life_expectancy.page_bytes

    @property
    def lookups_by_workload(self) -> dict[str, Thresholds | None]:
        """Dell's lookups-per-batch limit is for OLTP; analytic scans exceed it by design: none drawn."""
        oltp = Thresholds.healthy_below(self.memory.page_lookups_per_batch_request.max)
        return {"oltp": oltp, "olap": None}

    # windows and recording-rule names (the names keep the spec's window, as alerts/generate.py writes them)
    @property
    def window(self) -> str:
        return self.spec.rate_window

    def rule(self, name: str) -> str:
        """A recording rule's public name (alerts/names.py), by the role it plays on the dashboards."""
        n = RuleNames.from_spec(self.spec)
        names = {
            "lazy": n.instance_rate("lazy_writes"),
            "stalls": n.instance_rate("free_list_stalls"),
            "batches": n.instance_rate("batch_requests"),
            "compilations_per_batch": n.compilations_per_batch,
            "grant_waits": n.grant_waits,
            "lookups_ratio": n.lookups_ratio,
            "page_io": n.page_io,
            "volume": n.volume,
            "tempdb_short": n.tempdb(n.tempdb_short),
            "tempdb_long": n.tempdb(n.tempdb_long),
            "pool_short": n.pool(n.pool_short),
            "pool_long": n.pool(n.pool_long),
            # Seconds of data the same-named rate rests on (a young Prometheus holds less than the window).
            "pool_long_coverage": n.pool(n.pool_long) + COVERAGE_SUFFIX,
            "tempdb_long_coverage": n.tempdb(n.tempdb_long) + COVERAGE_SUFFIX,
            "memory_sizing_change": n.memory_sizing_change,
            "buffer_pool_long": n.buffer_pool_long,
            "ple_min": names_.PLE_MIN,
            "ple_floor": names_.PLE_FLOOR,
            "uptime": names_.UPTIME,
            "share": names_.SHARE,
            "tempdb_headroom": names_.TEMPDB_HEADROOM,
            "tempdb_headroom_ratio": names_.TEMPDB_HEADROOM_RATIO,
            "tempdb_room": names_.TEMPDB_GROWTH_ROOM,
            "tempdb_log_headroom_ratio": names_.TEMPDB_LOG_HEADROOM_RATIO,
            "tempdb_exhausted_in": n.tempdb_exhausted_in,
            "tempdb_version_store": names_.TEMPDB_VERSION_STORE_BYTES,
            "tempdb_layout": names_.TEMPDB_LAYOUT_PROBLEMS,
            "read_latency": n.volume_io("read_latency_seconds"),
            "write_latency": n.volume_io("write_latency_seconds"),
            "reads": n.volume_io("reads"),
            "writes": n.volume_io("writes"),
            "read_size": n.volume_io("read_size_bytes"),
            "write_size": n.volume_io("write_size_bytes"),
            "drive_implied": names_.DRIVE_IMPLIED,
            "drive_to_rated": names_.DRIVE_TO_RATED,
            "drive_remaining": names_.DRIVE_REMAINING,
            "drive_share": names_.DRIVE_SHARE,
            "remaining": names_.REMAINING,
        }
        return names[name]

    @property
    def tempdb_short_window(self) -> str:
        return self.spec.tempdb.short_rate_window

    @property
    def tempdb_long_window(self) -> str:
        return self.spec.tempdb.long_rate_window

    @property
    def pool_short_window(self) -> str:
        return self.spec.endurance.short_rate_window

    @property
    def pool_long_window(self) -> str:
        return self.spec.endurance.projection_rate_window

    @property
    def grants_alarm(self) -> float:
        # Grafana colors from a step's value upwards; a count above the limit is at least limit + 1.
        return self.memory.memory_grants_pending.max + 1

    @property
    def free_pages(self) -> float:
        return self.memory.free_memory_bytes.min / self.page_bytes

    @property
    def step_gib(self) -> str:
        return f"{num(self.memory.page_life_expectancy.buffer_pool_bytes_per_step / 2**30)} GiB"

    def runbook(self, alert: str) -> Link:
        return Link(f"Runbook: {alert}", self.spec.runbook(alert))


def ple_floor_text(lim: Limits) -> str:
    return (
        f"{num(lim.memory.page_life_expectancy.seconds_per_buffer_pool_bytes)} s per {lim.step_gib} of the "
        "node's buffer pool, and at least "
        f"Dell's {num(lim.memory.page_life_expectancy.floor_seconds)} s"
    )
