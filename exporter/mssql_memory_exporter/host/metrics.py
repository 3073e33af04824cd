"""Collectors on the exporter's own /metrics (host disks, drive health), each with its own success and
duration like every collector, so one that breaks never takes /metrics down."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from prometheus_client.core import Metric

from ..metrics.builder import FamilyBuilder

log = logging.getLogger(__name__)


def collector_families(name: str, what: str, collect: Callable[[FamilyBuilder], bool]) -> list[Metric]:
    """What `collect` adds (it returns whether everything was read), plus
    mssql_exporter_collector_success and _duration_seconds{collector=name}. An exception from it is
    logged as "<what> collector failed" and counts as a failure; nothing it added half-way is kept."""
    out = FamilyBuilder({})
    scratch = out.child()
    started = time.monotonic()
    try:
        ok = collect(scratch)
    except Exception:  # a host quirk (unreadable /proc, odd device or reading) must not break /metrics
        ok = False
        log.exception("%s collector failed", what)
    else:
        out.merge(scratch)
    labels = {"collector": name}
    out.gauge(
        "mssql_exporter_collector_success",
        "1 if the collector succeeded, 0 otherwise.",
        1.0 if ok else 0.0,
        labels,
    )
    out.gauge(
        "mssql_exporter_collector_duration_seconds",
        "Seconds the exporter spent in the collector.",
        time.monotonic() - started,
        labels,
    )
    return out.families()


def host_families(host: object) -> list[Metric]:
    def collect(scratch: FamilyBuilder) -> bool:
        host.collect(scratch)  # type: ignore[attr-defined]
        return True

    return collector_families("host", "host", collect)
