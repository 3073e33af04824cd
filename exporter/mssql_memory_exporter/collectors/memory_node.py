"""SQL Server:Memory Node — the memory manager's figures per NUMA node, in bytes (the counters are in KB).

Foreign Node Memory is memory this node's allocations got from other nodes: slow remote memory that
grows when one node runs short. The names are the ones servers report; Microsoft's page spells three of
them differently ("Stolen Memory Node (KB)", "Target Node Memory", "Total Node Memory").
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from . import perf
from .base import KIB, CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind

G = CounterKind.GAUGE
METRICS = (
    perf.PerfMetric(
        "Total Node Memory (KB)",
        "mssql_memory_node_total_bytes",
        "Memory the memory manager has committed on this NUMA node.",
        G,
        KIB,
        question="How much has SQL Server committed on this node?",
    ),
    perf.PerfMetric(
        "Target Node Memory (KB)",
        "mssql_memory_node_target_bytes",
        "Memory the memory manager would like to use on this NUMA node.",
        G,
        KIB,
        question="How much would it like on this node? (target < total: the node is shrinking)",
    ),
    perf.PerfMetric(
        "Free Node Memory (KB)",
        "mssql_memory_node_free_bytes",
        "Committed memory on this NUMA node not in use.",
        G,
        KIB,
        question="Is this node out of free memory while others have some?",
    ),
    perf.PerfMetric(
        "Stolen Node Memory (KB)",
        "mssql_memory_node_stolen_bytes",
        "Memory on this NUMA node used for purposes other than database pages.",
        G,
        KIB,
        question="How much of the node is not database pages (plans, grants, locks)?",
    ),
    perf.PerfMetric(
        "Database Node Memory (KB)",
        "mssql_memory_node_database_bytes",
        "Memory on this NUMA node holding database pages.",
        G,
        KIB,
        question="How much of the node's memory caches database pages?",
    ),
    perf.PerfMetric(
        "Foreign Node Memory (KB)",
        "mssql_memory_node_foreign_bytes",
        "Memory this NUMA node uses that comes from another node (remote, slower).",
        G,
        KIB,
        question="Is this node using remote (slower) memory from other nodes? Should be near 0; growth means "
        "the node ran short.",
    ),
)
# By name, for the rule and dashboard generators.
TOTAL, TARGET, FREE, STOLEN, DATABASE, FOREIGN = METRICS
TOTAL, TARGET, FREE, STOLEN, DATABASE, FOREIGN = METRICS  # by name, for the generators
OBJECT = perf.perf_object("Memory Node", tuple(m.counter for m in METRICS))


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    perf.export_per_node(out, ctx, results, OBJECT, METRICS)


COLLECTOR = CollectorRecord(
    name="memory_node",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    metrics=perf.declare(OBJECT.name, METRICS, labels=(perf.NODE,)),
)
