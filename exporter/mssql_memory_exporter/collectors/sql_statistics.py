"""SQL Server:SQL Statistics — batch requests, the denominator of Dell's lookups-per-batch ratio."""

from __future__ import annotations

from collections.abc import Mapping

from . import perf
from .base import CollectorRecord, FamilyBuilder, ScrapeContext, SectionResult
from .perfcounters import CounterKind, PerfIndex

METRICS = (
    perf.PerfMetric(
        "Batch Requests/sec",
        "mssql_batch_requests_total",
        "T-SQL command batches received.",
        CounterKind.CUMULATIVE,
    ),
)
OBJECT = perf.PerfObject("SQL Statistics", tuple(m.counter for m in METRICS))


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    perf.export(out, ctx, PerfIndex(perf.perf_rows(results, OBJECT.name)), METRICS)


COLLECTOR = CollectorRecord(
    name="sql_statistics",
    sections=(perf.PERF_TAG,),
    collect=collect,
    perf_object=OBJECT,
)
