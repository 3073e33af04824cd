"""sys.dm_io_virtual_file_stats: cumulative I/O per database file since the instance started.

Only ids and numbers travel every scrape; names and volumes come from the slow `files` section.

The function also reports the hidden resource database (database_id 32767), which sys.master_files
never lists, whatever the login's permissions: its files can be neither named nor placed on a volume,
and it is read-only, so the batch leaves it out rather than mistake it for a file the login cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter

from ..metrics.builder import ImpossibleValue
from .base import Section, SectionResult

TAG = "file_stats"
RESOURCE_DATABASE_ID = 32767

SECTION = Section(
    tag=TAG,
    sql="SELECT N'file_stats' AS section, vfs.database_id, vfs.file_id,"
    " vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,"
    " vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms\n"
    "FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs\n"
    f"WHERE vfs.database_id <> {RESOURCE_DATABASE_ID};",
    requires=("sys.dm_io_virtual_file_stats",),
)


@dataclass(frozen=True, slots=True)
class FileIO:
    database_id: int
    file_id: int
    reads: int
    bytes_read: int
    read_stall_ms: int
    writes: int
    bytes_written: int
    write_stall_ms: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.database_id, self.file_id)


COLUMNS = (
    "database_id",
    "file_id",
    "num_of_reads",
    "num_of_bytes_read",
    "io_stall_read_ms",
    "num_of_writes",
    "num_of_bytes_written",
    "io_stall_write_ms",
)


def file_io(results: Mapping[str, SectionResult], database_id: int) -> list[FileIO]:
    """The files of one database, in full."""
    result = results.get(TAG)
    if result is None:
        return []
    at = [result.index(c) for c in COLUMNS]
    db = at[0]
    files = [
        FileIO(*(int(raw[i] or 0) for i in at))  # type: ignore[call-overload]
        for raw in result.raw
        if raw[db] == database_id
    ]
    for io in files:
        if min(io.reads, io.bytes_read, io.read_stall_ms, io.writes, io.bytes_written, io.write_stall_ms) < 0:
            raise ImpossibleValue(f"file {io.key} has a negative I/O counter: {io}")
    return files


# The cumulative counters kept per volume, in the order io_readings gives them.
IO_COUNTERS = (
    "num_of_reads",
    "num_of_bytes_read",
    "io_stall_read_ms",
    "num_of_writes",
    "num_of_bytes_written",
    "io_stall_write_ms",
)
WRITTEN = IO_COUNTERS.index("num_of_bytes_written")


def io_readings(results: Mapping[str, SectionResult]) -> dict[tuple[int, int], tuple[int, ...]]:
    """The IO_COUNTERS of every file by (database_id, file_id), read straight from the driver's tuples
    (an instance may have tens of thousands of files); NULL reads as 0."""
    result = results.get(TAG)
    if result is None or not result.raw:
        return {}
    key = itemgetter(result.index("database_id"), result.index("file_id"))
    counters = itemgetter(*(result.index(c) for c in IO_COUNTERS))
    readings = {key(raw): counters(raw) for raw in result.raw}
    try:
        # One pass in C: a sum of Python ints is an int; a float, Decimal, text or NULL breaks that.
        exact = type(sum(map(sum, readings.values()))) is int
    except TypeError:
        exact = False
    if not exact:
        readings = {k: tuple(_counter(v) for v in row) for k, row in readings.items()}
    # A negative reading would pass for a counter reset and make the volume totals go down.
    if min(map(min, readings.values())) < 0:
        bad = next(k for k, row in readings.items() if min(row) < 0)
        raise ImpossibleValue(f"file {bad} reports a negative I/O counter: {readings[bad]}")
    return readings


def _counter(value: object) -> int:
    """One cell of a bigint column: NULL reads as 0; anything else but an integer is no reading."""
    if value is None:
        return 0
    if type(value) is not int:
        raise ImpossibleValue(f"an I/O counter is {value!r}, not an integer")
    return value
