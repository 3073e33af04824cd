"""How SQL Server is told to use memory: max and min server memory, the memory model, and what it has
committed against its commit target.

`value_in_use` of sys.configurations is sql_variant, which FreeTDS cannot fetch: it is cast to bigint in
the SQL. max server memory is 2147483647 MB when nobody set it ("unlimited"); it is exported as it is,
so rules must not read "target below max server memory" as pressure while it has that value.

sql_memory_model_desc arrived with SQL Server 2016 SP1 (and 2012 SP4): its own optional section behind a
column check, so an older server simply lacks `mssql_memory_model_info`. committed_kb and
committed_target_kb come from the sys_info section's row (one read of sys.dm_os_sys_info).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from . import sys_info
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

CONFIG_TAG = "memory_config"
MODEL_TAG = "memory_model"
MIB = KIB * 1024.0
UNLIMITED_MB = 2147483647  # the default max server memory

MAX_SERVER_MEMORY = MetricSpec(
    name="mssql_config_max_server_memory_bytes",
    type="gauge",
    help="The max server memory setting in use, in bytes. 2147483647 MB (about 2 PiB) is the default and"
    " means no limit was set.",
    unit="bytes",
    source="`sys.configurations` `max server memory (MB)`, `CAST(value_in_use AS bigint)` \u00d7 1048576",
    question="What is SQL Server allowed to take? **2147483647 MB (about 2 PiB) is the default, "
    '"unlimited"**; it is exported as it is, so compare with physical memory, never read "target below max" '
    "as pressure while it has that value.",
)
MIN_SERVER_MEMORY = MetricSpec(
    name="mssql_config_min_server_memory_bytes",
    type="gauge",
    help="The min server memory setting in use, in bytes: SQL Server does not release memory below it once"
    " reached.",
    unit="bytes",
    source="`sys.configurations` `min server memory (MB)`, cast and \u00d7 1048576",
    question="Below what will SQL Server not shrink once it got there?",
)
MEMORY_MODEL = MetricSpec(
    name="mssql_memory_model_info",
    type="gauge",
    help="How SQL Server allocates memory: CONVENTIONAL, LOCK_PAGES or LARGE_PAGES; always 1.",
    unit="always 1",
    source="`sys.dm_os_sys_info` `sql_memory_model_desc` (SQL Server 2016 SP1 and later)",
    question="Can the OS page SQL Server's buffer pool out (CONVENTIONAL) or not (locked or large pages)?",
    labels=(Label("model", "`CONVENTIONAL`, `LOCK_PAGES`, `LARGE_PAGES`"),),
    conditional="before SQL Server 2016 SP1 (no such column)",
)
COMMITTED = MetricSpec(
    name="mssql_memory_committed_bytes",
    type="gauge",
    help="Memory the memory manager has committed.",
    unit="bytes",
    source="`sys.dm_os_sys_info` `committed_kb` \u00d7 1024",
    question="How much has the memory manager committed?",
)
COMMITTED_TARGET = MetricSpec(
    name="mssql_memory_committed_target_bytes",
    type="gauge",
    help="Memory the memory manager may commit: below committed it is shrinking, usually because the"
    " OS asked for memory back.",
    unit="bytes",
    source="`sys.dm_os_sys_info` `committed_target_kb` \u00d7 1024",
    question="How much may it commit? Below committed, SQL Server is shrinking, usually because the OS asked "
    "for memory back.",
)
SETTINGS = {"max server memory (MB)": MAX_SERVER_MEMORY, "min server memory (MB)": MIN_SERVER_MEMORY}

SECTIONS = (
    Section(
        tag=CONFIG_TAG,
        sql="SELECT N'memory_config' AS section, c.name, CAST(c.value_in_use AS bigint) AS value_in_use\n"
        "FROM sys.configurations AS c\nWHERE c.name IN ("
        + ", ".join(f"N'{name}'" for name in SETTINGS)
        + ");",
        requires=("sys.configurations",),
    ),
    Section(
        tag=MODEL_TAG,
        sql="SELECT N'memory_model' AS section, si.sql_memory_model_desc\nFROM sys.dm_os_sys_info AS si;",
        requires=("sys.dm_os_sys_info",),
        requires_columns=(("sys.dm_os_sys_info", "sql_memory_model_desc"),),
        optional=True,
    ),
)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    seen = {
        str(r.get("name") or "").strip().casefold(): r.get("value_in_use")
        for r in rows_of(results, CONFIG_TAG)
    }
    missing = []
    for name, spec in SETTINGS.items():
        value = number(seen.get(name.casefold()), name)
        if value is None:
            missing.append(name)
            continue
        out.emit(spec, value * MIB)
    if missing:
        raise MissingData(f"sys.configurations lacks {', '.join(repr(m) for m in missing)}")
    for row in rows_of(results, MODEL_TAG):
        model = row.get("sql_memory_model_desc")
        if model is not None:
            out.emit(MEMORY_MODEL, 1.0, {"model": str(model).strip()})
        break
    for row in rows_of(results, sys_info.TAG):
        for column, spec in (("committed_kb", COMMITTED), ("committed_target_kb", COMMITTED_TARGET)):
            value = number(row.get(column), column)
            if value is not None:
                out.emit(spec, value * KIB)
        break


COLLECTOR = CollectorRecord(
    name="memory_config",
    sections=(CONFIG_TAG, MODEL_TAG, sys_info.TAG),
    collect=collect,
    defines=SECTIONS,
    needs=("sys_info",),  # committed_kb and committed_target_kb come from its row
    metrics=(MAX_SERVER_MEMORY, MIN_SERVER_MEMORY, MEMORY_MODEL, COMMITTED, COMMITTED_TARGET),
)
