"""The host collector's families for /metrics, with its own success and duration like every collector."""

from __future__ import annotations

import logging
import time

from prometheus_client.core import Metric

from ..collectors.base import FamilyBuilder

log = logging.getLogger(__name__)


def host_families(host: object) -> list[Metric]:
    out = FamilyBuilder({})
    scratch = out.child()
    started = time.monotonic()
    ok = 1.0
    try:
        host.collect(scratch)  # type: ignore[attr-defined]
    except Exception:  # a host quirk (unreadable /proc, odd device) must not break /metrics
        ok = 0.0
        log.exception("host collector failed")
    else:
        out.merge(scratch)
    labels = {"collector": "host"}
    out.gauge("mssql_exporter_collector_success", "1 if the collector succeeded, 0 otherwise.", ok, labels)
    out.gauge(
        "mssql_exporter_collector_duration_seconds",
        "Seconds the exporter spent in the collector.",
        time.monotonic() - started,
        labels,
    )
    return out.families()
