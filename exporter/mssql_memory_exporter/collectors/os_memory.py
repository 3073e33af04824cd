"""Memory as the operating system and the SQL Server process see it: is SQL Server short because the OS
took memory back (external pressure), or because its own workload outgrew it?

sys.dm_os_sys_memory is the machine (physical memory, the commit limit, Windows' high/low memory
signals); sys.dm_os_process_memory is the sqlservr process (what it holds in RAM, locked and large
pages, and the process-level low-memory flags SQL Server reacts to). Both report KB; exported in bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from .base import KIB, CollectorRecord, ScrapeContext, Section, SectionResult, number, rows_of

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

# system_memory_state_desc as Microsoft documents it, by the state label it gets. A text we do not know
# (a later release rewording it) is "other", so the state set stays a fixed five series.
MEMORY_STATES = {
    "Available physical memory is high": "high",
    "Physical memory usage is steady": "steady",
    "Available physical memory is low": "low",
    "Physical memory state is transitioning": "transitioning",
}
STATE_LABELS = (*MEMORY_STATES.values(), "other")

OS_PHYSICAL_MEMORY_BYTES = MetricSpec(
    name="mssql_os_physical_memory_bytes",
    type="gauge",
    help="Physical memory the OS has.",
    unit="bytes",
    source="`sys.dm_os_sys_memory` `total_physical_memory_kb` \u00d7 1024",
    question="How much RAM does the box have?",
)
OS_AVAILABLE_PHYSICAL_MEMORY_BYTES = MetricSpec(
    name="mssql_os_available_physical_memory_bytes",
    type="gauge",
    help="Physical memory the OS has free now.",
    unit="bytes",
    source="`sys.dm_os_sys_memory` `available_physical_memory_kb` \u00d7 1024",
    question="How much RAM is free for anyone right now? Low values with SQL Server not growing: something "
    "else holds it.",
)
OS_PAGE_FILE_BYTES = MetricSpec(
    name="mssql_os_page_file_bytes",
    type="gauge",
    help="The OS commit limit: physical memory plus page files (Windows); swap included on Linux.",
    unit="bytes",
    source="`sys.dm_os_sys_memory` `total_page_file_kb` (the OS commit limit: RAM plus page files) \u00d7 "
    "1024",
    question="How much can all processes commit?",
)
OS_AVAILABLE_PAGE_FILE_BYTES = MetricSpec(
    name="mssql_os_available_page_file_bytes",
    type="gauge",
    help="Commit limit not yet committed by any process.",
    unit="bytes",
    source="`sys.dm_os_sys_memory` `available_page_file_kb` \u00d7 1024",
    question="How close is the box to its commit limit?",
)
OS_MEMORY_HIGH_SIGNAL = MetricSpec(
    name="mssql_os_memory_high_signal",
    type="gauge",
    help="1 while the OS signals plenty of free physical memory (SQL Server may grow).",
    unit="0/1",
    source="`sys.dm_os_sys_memory` `system_high_memory_signal_state`",
    question="Does the OS say memory is plentiful (SQL Server may grow)?",
)
OS_MEMORY_LOW_SIGNAL = MetricSpec(
    name="mssql_os_memory_low_signal",
    type="gauge",
    help="1 while the OS signals low physical memory (SQL Server trims its caches: external pressure).",
    unit="0/1",
    source="`sys.dm_os_sys_memory` `system_low_memory_signal_state`",
    question="Does the OS say memory is low (SQL Server trims its caches)? 1 is external pressure.",
)
PROCESS_PHYSICAL_MEMORY_BYTES = MetricSpec(
    name="mssql_process_physical_memory_bytes",
    type="gauge",
    help="Physical memory the SQL Server process uses (working set plus locked and large pages).",
    unit="bytes",
    source="`sys.dm_os_process_memory` `physical_memory_in_use_kb` \u00d7 1024",
    question="How much RAM does SQL Server's process hold (working set plus locked and large pages)?",
)
PROCESS_LOCKED_PAGES_BYTES = MetricSpec(
    name="mssql_process_locked_pages_bytes",
    type="gauge",
    help="Memory SQL Server holds as locked pages (Lock Pages in Memory): the OS cannot page it out.",
    unit="bytes",
    source="`sys.dm_os_process_memory` `locked_page_allocations_kb` \u00d7 1024",
    question="How much of it is locked (Lock Pages in Memory), which the OS cannot page out?",
)
PROCESS_LARGE_PAGES_BYTES = MetricSpec(
    name="mssql_process_large_pages_bytes",
    type="gauge",
    help="Memory SQL Server holds as large pages.",
    unit="bytes",
    source="`sys.dm_os_process_memory` `large_page_allocations_kb` \u00d7 1024",
    question="How much is in large pages?",
)
PROCESS_VIRTUAL_MEMORY_COMMITTED_BYTES = MetricSpec(
    name="mssql_process_virtual_memory_committed_bytes",
    type="gauge",
    help="Virtual address space the SQL Server process has committed.",
    unit="bytes",
    source="`sys.dm_os_process_memory` `virtual_address_space_committed_kb` \u00d7 1024",
    question="How much has the process committed?",
)
PROCESS_PHYSICAL_MEMORY_LOW = MetricSpec(
    name="mssql_process_physical_memory_low",
    type="gauge",
    help="1 while SQL Server sees its process short of physical memory (it shrinks: external pressure).",
    unit="0/1",
    source="`sys.dm_os_process_memory` `process_physical_memory_low`",
    question="Does SQL Server see its process short of RAM? 1 is external pressure.",
)
PROCESS_VIRTUAL_MEMORY_LOW = MetricSpec(
    name="mssql_process_virtual_memory_low",
    type="gauge",
    help="1 while SQL Server sees its process short of virtual address space.",
    unit="0/1",
    source="`sys.dm_os_process_memory` `process_virtual_memory_low`",
    question="Is the process short of virtual address space?",
)
OS_MEMORY_STATE = MetricSpec(
    name="mssql_os_memory_state",
    type="gauge",
    help="The OS memory state SQL Server reports (sys.dm_os_sys_memory.system_memory_state_desc): 1 for "
    "the current state, 0 for the others.",
    unit="0/1",
    source="`sys.dm_os_sys_memory` `system_memory_state_desc`",
    question="The same as one state: 1 for the current one. The four documented texts map to the first four; "
    "any other text is `other`, so there are always exactly five series.",
    labels=(Label("state", "`high`, `steady`, `low`, `transitioning`, `other`"),),
)
PROCESS_MEMORY_UTILIZATION_RATIO = MetricSpec(
    name="mssql_process_memory_utilization_ratio",
    type="gauge",
    help="Share of SQL Server's committed memory that is in physical memory (0..1); below 1 the OS has "
    "paged part of it out.",
    unit="ratio 0..1",
    source="`sys.dm_os_process_memory` `memory_utilization_percentage` / 100",
    question="How much of what SQL Server committed is in RAM? Below 1, the OS paged part of SQL Server out.",
)
# (column, metric); KB columns become bytes.
SYS_SIZES = (
    ("total_physical_memory_kb", OS_PHYSICAL_MEMORY_BYTES),
    ("available_physical_memory_kb", OS_AVAILABLE_PHYSICAL_MEMORY_BYTES),
    ("total_page_file_kb", OS_PAGE_FILE_BYTES),
    ("available_page_file_kb", OS_AVAILABLE_PAGE_FILE_BYTES),
)
SYS_FLAGS = (
    ("system_high_memory_signal_state", OS_MEMORY_HIGH_SIGNAL),
    ("system_low_memory_signal_state", OS_MEMORY_LOW_SIGNAL),
)
PROCESS_SIZES = (
    ("physical_memory_in_use_kb", PROCESS_PHYSICAL_MEMORY_BYTES),
    ("locked_page_allocations_kb", PROCESS_LOCKED_PAGES_BYTES),
    ("large_page_allocations_kb", PROCESS_LARGE_PAGES_BYTES),
    ("virtual_address_space_committed_kb", PROCESS_VIRTUAL_MEMORY_COMMITTED_BYTES),
)
PROCESS_FLAGS = (
    ("process_physical_memory_low", PROCESS_PHYSICAL_MEMORY_LOW),
    ("process_virtual_memory_low", PROCESS_VIRTUAL_MEMORY_LOW),
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
        for column, spec in sizes:
            if (value := _number(row, column)) is not None:
                out.emit(spec, value * KIB)
        for column, spec in flags:
            if (value := _number(row, column)) is not None:
                out.emit(spec, 1.0 if value else 0.0)
    desc = system.get("system_memory_state_desc")
    if desc is not None:
        current = MEMORY_STATES.get(str(desc).strip(), "other")
        for state in STATE_LABELS:
            out.emit(OS_MEMORY_STATE, 1.0 if state == current else 0.0, {"state": state})
    if (percent := _number(process, "memory_utilization_percentage")) is not None:
        out.emit(PROCESS_MEMORY_UTILIZATION_RATIO, percent / 100.0)


COLLECTOR = CollectorRecord(
    name="os_memory",
    sections=(SYS_TAG, PROCESS_TAG),
    collect=collect,
    defines=SECTIONS,
    metrics=(
        *(spec for _, spec in SYS_SIZES + SYS_FLAGS),
        OS_MEMORY_STATE,
        *(spec for _, spec in PROCESS_SIZES),
        PROCESS_MEMORY_UTILIZATION_RATIO,
        *(spec for _, spec in PROCESS_FLAGS),
    ),
)
