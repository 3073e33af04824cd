"""Buffer Pool Extension (2014+): clean pages spilled to an SSD file. Its I/O counters are in
Buffer Manager (buffer_manager.py); this module reports whether it is on and how large it is."""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder
from ..metrics.declare import MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, rows_of

TAG = "bpe"
ENABLED_STATE = 5  # "BUFFER POOL EXTENSION ENABLED"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'bpe' AS section, bpe.state, bpe.current_size_in_kb\n"
    "FROM sys.dm_os_buffer_pool_extension_configuration AS bpe;",
    requires=("sys.dm_os_buffer_pool_extension_configuration",),
    optional=True,
    may_be_empty=True,
)

ENABLED = MetricSpec(
    name="mssql_buffer_pool_extension_enabled",
    type="gauge",
    help="1 if the Buffer Pool Extension is enabled.",
    unit="0/1",
    source='1 when a row of `sys.dm_os_buffer_pool_extension_configuration` has `state` 5 ("buffer pool '
    'extension enabled"); 0 otherwise, including the transitional states 1 (disabling) and 3 (enabling)',
    question="Is the Buffer Pool Extension on?",
)
SIZE_BYTES = MetricSpec(
    name="mssql_buffer_pool_extension_size_bytes",
    type="gauge",
    help="Size of the Buffer Pool Extension file.",
    unit="bytes",
    source="`sys.dm_os_buffer_pool_extension_configuration` `current_size_in_kb` summed over its rows "
    "\u00d7 1024",
    question="How large is the extension file? 0 when the extension is off.",
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    rows = list(rows_of(results, TAG))
    enabled = any(int(r.get("state") or 0) == ENABLED_STATE for r in rows)  # type: ignore[call-overload]
    size_kb = sum(int(r.get("current_size_in_kb") or 0) for r in rows)  # type: ignore[call-overload]
    out.emit(ENABLED, float(enabled))
    out.emit(SIZE_BYTES, size_kb * KIB)


COLLECTOR = CollectorRecord(
    name="buffer_pool_extension",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
    metrics=(ENABLED, SIZE_BYTES),
)
