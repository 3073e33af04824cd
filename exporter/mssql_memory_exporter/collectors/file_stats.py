"""sys.dm_io_virtual_file_stats: cumulative I/O per database file since the instance started.

Only ids and numbers travel every scrape; names and volumes come from the slow `files` section.

The function also reports the hidden resource database (database_id 32767), which sys.master_files
never lists, whatever the login's permissions: its files can be neither named nor placed on a volume,
and it is read-only, so the batch leaves it out rather than mistake it for a file the login cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .base import ImpossibleValue, Section, SectionResult

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


def bytes_written(results: Mapping[str, SectionResult]) -> dict[tuple[int, int], int]:
    """Bytes written per (database_id, file_id): the one figure needed for every file, read straight
    from the driver's tuples because an instance may have tens of thousands of files."""
    result = results.get(TAG)
    if result is None:
        return {}
    db, file, written = (result.index(c) for c in ("database_id", "file_id", "num_of_bytes_written"))
    readings = {(raw[db], raw[file]): raw[written] or 0 for raw in result.raw}
    # A negative reading would pass for a counter reset and make the volume totals go down.
    if readings and min(readings.values()) < 0:
        bad = next(key for key, value in readings.items() if value < 0)
        raise ImpossibleValue(f"file {bad} reports {readings[bad]} bytes written")
    return readings  # type: ignore[return-value]
