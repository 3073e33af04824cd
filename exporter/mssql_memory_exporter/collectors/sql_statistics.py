"""SQL Server:SQL Statistics — batch requests (the denominator of Dell's lookups-per-batch ratio), and
compilations and re-compilations: a plan cache under pressure (or an ad hoc workload that never reuses a
plan) compiles a large share of its batches. All three are cumulative "/sec" counters, exported as counters
for rate()."""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from . import perf
from .base import CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind, PerfIndex

METRICS = (
    perf.PerfMetric(
        "Batch Requests/sec",
        "mssql_batch_requests_total",
        "T-SQL command batches received.",
        CounterKind.CUMULATIVE,
        unit="batches",
        question="Dell's batch requests/sec (the denominator of page lookups per batch).",
    ),
    perf.PerfMetric(
        "SQL Compilations/sec",
        "mssql_sql_compilations_total",
        "Query compilations (statement-level, auto-parameterization attempts and recompiles included).",
        CounterKind.CUMULATIVE,
        unit="compilations",
        question="Are plans reused? `rate(compilations) / rate(batch requests)` near 1 means almost every "
        "batch compiles: an ad hoc workload filling `CACHESTORE_SQLCP` (plan-cache bloat; see `plan_cache`); "
        "a healthy OLTP server compiles a small share of its batches.",
    ),
    perf.PerfMetric(
        "SQL Re-Compilations/sec",
        "mssql_sql_recompilations_total",
        "Statement recompilations (a cached plan found invalid: schema or statistics changed, or a hint).",
        CounterKind.CUMULATIVE,
        unit="recompilations",
        question="Are cached plans thrown away (schema or statistics changes, `RECOMPILE` hints)? A high "
        "share of compilations is worth a look.",
    ),
)
BATCH_REQUESTS, COMPILATIONS, RECOMPILATIONS = METRICS  # by name, for the rule and dashboard generators
OBJECT = perf.perf_object("SQL Statistics", tuple(m.counter for m in METRICS))


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    perf.export(out, ctx, PerfIndex(perf.perf_rows(results, OBJECT.name)), METRICS)


COLLECTOR = CollectorRecord(
    name="sql_statistics",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    metrics=perf.declare(OBJECT.name, METRICS),
)
