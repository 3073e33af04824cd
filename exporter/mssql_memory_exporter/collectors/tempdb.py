"""tempdb per file: the writes that grow when memory is added (Micron) and wear the SSDs under it."""

from __future__ import annotations

from collections.abc import Mapping

from . import file_stats, files
from .base import CollectorRecord, FamilyBuilder, MissingData, ScrapeContext, SectionResult

SECTIONS = (file_stats.SECTION, files.FILES_SECTION)
TEMPDB_ID = 2

COUNTERS = (
    ("bytes_written", "mssql_tempdb_file_written_bytes_total", "Bytes written to this tempdb file.", 1.0),
    ("writes", "mssql_tempdb_file_writes_total", "Writes to this tempdb file.", 1.0),
    (
        "write_stall_ms",
        "mssql_tempdb_file_write_stall_seconds_total",
        "Seconds writers waited on this file.",
        1e-3,
    ),
    ("bytes_read", "mssql_tempdb_file_read_bytes_total", "Bytes read from this tempdb file.", 1.0),
    ("reads", "mssql_tempdb_file_reads_total", "Reads from this tempdb file.", 1.0),
    (
        "read_stall_ms",
        "mssql_tempdb_file_read_stall_seconds_total",
        "Seconds readers waited on this file.",
        1e-3,
    ),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    cat = files.update(results, ctx)
    if not cat.refreshed:
        raise MissingData("file names not read yet")
    tempdb_files = file_stats.file_io(results, TEMPDB_ID)
    files.require_visible([io.key for io in tempdb_files], results, cat, ctx)
    for io in tempdb_files:
        f = cat.files.get(io.key)
        if f is None:
            continue  # added since the last refresh: exported once its name arrives
        volume = cat.volume_of(f, ctx)
        if volume is None:
            continue  # its volume lookup is still out; exported from the next scrape
        labels = {"file": f.name, "volume": volume}
        for attr, metric, doc, scale in COUNTERS:
            out.counter(metric, doc, getattr(io, attr) * scale, labels)


COLLECTOR = CollectorRecord(
    name="tempdb",
    sections=(file_stats.TAG,),
    collect=collect,
    defines=SECTIONS,
)
