"""Buffer Pool Extension (2014+): clean pages spilled to an SSD file. Its I/O counters are in
Buffer Manager (buffer_manager.py); this module reports whether it is on and how large it is."""

from __future__ import annotations

from collections.abc import Mapping

from .base import KIB, CollectorRecord, FamilyBuilder, ScrapeContext, Section, SectionResult, rows_of

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


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    rows = list(rows_of(results, TAG))
    enabled = any(int(r.get("state") or 0) == ENABLED_STATE for r in rows)  # type: ignore[call-overload]
    size_kb = sum(int(r.get("current_size_in_kb") or 0) for r in rows)  # type: ignore[call-overload]
    out.gauge(
        "mssql_buffer_pool_extension_enabled", "1 if the Buffer Pool Extension is enabled.", float(enabled)
    )
    out.gauge(
        "mssql_buffer_pool_extension_size_bytes", "Size of the Buffer Pool Extension file.", size_kb * KIB
    )


COLLECTOR = CollectorRecord(
    name="buffer_pool_extension",
    sections=(TAG,),
    collect=collect,
    defines=(SECTION,),
)
