"""SQL Server:Buffer Node — per NUMA node. The instance PLE is a harmonic mean of these, so one starved
node hides behind a healthy-looking instance figure; alerts must look here."""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from . import perf
from .base import CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind

OBJECT = perf.perf_object("Buffer Node")

G, C = CounterKind.GAUGE, CounterKind.CUMULATIVE
METRICS = (
    perf.PerfMetric(
        "Page life expectancy",
        "mssql_buffer_node_page_life_expectancy_seconds",
        "Seconds a page is expected to stay in this NUMA node's buffer pool.",
        G,
        question="Dell row: page life expectancy > 300 s; the alerts use the modern per-node floor (300 s "
        "per 4 GiB of the node's pages), since the instance figure hides a starved node.",
    ),
    perf.PerfMetric(
        "Database pages",
        "mssql_buffer_node_database_pages",
        "Database pages in this node's buffer pool.",
        G,
        question="How big is this node's buffer pool? It sizes the per-node PLE floor.",
    ),
    perf.PerfMetric(
        "Local node page lookups/sec",
        "mssql_buffer_node_local_page_lookups_total",
        "Page lookups served from this node's local memory.",
        C,
        unit="lookups",
        question="NUMA locality: how many lookups stay on this node?",
    ),
    perf.PerfMetric(
        "Remote node page lookups/sec",
        "mssql_buffer_node_remote_page_lookups_total",
        "Page lookups served from another node's memory.",
        C,
        unit="lookups",
        question="NUMA locality: a node with many remote lookups is short of local memory.",
    ),
)

PLE, DATABASE_PAGES, LOCAL_LOOKUPS, REMOTE_LOOKUPS = METRICS  # by name, for the generators


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    perf.export_per_node(out, ctx, results, OBJECT, METRICS)


COLLECTOR = CollectorRecord(
    name="buffer_node",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    metrics=perf.declare(OBJECT.name, METRICS, labels=(perf.NODE,)),
)
