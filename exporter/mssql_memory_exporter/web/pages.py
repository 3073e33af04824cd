"""What the exporter answers with: families merged for one exposition, its own process metrics, the
index page."""

from __future__ import annotations

import html
import logging
from collections.abc import Iterable
from urllib.parse import quote

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.config import ExporterConfig

log = logging.getLogger(__name__)


def merge_families(*groups: Iterable[Metric]) -> list[Metric]:
    """One family per name: the host collector and the default target both report
    mssql_exporter_collector_success, and an exposition with a name twice is invalid."""
    merged: dict[str, Metric] = {}
    for group in groups:
        for family in group:
            mine = merged.get(family.name)
            if mine is None:
                merged[family.name] = family
            elif mine.type == family.type:
                combined = Metric(mine.name, mine.documentation, mine.type)
                combined.samples = [*mine.samples, *family.samples]
                merged[family.name] = combined
            else:
                raise ValueError(f"metric {family.name} is both a {mine.type} and a {family.type}")
    return list(merged.values())


def http_worker_families(busy: int, idle: int) -> list[Metric]:
    doc = (
        "Threads that answer HTTP requests (at most 2 x targets + 16, at least 32). busy: answering one "
        "now (a probe waits for its scrape); idle: waiting for the next request, exiting after two minutes "
        "unused."
    )
    family = GaugeMetricFamily("mssql_exporter_http_workers", doc, labels=["state"])
    family.add_metric(["busy"], float(busy))
    family.add_metric(["idle"], float(idle))
    return [family]


def process_metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


# The process, Python and GC collectors read /proc and the interpreter afresh on every collect(), so one
# registry serves every request; building it per request only repeated their set-up.
PROCESS_METRICS = process_metrics_registry()


def index_page(config: ExporterConfig, telemetry_path: str = "/metrics") -> bytes:
    items = "".join(
        f'<li><a href="/probe?target={html.escape(quote(name, safe=""))}">{html.escape(name)}</a></li>'
        for name in config.targets
    )
    default = (
        f"<p>Default target on /metrics: {html.escape(config.default_target)}</p>"
        if config.default_target
        else "<p>No default target: /metrics has only the exporter's own metrics.</p>"
    )
    page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>SQL Server memory exporter</title></head>'
        f"<body><h1>SQL Server memory exporter {html.escape(__version__)}</h1>"
        f'<p><a href="{html.escape(quote(telemetry_path))}">Metrics</a></p>{default}'
        f"<h2>Targets</h2><ul>{items}</ul></body></html>\n"
    )
    return page.encode()
