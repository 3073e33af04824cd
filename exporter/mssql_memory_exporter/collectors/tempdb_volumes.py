"""Free space of the volumes tempdb's files grow into, every scrape: autogrowth during a spill takes it.

sys.dm_os_volume_stats answers for one file at a time, so the batch applies it to each of tempdb's files
(a handful, never the instance's thousands). It reports total and available bytes on Windows and on
Linux alike, co-located or not; only the label comes from the shared file list, so these series carry
the `volume` of the tempdb file series and a rule can join them. Files share volumes: one series per
volume, never per file, so headroom is not counted twice.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, ImpossibleValue
from ..metrics.declare import Label, MetricSpec
from . import files, tempdb_files
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number

TAG = "tempdb_volumes"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'tempdb_volumes' AS section, df.file_id, vs.total_bytes, vs.available_bytes\n"
    "FROM tempdb.sys.database_files AS df\n"
    f"CROSS APPLY sys.dm_os_volume_stats({tempdb_files.TEMPDB_ID}, df.file_id) AS vs;",
    requires=("tempdb.sys.database_files", "sys.dm_os_volume_stats"),
)

VOLUME = Label("volume", "a volume that holds tempdb files, as the tempdb file series name it")
SIZE_BYTES = MetricSpec(
    name="mssql_tempdb_volume_size_bytes",
    type="gauge",
    help="Size of a volume that holds tempdb files (sys.dm_os_volume_stats.total_bytes).",
    unit="bytes",
    source="`sys.dm_os_volume_stats(2, file_id)` `total_bytes` for tempdb's files, one series per volume",
    question="How large is each volume tempdb's files grow into? Read with every scrape.",
    labels=(VOLUME,),
    columns=("total_bytes",),
)
FREE_BYTES = MetricSpec(
    name="mssql_tempdb_volume_free_bytes",
    type="gauge",
    help="Free bytes of a volume that holds tempdb files (sys.dm_os_volume_stats.available_bytes).",
    unit="bytes",
    source="`sys.dm_os_volume_stats(2, file_id)` `available_bytes`",
    question="What can autogrowth of tempdb's files on this volume still take (other files on the volume "
    "take from it too)? Read with every scrape.",
    labels=(VOLUME,),
    columns=("available_bytes",),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    result = results.get(TAG)
    readings: dict[int, tuple[float, float]] = {}
    for row in result.rows if result is not None else []:
        file_id = number(row.get("file_id"), "file_id")
        total = number(row.get("total_bytes"), "total_bytes")
        available = number(row.get("available_bytes"), "available_bytes")
        if file_id is None:
            raise ImpossibleValue("sys.dm_os_volume_stats sent a row without file_id")
        if total is not None and available is not None:
            readings[int(file_id)] = (total, available)
    labels = tempdb_files.labels_of(results, ctx, sorted(readings))
    volumes: dict[str, tuple[float, float]] = {}
    for file_id, (total, available) in readings.items():
        where = labels.get(file_id)
        if where is None:
            continue
        # Files of one label on two file systems (a volume_map that joins them) give the one with the
        # least room: the headroom a rule computes from it is then never too high.
        seen = volumes.get(where["volume"])
        if seen is None or available < seen[1]:
            volumes[where["volume"]] = (total, available)
    for volume, (total, available) in sorted(volumes.items()):
        out.emit(SIZE_BYTES, total, {"volume": volume})
        out.emit(FREE_BYTES, available, {"volume": volume})


COLLECTOR = CollectorRecord(
    name="tempdb_volumes",
    sections=(TAG,),
    collect=collect,
    # The shared file list names and places its files (tempdb_files.labels_of).
    defines=(SECTION, files.FILES_SECTION),
    metrics=(SIZE_BYTES, FREE_BYTES),
)
