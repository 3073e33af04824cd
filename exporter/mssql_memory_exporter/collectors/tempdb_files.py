"""tempdb's files: their sizes now, their growth settings, and whether the layout follows the usual advice.

A full tempdb stops the whole instance, so rules need what the files can still take: the size now (read
every scrape: it moves when a spill makes tempdb autogrow), the maximum and the growth step (on the slow
cadence: they change only with ALTER DATABASE), and the size tempdb starts with (sys.master_files keeps
that one; tempdb.sys.database_files has the size now). Layout facts (file count, equal sizes, equal
growth, percent growth, the system volume) are exported as numbers a rule can turn into an info alert.

Names and volumes come from the shared file list (files.py), so these series carry the same `file` and
`volume` labels as the tempdb I/O counters.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ..metrics.builder import FamilyBuilder, ImpossibleValue, MissingData
from ..metrics.declare import Label, MetricSpec
from . import files
from .base import FORCE_SLOW, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

log = logging.getLogger(__name__)

TEMPDB_ID = 2
PAGE_BYTES = files.PAGE_BYTES
SIZES_TAG = "tempdb_sizes"
SETTINGS_TAG = "tempdb_settings"
SETTINGS_KEY = "tempdb_settings"
UNLIMITED = -1  # sys.database_files.max_size: grows until the disk is full
# The volume Windows itself lives on, by the default spelling of the system drive; POSIX: the root.
SYSTEM_VOLUMES = ("C:\\", "/")

SIZES = Section(
    tag=SIZES_TAG,
    sql="SELECT N'tempdb_sizes' AS section, df.file_id, df.type, df.size\n"
    "FROM tempdb.sys.database_files AS df;",
    requires=("tempdb.sys.database_files",),
)
SETTINGS = Section(
    tag=SETTINGS_TAG,
    sql="SELECT N'tempdb_settings' AS section, df.file_id, df.max_size, df.growth,"
    " CAST(df.is_percent_growth AS int) AS is_percent_growth\n"
    "FROM tempdb.sys.database_files AS df;",
    requires=("tempdb.sys.database_files",),
    slow=True,
)


@dataclass(frozen=True)
class Growth:
    """A file's autogrowth settings, as sys.database_files has them."""

    max_size: int  # pages; -1 unlimited, 0 no growth
    growth: int  # pages, or percent; 0 fixed size
    percent: bool


PER_FILE = (
    Label("file", "the logical name from `sys.master_files.name`"),
    Label("file_type", "`data` or `log`"),
    Label("volume", "the volume the file lives on"),
)
SETTINGS_UNREAD = "while a file's settings are not read yet (a file added since the last refresh)"


def _gauge(
    name: str,
    help: str,
    unit: str,
    source: str,
    question: str,
    labels: tuple[Label, ...] = (),
    conditional: str = "",
    columns: tuple[str, ...] = (),
) -> MetricSpec:
    return MetricSpec(name, "gauge", help, unit, source, question, labels, conditional, columns)


SIZE_BYTES = _gauge(
    "mssql_tempdb_file_size_bytes",
    "Size of this tempdb file now (tempdb.sys.database_files.size).",
    "bytes",
    "`tempdb.sys.database_files` `size` \u00d7 8192: data files and log; read with every scrape",
    "How large is each tempdb file now?",
    labels=PER_FILE,
    columns=("size",),
)
STARTUP_SIZE_BYTES = _gauge(
    "mssql_tempdb_file_startup_size_bytes",
    "Size this tempdb file is created with at start-up (sys.master_files.size).",
    "bytes",
    "`sys.master_files` `size` \u00d7 8192 of database 2; slow cadence",
    "What size is tempdb's file created with at the next start (`ALTER DATABASE tempdb MODIFY FILE (SIZE = "
    "\u2026)` sets it)?",
    labels=PER_FILE,
)
MAX_SIZE_UNLIMITED = _gauge(
    "mssql_tempdb_file_max_size_unlimited",
    "1 if this tempdb file may grow until its volume is full (max_size -1), 0 if it has a maximum.",
    "0/1",
    "`tempdb.sys.database_files` `max_size` = -1; slow cadence",
    "May the file grow until its volume is full (1), or has it a maximum (0)?",
    labels=PER_FILE,
    conditional=SETTINGS_UNREAD,
)
MAX_SIZE_BYTES = _gauge(
    "mssql_tempdb_file_max_size_bytes",
    "Largest size this tempdb file may grow to (0: no growth allowed); absent when unlimited.",
    "bytes",
    "`tempdb.sys.database_files` `max_size` \u00d7 8192; slow cadence",
    "How large may the file grow? 0 means no growth is allowed. A log file created with the defaults has "
    "268435456 pages (2 TiB).",
    labels=PER_FILE,
    conditional="when the maximum is unlimited (-1), and " + SETTINGS_UNREAD,
)
GROWTH_BYTES = _gauge(
    "mssql_tempdb_file_growth_bytes",
    "Bytes each autogrowth of this tempdb file adds (0: fixed size); absent for percent growth.",
    "bytes",
    "`tempdb.sys.database_files` `growth` \u00d7 8192 when `is_percent_growth` is 0; slow cadence",
    "What does each autogrowth add? **0: the file has a fixed size** and never grows.",
    labels=PER_FILE,
    conditional="for a file that grows by a percentage, and " + SETTINGS_UNREAD,
)
GROWTH_RATIO = _gauge(
    "mssql_tempdb_file_growth_ratio",
    "Each autogrowth of this tempdb file adds this share of its size; absent for a fixed step.",
    "ratio",
    "`tempdb.sys.database_files` `growth` / 100 when `is_percent_growth` is 1; slow cadence",
    "What share of the file's size does each autogrowth add then (0.1 for 10 %)?",
    labels=PER_FILE,
    conditional="for a file that grows by a fixed step, and " + SETTINGS_UNREAD,
)
DATA_FILES = _gauge(
    "mssql_tempdb_data_files",
    "Number of tempdb data files.",
    "files",
    "`tempdb.sys.database_files` rows of `type` 0; every scrape",
    "How many data files has tempdb? The usual advice is min(`mssql_logical_cpus`, 8), more in steps of "
    "four if allocation contention (`PAGELATCH_*` waits on tempdb) persists.",
)
EQUAL_SIZE = _gauge(
    "mssql_tempdb_data_files_equal_size",
    "1 if every tempdb data file has the same size now (proportional fill spreads evenly), else 0.",
    "0/1",
    "`tempdb.sys.database_files` `size` of the data files; every scrape",
    "Have all data files the same size now? Proportional fill allocates in proportion to each file's free "
    "space, so a larger file takes more of the allocations and of the allocation-page contention. 1 with a "
    "single file.",
)
EQUAL_GROWTH = _gauge(
    "mssql_tempdb_data_files_equal_growth",
    "1 if every tempdb data file has the same growth step, growth kind and maximum size, else 0.",
    "0/1",
    "`tempdb.sys.database_files` `growth`, `is_percent_growth`, `max_size` of the data files; slow cadence",
    "Do all data files grow alike (same step, same kind, same maximum)? Files that grow differently soon "
    "differ in size.",
    conditional=SETTINGS_UNREAD,
)
PERCENT_GROWTH_FILES = _gauge(
    "mssql_tempdb_percent_growth_files",
    "Number of tempdb files (data and log) that grow by a percentage of their size.",
    "files",
    "`tempdb.sys.database_files` `is_percent_growth` = 1, data **and** log; slow cadence",
    "How many tempdb files grow by a percentage?",
    conditional=SETTINGS_UNREAD,
)
SYSTEM_VOLUME_FILES = _gauge(
    "mssql_tempdb_system_volume_files",
    "Number of tempdb files (data and log) on the system volume (C:\\ on Windows, / elsewhere).",
    "files",
    "the files' `volume` labels: `C:\\` (the usual Windows system drive; a Windows installed on another "
    "drive is not recognised) or `/` (the root file system); with the file list",
    "How many tempdb files (data and log) sit on the system volume?",
    conditional="when the exporter cannot tell: a file's label is only its directory (SQL Server on Linux "
    "without `volume_map` or `colocated`), or a file has no label yet",
)


def labels_of(
    results: Mapping[str, SectionResult], ctx: ScrapeContext, file_ids: list[int]
) -> dict[int, dict[str, str]]:
    """`file`, `file_type` and `volume` of tempdb's files by file id: the files the shared list names and
    places. A file missing from it is new since its last refresh (asked for with the next scrape) and a
    file whose Windows volume lookup is still out is left out this scrape, as the tempdb I/O counters do."""
    cat = files.update(results, ctx)
    if not cat.refreshed:
        raise MissingData("file names not read yet")
    files.require_visible([(TEMPDB_ID, i) for i in file_ids], results, cat, ctx)
    out = {}
    for file_id in file_ids:
        f = cat.files.get((TEMPDB_ID, file_id))
        volume = cat.volume_of(f, ctx) if f is not None else None
        if f is not None and volume is not None:
            out[file_id] = {"file": f.name, "file_type": f.file_type, "volume": volume}
    return out


def _whole(value: object, what: str) -> int:
    got = number(value, what)
    if got is None:
        raise ImpossibleValue(f"{what} is NULL")
    return int(got)


def _settings(results: Mapping[str, SectionResult], ctx: ScrapeContext) -> dict[int, Growth]:
    """The growth settings, read on the slow cadence and kept between refreshes; a failed refresh keeps
    what the last one read."""
    result = results.get(SETTINGS_TAG)
    kept = ctx.memo.get(SETTINGS_KEY)
    if result is not None and result.error is None:
        read: dict[int, Growth] = {}
        for row in result.rows:
            file_id = _whole(row.get("file_id"), "file_id")
            max_size = _whole(row.get("max_size"), f"max_size of tempdb file {file_id}")
            growth = _whole(row.get("growth"), f"growth of tempdb file {file_id}")
            if max_size < UNLIMITED or growth < 0:
                raise ImpossibleValue(f"tempdb file {file_id}: max_size {max_size}, growth {growth}")
            read[file_id] = Growth(max_size, growth, bool(_whole(row.get("is_percent_growth"), "percent")))
        ctx.memo[SETTINGS_KEY] = kept = read
    elif result is not None and result.error is not None:
        why = f"{result.error.number}: {result.error.message}"
        if not isinstance(kept, dict):
            raise MissingData(f"tempdb growth settings not read: {why}")
        log.warning(
            "tempdb growth settings not refreshed; the last ones read are kept",
            extra={"target": ctx.target.name, "err": why},
        )
    if not isinstance(kept, dict):
        raise MissingData("tempdb growth settings not read yet")
    return kept


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    sizes: dict[int, tuple[int, int]] = {}  # file id -> (type, pages now)
    for row in rows_of(results, SIZES_TAG):
        file_id = _whole(row.get("file_id"), "file_id")
        sizes[file_id] = (_whole(row.get("type"), "type"), _whole(row.get("size"), "size"))
    settings = _settings(results, ctx)
    if set(sizes) - set(settings):
        ctx.memo[FORCE_SLOW] = True  # a file added since the last refresh: its settings come next scrape
    labels = labels_of(results, ctx, sorted(sizes))
    cat = files.catalog(ctx)
    for file_id, (_, pages) in sorted(sizes.items()):
        where = labels.get(file_id)
        if where is None:
            continue
        out.emit(
            SIZE_BYTES,
            pages * PAGE_BYTES,
            where,
        )
        known = cat.files.get((TEMPDB_ID, file_id))
        if known is not None:
            out.emit(
                STARTUP_SIZE_BYTES,
                known.size_bytes,
                where,
            )
        if file_id in settings:
            _growth_metrics(settings[file_id], where, out)
    _layout(sizes, settings, labels, cat, out)


def _growth_metrics(g: Growth, where: dict[str, str], out: FamilyBuilder) -> None:
    out.emit(
        MAX_SIZE_UNLIMITED,
        1.0 if g.max_size == UNLIMITED else 0.0,
        where,
    )
    if g.max_size != UNLIMITED:
        out.emit(
            MAX_SIZE_BYTES,
            g.max_size * PAGE_BYTES,
            where,
        )
    if g.percent:
        out.emit(
            GROWTH_RATIO,
            g.growth / 100.0,
            where,
        )
    else:
        out.emit(
            GROWTH_BYTES,
            g.growth * PAGE_BYTES,
            where,
        )


def _layout(
    sizes: dict[int, tuple[int, int]],
    settings: dict[int, Growth],
    labels: dict[int, dict[str, str]],
    cat: files.FileCatalog,
    out: FamilyBuilder,
) -> None:
    data = [file_id for file_id, (kind, _) in sizes.items() if kind == 0]
    out.emit(DATA_FILES, len(data))
    out.emit(
        EQUAL_SIZE,
        1.0 if len({sizes[i][1] for i in data}) <= 1 else 0.0,
    )
    if all(i in settings for i in data):
        out.emit(
            EQUAL_GROWTH,
            1.0 if len({settings[i] for i in data}) <= 1 else 0.0,
        )
    if all(i in settings for i in sizes):
        out.emit(
            PERCENT_GROWTH_FILES,
            sum(1 for i in sizes if settings[i].percent),
        )
    volumes = [labels[i]["volume"] for i in sizes if i in labels]
    # A label that is only a directory (SQL Server on Linux, no volume_map, not co-located) says nothing
    # about the file system under it, and a file without a label yet cannot be judged either.
    if len(volumes) == len(sizes) and not any(v in cat.directory_labels for v in volumes):
        out.emit(
            SYSTEM_VOLUME_FILES,
            sum(1 for v in volumes if v in SYSTEM_VOLUMES),
        )


COLLECTOR = CollectorRecord(
    name="tempdb_files",
    sections=(SIZES_TAG,),
    collect=collect,
    defines=(SIZES, SETTINGS, files.FILES_SECTION),
    metrics=(
        SIZE_BYTES,
        STARTUP_SIZE_BYTES,
        MAX_SIZE_UNLIMITED,
        MAX_SIZE_BYTES,
        GROWTH_BYTES,
        GROWTH_RATIO,
        DATA_FILES,
        EQUAL_SIZE,
        EQUAL_GROWTH,
        PERCENT_GROWTH_FILES,
        SYSTEM_VOLUME_FILES,
    ),
)
