"""The exporter's own state for /metrics, beside the process metrics: its scrape workers."""

from __future__ import annotations

from prometheus_client.core import Metric

from ..connection.workers import WorkerPool
from ..metrics.builder import FamilyBuilder


def worker_families(pool: WorkerPool) -> list[Metric]:
    busy, idle = pool.counts()
    out = FamilyBuilder({})
    doc = (
        "Threads that run the scrapes' round trips to SQL Server. busy: in a round trip now (one that "
        "stays busy is stuck in the driver on a server that stopped answering); idle: waiting for the "
        "next scrape, exiting after two minutes unused."
    )
    out.gauge("mssql_exporter_scrape_workers", doc, float(busy), {"state": "busy"})
    out.gauge("mssql_exporter_scrape_workers", doc, float(idle), {"state": "idle"})
    return out.families()
