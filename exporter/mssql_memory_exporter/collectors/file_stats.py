"""sys.dm_io_virtual_file_stats: cumulative I/O per database file since the instance started.

Only ids and numbers travel every scrape; names and volumes come from the slow `files` section.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .base import Section, SectionResult, rows_of

TAG = "file_stats"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'file_stats' AS section, vfs.database_id, vfs.file_id,"
    " vfs.num_of_reads, vfs.num_of_bytes_read, vfs.io_stall_read_ms,"
    " vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms\n"
    "FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs;",
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


def file_io(results: Mapping[str, SectionResult]) -> Iterator[FileIO]:
    for r in rows_of(results, TAG):
        yield FileIO(
            int(r["database_id"]),  # type: ignore[call-overload]
            int(r["file_id"]),  # type: ignore[call-overload]
            int(r["num_of_reads"] or 0),  # type: ignore[call-overload]
            int(r["num_of_bytes_read"] or 0),  # type: ignore[call-overload]
            int(r["io_stall_read_ms"] or 0),  # type: ignore[call-overload]
            int(r["num_of_writes"] or 0),  # type: ignore[call-overload]
            int(r["num_of_bytes_written"] or 0),  # type: ignore[call-overload]
            int(r["io_stall_write_ms"] or 0),  # type: ignore[call-overload]
        )
