"""What tempdb's data files hold, every scrape: a spill or a growing version store fills them in minutes.

tempdb.sys.dm_db_file_space_usage has one row per data file (the log is not in it). Its reserved page
counts do not overlap: pages in uniform extents of the version store, of user objects and of internal
objects (sorts, hashes, spools), pages in mixed extents, and pages in extents nobody holds. Together
they come to about the file's size; the small rest is allocation pages.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, ImpossibleValue
from ..metrics.declare import Label, MetricSpec
from . import files, tempdb_files
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number

TAG = "tempdb_usage"

SECTION = Section(
    tag=TAG,
    sql="SELECT N'tempdb_usage' AS section, su.file_id, su.unallocated_extent_page_count,"
    " su.version_store_reserved_page_count, su.user_object_reserved_page_count,"
    " su.internal_object_reserved_page_count, su.mixed_extent_page_count\n"
    "FROM tempdb.sys.dm_db_file_space_usage AS su;",
    requires=("tempdb.sys.dm_db_file_space_usage",),
)

# column -> the `usage` label
USAGES = (
    ("unallocated_extent_page_count", "unallocated"),
    ("version_store_reserved_page_count", "version_store"),
    ("user_object_reserved_page_count", "user_objects"),
    ("internal_object_reserved_page_count", "internal_objects"),
    ("mixed_extent_page_count", "mixed_extents"),
)

SPACE_BYTES = MetricSpec(
    name="mssql_tempdb_file_space_bytes",
    type="gauge",
    help="Bytes of this tempdb data file by what holds them (tempdb.sys.dm_db_file_space_usage):"
    " unallocated, version_store, user_objects, internal_objects, mixed_extents.",
    unit="bytes",
    source="`tempdb.sys.dm_db_file_space_usage`, one row per **data** file (the log is not in it), "
    "page counts \u00d7 8192",
    question="What fills tempdb's data files: free space, the version store, temporary tables, spills? Read "
    "with every scrape.",
    labels=(
        Label("file", "the logical name from `sys.master_files.name`"),
        Label("file_type", "always `data`"),
        Label("volume", "the volume the file lives on"),
        Label("usage", "one of the five in the table below"),
    ),
    columns=tuple(column for column, _ in USAGES),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    result = results.get(TAG)
    rows = result.rows if result is not None else []
    by_file = {}
    for row in rows:
        file_id = number(row.get("file_id"), "file_id")
        if file_id is None:
            raise ImpossibleValue("tempdb.sys.dm_db_file_space_usage sent a row without file_id")
        by_file[int(file_id)] = row
    labels = tempdb_files.labels_of(results, ctx, sorted(by_file))
    for file_id, row in sorted(by_file.items()):
        where = labels.get(file_id)
        if where is None:
            continue
        for column, usage in USAGES:
            pages = number(row.get(column), f"{column} of tempdb file {file_id}")
            if pages is None:
                continue  # NULL: not known, so absent rather than 0
            out.emit(SPACE_BYTES, pages * tempdb_files.PAGE_BYTES, {**where, "usage": usage})


COLLECTOR = CollectorRecord(
    name="tempdb_usage",
    sections=(TAG,),
    collect=collect,
    # The shared file list names and places its files (tempdb_files.labels_of).
    defines=(SECTION, files.FILES_SECTION),
    metrics=(SPACE_BYTES,),
)
