"""SQL Server:Plan Cache — per cache type, how much memory the plans hold, how many there are, and whether
they are found again. Beside the memory clerks (CACHESTORE_SQLCP, _OBJCP, _PHDR) it tells a plan cache
that is large because it is useful (object plans, re-used) from one bloated by single-use ad hoc plans:
SQL Plans holding gigabytes with a low hit ratio.

The object has one instance per cache type and a `_Total`; the total is left out (sum() gives it for the
sizes and counts), and the type becomes a stable `cache` label: older servers spell `Sql Plans`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import Label, MetricSpec
from . import perf
from .base import CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind, PerfIndex

PAGE = 8192.0  # Cache Pages counts 8 KB pages
TOTAL = "_total"  # the instance summing the others, casefolded
CACHE = Label(
    "cache",
    "`sql_plans` (ad hoc and prepared statements), `object_plans` (procedures, functions, triggers), "
    "`bound_trees` (views, constraints, defaults), `extended_stored_procedures`, `temporary_tables` "
    "(temporary tables and table variables)",
)

G = CounterKind.GAUGE
METRICS = (
    perf.PerfMetric(
        "Cache Pages",
        "mssql_plan_cache_bytes",
        "Memory the plans of this cache type hold (8 KB pages).",
        G,
        PAGE,
        question="Which kind of plan holds the plan cache's memory? Compare CACHESTORE_SQLCP in the clerks.",
    ),
    perf.PerfMetric(
        "Cache Object Counts",
        "mssql_plan_cache_objects",
        "Plans (cache objects) of this cache type in the cache.",
        G,
        unit="plans",
        question="How many plans? Many SQL plans of a few KB each: single-use ad hoc statements.",
    ),
    perf.PerfMetric(
        "Cache Objects in use",
        "mssql_plan_cache_objects_in_use",
        "Plans of this cache type being executed now.",
        G,
        unit="plans",
        question="How many of them run now (the rest wait to be found again, or evicted)?",
    ),
)
BYTES, OBJECTS, IN_USE = METRICS  # by name, for the dashboard generators
HIT_RATIO = MetricSpec(
    name="mssql_plan_cache_hit_ratio",
    type="gauge",
    help="Share of plan lookups of this cache type that found a cached plan since start, 0..1.",
    unit="ratio 0..1",
    source="`Plan Cache` `Cache Hit Ratio` ÷ `Cache Hit Ratio Base`",
    question="Are the plans re-used? Low for SQL Plans while they hold gigabytes: plan-cache bloat.",
    labels=(CACHE,),
    conditional="while a cache type has had no lookups (its base is 0)",
)
OBJECT = perf.perf_object(
    "Plan Cache", (*(m.counter for m in METRICS), "Cache Hit Ratio", "Cache Hit Ratio Base")
)


def cache_label(instance: str) -> str:
    """`SQL Plans` or `Sql Plans`: `sql_plans`; `Temporary Tables & Table Variables`: `temporary_tables`."""
    key = re.sub(r"[^a-z0-9]+", "_", instance.casefold()).strip("_")
    return "temporary_tables" if key.startswith("temporary_tables") else key


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    index = PerfIndex(perf.perf_rows(results, OBJECT.name))
    for instance in index.instances():
        if instance.casefold() == TOTAL:
            continue
        labels = {"cache": cache_label(instance)}
        perf.export(out, ctx, index, METRICS, instance=instance, labels=labels)
        ratio = index.ratio("Cache Hit Ratio", "Cache Hit Ratio Base", instance)
        if ratio is not None:
            out.emit(HIT_RATIO, ratio, labels)


COLLECTOR = CollectorRecord(
    name="plan_cache",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    summary="perf object `Plan Cache`, one series per cache type",
    metrics=(*perf.declare("Plan Cache", METRICS, labels=(CACHE,)), HIT_RATIO),
)
