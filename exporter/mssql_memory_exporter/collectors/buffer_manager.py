"""SQL Server:Buffer Manager — the instance-wide counters of Dell's memory-bottleneck table (Table 4)."""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import MetricSpec
from . import perf
from .base import CollectorRecord, ScrapeContext, SectionResult
from .perfcounters import CounterKind, PerfIndex

OBJECT = perf.perf_object("Buffer Manager")

G, C = CounterKind.GAUGE, CounterKind.CUMULATIVE
METRICS = (
    perf.PerfMetric(
        "Page life expectancy",
        "mssql_page_life_expectancy_seconds",
        "Seconds a page is expected to stay in the buffer pool (harmonic mean over NUMA nodes).",
        G,
        question="Dell row: Page life expectancy > 300 (instance-wide; harmonic mean of the nodes, so use "
        "the per-node metric for alerts).",
    ),
    perf.PerfMetric(
        "Free list stalls/sec",
        "mssql_free_list_stalls_total",
        "Requests that had to wait for a free page.",
        C,
        unit="requests",
        question="Dell row: Free list stalls/sec < 2.",
    ),
    perf.PerfMetric(
        "Lazy writes/sec", "mssql_lazy_writes_total", "Pages written by the lazy writer.", C,
        unit="pages",
        question="Dell row: Lazy writes/sec < 20.",
    ),
    perf.PerfMetric(
        "Page lookups/sec", "mssql_page_lookups_total", "Requests to find a page in the buffer pool.", C,
        unit="lookups",
        question="Dell row: Page lookups/sec ÷ batch requests/sec < 100 (numerator).",
    ),
    perf.PerfMetric(
        "Page reads/sec", "mssql_page_reads_total", "Physical database page reads.", C,
        unit="pages",
        question="Dell row: Pages read/sec and writes/sec < 90.",
    ),
    perf.PerfMetric(
        "Page writes/sec", "mssql_page_writes_total", "Physical database page writes.", C,
        unit="pages",
        question="Dell row: Pages read/sec and writes/sec < 90.",
    ),
    perf.PerfMetric(
        "Checkpoint pages/sec", "mssql_checkpoint_pages_total", "Pages flushed to disk by checkpoints.", C,
        unit="pages",
        question="Context for write volume.",
    ),
    perf.PerfMetric(
        "Readahead pages/sec", "mssql_readahead_pages_total", "Pages read in anticipation of use.", C,
        unit="pages",
        question="Explains why the hit ratio stays high.",
    ),
    # Indirect checkpoint's writer (target_recovery_time, the default since 2016): with it, checkpoint
    # pages/sec alone understates how much the buffer pool writes back.
    perf.PerfMetric(
        "Background writer pages/sec",
        "mssql_background_writer_pages_total",
        "Pages flushed by the background writer (indirect checkpoint).",
        C,
        unit="pages",
        question="Indirect checkpoint's writes; with `target_recovery_time`, the default since 2016, most "
        "checkpoint writes are here.",
    ),
    perf.PerfMetric(
        "Database pages",
        "mssql_buffer_pool_database_pages",
        "Pages in the buffer pool with database content.",
        G,
        question="Buffer pool size.",
    ),
    # Buffer Pool Extension: reported (as 0) while the extension is off on Windows, but it is a
    # Windows Enterprise/Standard feature that Linux and Managed Instance lack, so never required.
    perf.PerfMetric(
        "Extension page reads/sec",
        "mssql_buffer_pool_extension_page_reads_total",
        "Pages read from the Buffer Pool Extension file.",
        C,
        required=False,
        unit="pages",
        question="See [Buffer Pool Extension](#buffer_pool_extension).",
    ),
    perf.PerfMetric(
        "Extension page writes/sec",
        "mssql_buffer_pool_extension_page_writes_total",
        "Pages written to the Buffer Pool Extension file.",
        C,
        required=False,
        unit="pages",
        question="Writes that wear the extension's SSD.",
    ),
    perf.PerfMetric(
        "Extension allocated pages",
        "mssql_buffer_pool_extension_allocated_pages",
        "Pages of the Buffer Pool Extension file in use.",
        G,
        required=False,
    ),
)
# By name, for the rule and dashboard generators (the order of METRICS).
(
    PAGE_LIFE_EXPECTANCY,
    FREE_LIST_STALLS,
    LAZY_WRITES,
    PAGE_LOOKUPS,
    PAGE_READS,
    PAGE_WRITES,
    CHECKPOINT_PAGES,
    READAHEAD_PAGES,
    BACKGROUND_WRITER_PAGES,
    DATABASE_PAGES,
    EXTENSION_PAGE_READS,
    EXTENSION_PAGE_WRITES,
    EXTENSION_ALLOCATED_PAGES,
) = METRICS

HIT_RATIO = MetricSpec(
    name="mssql_buffer_cache_hit_ratio",
    type="gauge",
    help="Share of page requests served from the buffer pool, 0..1 (read-ahead counts as hits).",
    unit="ratio 0..1",
    source="`Buffer Manager` `Buffer cache hit ratio` (cntr_type 537003264) / "
    "`Buffer cache hit ratio base` (1073939712)",
    question="Dell row: Buffer cache hit ratio > 0.95 OLTP, > 0.90 OLAP.",
    conditional="while the base is 0 (no page lookups since start)",
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    index = PerfIndex(perf.perf_rows(results, OBJECT.name))
    perf.export(out, ctx, index, METRICS)
    # The raw counter is meaningless without its base row: the ratio is value/base, and absent while the
    # base is 0 (no lookups since start) rather than a misleading 0 or 1.
    ratio = index.ratio("Buffer cache hit ratio", "Buffer cache hit ratio base")
    if ratio is not None:
        out.emit(HIT_RATIO, ratio)

COLLECTOR = CollectorRecord(
    name="buffer_manager",
    sections=(perf.PERF_TAG,),
    collect=collect,
    reads=(OBJECT,),
    metrics=(*perf.declare(OBJECT.name, METRICS), HIT_RATIO),
)
