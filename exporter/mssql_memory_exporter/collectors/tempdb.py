"""tempdb per file: the writes that grow when memory is added (Micron) and wear the SSDs under it."""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from . import file_stats, files
from .base import CollectorRecord, ScrapeContext, SectionResult

SECTIONS = (file_stats.SECTION, files.FILES_SECTION)
TEMPDB_ID = 2

FILE_LABELS = (
    Label("file", "the logical name from `sys.master_files.name`"),
    Label("volume", "the volume the file lives on"),
)
VIRTUAL_FILE_STATS = "`sys.dm_io_virtual_file_stats(NULL, NULL)` of `database_id` 2"


def _counter(name: str, help: str, unit: str, column: str, question: str) -> MetricSpec:
    return MetricSpec(
        name=name,
        type="counter",
        help=help,
        unit=unit,
        source=f"{VIRTUAL_FILE_STATS} {column}",
        question=question,
        labels=FILE_LABELS,
        columns=(column.split("`")[1],),  # the column named first, "`io_stall_write_ms` / 1000"
    )


WRITTEN_BYTES = _counter(
    "mssql_tempdb_file_written_bytes_total",
    "Bytes written to this tempdb file.",
    "bytes",
    "`num_of_bytes_written`",
    "Which tempdb files and volumes take the writes that wear the SSDs under tempdb?",
)
WRITES = _counter(
    "mssql_tempdb_file_writes_total",
    "Writes to this tempdb file.",
    "write operations",
    "`num_of_writes`",
    "How many writes did this tempdb file take?",
)
WRITE_STALL_SECONDS = _counter(
    "mssql_tempdb_file_write_stall_seconds_total",
    "Seconds writers waited on this file.",
    "seconds",
    "`io_stall_write_ms` / 1000",
    "How long did writers wait on this file? Its rate over the rate of writes is the average write latency.",
)
READ_BYTES = _counter(
    "mssql_tempdb_file_read_bytes_total",
    "Bytes read from this tempdb file.",
    "bytes",
    "`num_of_bytes_read`",
    "How much was read from this tempdb file?",
)
READS = _counter(
    "mssql_tempdb_file_reads_total",
    "Reads from this tempdb file.",
    "read operations",
    "`num_of_reads`",
    "How many reads did this tempdb file take?",
)
READ_STALL_SECONDS = _counter(
    "mssql_tempdb_file_read_stall_seconds_total",
    "Seconds readers waited on this file.",
    "seconds",
    "`io_stall_read_ms` / 1000",
    "How long did readers wait on this file? Its rate over the rate of reads is the average read latency.",
)
# (FileIO attribute, metric, scale): milliseconds become seconds
COUNTERS = (
    ("bytes_written", WRITTEN_BYTES, 1.0),
    ("writes", WRITES, 1.0),
    ("write_stall_ms", WRITE_STALL_SECONDS, 1e-3),
    ("bytes_read", READ_BYTES, 1.0),
    ("reads", READS, 1.0),
    ("read_stall_ms", READ_STALL_SECONDS, 1e-3),
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
        for attr, spec, scale in COUNTERS:
            out.emit(spec, getattr(io, attr) * scale, labels)


COLLECTOR = CollectorRecord(
    name="tempdb",
    sections=(file_stats.TAG,),
    collect=collect,
    defines=SECTIONS,
    metrics=tuple(spec for _, spec, _ in COUNTERS),
)
