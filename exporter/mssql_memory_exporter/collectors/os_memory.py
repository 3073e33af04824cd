"""Memory as the operating system and the SQL Server process see it: is SQL Server short because the OS
took memory back (external pressure), or because its own workload outgrew it?

sys.dm_os_sys_memory is the machine (physical memory, the commit limit, Windows' high/low memory
signals); sys.dm_os_process_memory is the sqlservr process (what it holds in RAM, locked and large
pages, and the process-level low-memory flags SQL Server reacts to). Both report KB; exported in bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import (
    KIB,
    CollectorRecord,
    FamilyBuilder,
    MissingData,
    ScrapeContext,
    Section,
    SectionResult,
    number,
    rows_of,
)

SYS_TAG = "os_sys_memory"
PROCESS_TAG = "os_process_memory"

SECTIONS = (
    Section(
        tag=SYS_TAG,
        sql="SELECT N'os_sys_memory' AS section, sm.total_physical_memory_kb,"
        " sm.available_physical_memory_kb, sm.total_page_file_kb, sm.available_page_file_kb,"
        " CAST(sm.system_high_memory_signal_state AS int) AS system_high_memory_signal_state,"
        " CAST(sm.system_low_memory_signal_state AS int) AS system_low_memory_signal_state,"
        " sm.system_memory_state_desc\nFROM sys.dm_os_sys_memory AS sm;",
        requires=("sys.dm_os_sys_memory",),
    ),
    Section(
        tag=PROCESS_TAG,
        sql="SELECT N'os_process_memory' AS section, pm.physical_memory_in_use_kb,"
        " pm.locked_page_allocations_kb, pm.large_page_allocations_kb,"
        " pm.virtual_address_space_committed_kb, pm.memory_utilization_percentage,"
        " CAST(pm.process_physical_memory_low AS int) AS process_physical_memory_low,"
        " CAST(pm.process_virtual_memory_low AS int) AS process_virtual_memory_low\n"
        "FROM sys.dm_os_process_memory AS pm;",
        requires=("sys.dm_os_process_memory",),
    ),
)

# (column, metric, help); KB columns become bytes.
SYS_SIZES = (
    ("total_physical_memory_kb", "mssql_os_physical_memory_bytes", "Physical memory the OS has."),
    (
        "available_physical_memory_kb",
        "mssql_os_available_physical_memory_bytes",
        "Physical memory the OS has free now.",
    ),
    (
        "total_page_file_kb",
        "mssql_os_page_file_bytes",
        "The OS commit limit: physical memory plus page files (Windows); swap included on Linux.",
    ),
    (
        "available_page_file_kb",
        "mssql_os_available_page_file_bytes",
        "Commit limit not yet committed by any process.",
    ),
)
SYS_FLAGS = (
    (
        "system_high_memory_signal_state",
        "mssql_os_memory_high_signal",
        "1 while the OS signals plenty of free physical memory (SQL Server may grow).",
    ),
    (
        "system_low_memory_signal_state",
        "mssql_os_memory_low_signal",
        "1 while the OS signals low physical memory (SQL Server trims its caches: external pressure).",
    ),
)
# system_memory_state_desc as Microsoft documents it, by the state label it gets. A text we do not know
# (a later release rewording it) is "other", so the state set stays a fixed five series.
MEMORY_STATES = {
    "Available physical memory is high": "high",
    "Physical memory usage is steady": "steady",
    "Available physical memory is low": "low",
    "Physical memory state is transitioning": "transitioning",
}
STATE_LABELS = (*MEMORY_STATES.values(), "other")

PROCESS_SIZES = (
    (
        "physical_memory_in_use_kb",
        "mssql_process_physical_memory_bytes",
        "Physical memory the SQL Server process uses (working set plus locked and large pages).",
    ),
    (
        "locked_page_allocations_kb",
        "mssql_process_locked_pages_bytes",
        "Memory SQL Server holds as locked pages (Lock Pages in Memory): the OS cannot page it out.",
    ),
    (
        "large_page_allocations_kb",
        "mssql_process_large_pages_bytes",
        "Memory SQL Server holds as large pages.",
    ),
    (
        "virtual_address_space_committed_kb",
        "mssql_process_virtual_memory_committed_bytes",
        "Virtual address space the SQL Server process has committed.",
    ),
)
PROCESS_FLAGS = (
    (
        "process_physical_memory_low",
        "mssql_process_physical_memory_low",
        "1 while SQL Server sees its process short of physical memory (it shrinks: external pressure).",
    ),
    (
        "process_virtual_memory_low",
        "mssql_process_virtual_memory_low",
        "1 while SQL Server sees its process short of virtual address space.",
    ),
)


def _one_row(results: Mapping[str, SectionResult], tag: str) -> Mapping[str, object]:
    row = next(iter(rows_of(results, tag)), None)
    if row is None:
        raise MissingData(f"section {tag!r} sent no row")
    return row


def _number(row: Mapping[str, object], column: str) -> float | None:
    return number(row.get(column), column)


def collect(results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
    system = _one_row(results, SYS_TAG)
    process = _one_row(results, PROCESS_TAG)
    for row, sizes, flags in ((system, SYS_SIZES, SYS_FLAGS), (process, PROCESS_SIZES, PROCESS_FLAGS)):
        for column, metric, doc in sizes:
            if (value := _number(row, column)) is not None:
                out.gauge(metric, doc, value * KIB)
        for column, metric, doc in flags:
            if (value := _number(row, column)) is not None:
                out.gauge(metric, doc, 1.0 if value else 0.0)
    desc = system.get("system_memory_state_desc")
    if desc is not None:
        current = MEMORY_STATES.get(str(desc).strip(), "other")
        for state in STATE_LABELS:
            out.gauge(
                "mssql_os_memory_state",
                "The OS memory state SQL Server reports (sys.dm_os_sys_memory.system_memory_state_desc):"
                " 1 for the current state, 0 for the others.",
                1.0 if state == current else 0.0,
                {"state": state},
            )
    if (percent := _number(process, "memory_utilization_percentage")) is not None:
        out.gauge(
            "mssql_process_memory_utilization_ratio",
            "Share of SQL Server's committed memory that is in physical memory (0..1); below 1 the OS has"
            " paged part of it out.",
            percent / 100.0,
        )


COLLECTOR = CollectorRecord(
    name="os_memory",
    sections=(SYS_TAG, PROCESS_TAG),
    collect=collect,
    defines=SECTIONS,
)
