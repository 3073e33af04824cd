"""The permission each SQL Server object the batch reads needs, declared once, and which objects each
collector reads, found in its sections' own SQL.

docs/permissions.md's per-collector and per-object tables are written from here
(`python -m generators.reference`), so a new collector that reads objects already listed
below needs no edit of the page or of this module: its row follows from its sections or the objects it
reads of a shared section (its perf object).
A collector reading an object not listed here fails the tests until the object's permission is added.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from mssql_memory_exporter.collectors import files
from mssql_memory_exporter.collectors.base import CollectorRecord, Section
from mssql_memory_exporter.connection.batch import shared_sections

VSS = "VIEW SERVER STATE"
VSPS = "VIEW SERVER PERFORMANCE STATE"
VAD = "VIEW ANY DEFINITION"

DMV_PAGES = "https://learn.microsoft.com/en-us/sql/relational-databases/system-dynamic-management-views/"
CATALOG_PAGES = "https://learn.microsoft.com/en-us/sql/relational-databases/system-catalog-views/"


@dataclass(frozen=True)
class ObjectPermission:
    """What a login needs to read one object. Empty permissions: none beyond what every login has."""

    name: str  # as the batch spells it: `sys.dm_os_wait_stats`, `tempdb.sys.database_files`
    before_2022: tuple[str, ...]  # SQL Server 2016-2019 and Azure SQL Managed Instance
    from_2022: tuple[str, ...]  # SQL Server 2022 and later
    page: str  # Microsoft's page the permission was read from ("" where none states it)
    note: str = ""  # what the page says beyond the names, or that it was not checked (markdown)


def _dmv(slug: str) -> str:
    return f"{DMV_PAGES}{slug}-transact-sql"


# Where the note says so, the page read (MicrosoftDocs/sql-docs, the version the search tool holds)
# states VIEW SERVER STATE and predates SQL Server 2022's finer permissions: the 2022 column then follows
# the 2022 pages of the sibling views (VIEW SERVER PERFORMANCE STATE) and is not checked on the page.
UNCHECKED_2022 = "its page states `VIEW SERVER STATE`; the version read has no SQL Server 2022 line"
OBJECTS: tuple[ObjectPermission, ...] = (
    ObjectPermission("sys.dm_os_sys_info", (VSS,), (VSPS,), _dmv("sys-dm-os-sys-info")),
    ObjectPermission(
        "sys.dm_os_performance_counters", (VSS,), (VSPS,), _dmv("sys-dm-os-performance-counters")
    ),
    ObjectPermission(
        "sys.dm_os_sys_memory",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-os-sys-memory"),
        UNCHECKED_2022,
    ),
    ObjectPermission(
        "sys.dm_os_process_memory",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-os-process-memory"),
        UNCHECKED_2022,
    ),
    ObjectPermission(
        "sys.configurations",
        (),
        (),
        f"{CATALOG_PAGES}sys-configurations-transact-sql",
        "membership in `public`, which every login has",
    ),
    ObjectPermission(
        "sys.dm_exec_query_resource_semaphores",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-exec-query-resource-semaphores"),
        UNCHECKED_2022,
    ),
    ObjectPermission(
        "sys.dm_os_memory_clerks",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-os-memory-clerks"),
        UNCHECKED_2022,
    ),
    ObjectPermission("sys.dm_os_wait_stats", (VSS,), (VSPS,), _dmv("sys-dm-os-wait-stats"), UNCHECKED_2022),
    ObjectPermission("sys.dm_io_virtual_file_stats", (VSS,), (VSPS,), _dmv("sys-dm-io-virtual-file-stats")),
    ObjectPermission(
        "sys.master_files",
        (VAD,),
        (VAD,),
        f"{CATALOG_PAGES}sys-master-files-transact-sql",
        "to see the rows of every database (or `CREATE DATABASE` or `ALTER ANY DATABASE`, which a "
        "monitoring login should not have); read every `volume_refresh_seconds`; "
        "[see below](#sysmaster_files-and-view-any-definition)",
    ),
    ObjectPermission(
        "sys.dm_os_volume_stats",
        (VSS,),
        (VSS,),
        _dmv("sys-dm-os-volume-stats"),
        "Microsoft names only `VIEW SERVER STATE`, also for 2022; for the file collectors asked only for "
        "Windows paths, once per directory; [see below](#volume-lookups-on-sql-server-2022)",
    ),
    ObjectPermission(
        "tempdb.sys.database_files",
        (),
        (),
        f"{CATALOG_PAGES}sys-database-files-transact-sql",
        "`public` in tempdb: every login is a guest there",
    ),
    ObjectPermission(
        "tempdb.sys.dm_db_file_space_usage",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-db-file-space-usage"),
        f"{UNCHECKED_2022}; [see below](#tempdb-views)",
    ),
    ObjectPermission(
        "tempdb.sys.dm_db_log_space_usage",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-db-log-space-usage"),
        "[see below](#tempdb-views)",
    ),
    # tempdb space resource governance and the persistent version store (tempdb_governance).
    ObjectPermission(
        "sys.dm_resource_governor_workload_groups",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-resource-governor-workload-groups"),
        "its tempdb columns are SQL Server 2025's",
    ),
    ObjectPermission(
        "sys.resource_governor_workload_groups",
        (VAD,),
        (VAD,),
        f"{CATALOG_PAGES}sys-resource-governor-workload-groups-transact-sql",
        "its tempdb limit columns are SQL Server 2025's; not on Azure SQL Database",
    ),
    ObjectPermission(
        "sys.resource_governor_configuration",
        (VAD,),
        (VAD,),
        f"{CATALOG_PAGES}sys-resource-governor-configuration-transact-sql",
        "read on SQL Server 2025 only (with the limits); not on Azure SQL Database",
    ),
    ObjectPermission(
        "sys.dm_tran_persistent_version_store_stats",
        (VSS,),
        (VSPS,),
        DMV_PAGES + "sys-dm-tran-persistent-version-store-stats",
        "2019 and later; the page names `VIEW SERVER PERFORMANCE STATE` on SQL Server and Managed Instance "
        "and no 2019-specific permission (`VIEW SERVER STATE` assumed there, as for the other DMVs)",
    ),
    # SQL Server 2025's memory health view (memory_health).
    ObjectPermission(
        "sys.dm_os_memory_health_history",
        (VSPS,),
        (VSPS,),
        DMV_PAGES + "sys-dm-os-memory-health-history",
        "SQL Server 2025, and Managed Instance only under the SQL Server 2025 or Always-up-to-date update "
        "policy (elsewhere the view is missing and the collector is left out); the page names `VIEW SERVER "
        "PERFORMANCE STATE` on SQL Server and Managed Instance, and on Azure SQL Database `VIEW DATABASE "
        "PERFORMANCE STATE` or `##MS_ServerPerformanceStateReader##` (Basic, S0, S1 and elastic pools: the "
        "server admin, the Microsoft Entra admin or that role)",
    ),
    ObjectPermission(
        "sys.databases",
        (),
        (),
        f"{CATALOG_PAGES}sys-databases-transact-sql",
        "every login sees master's and tempdb's rows; other databases' rows need `VIEW ANY DATABASE`, "
        "which `public` holds by default; [see below](#hybrid-buffer-pool-views)",
    ),
    ObjectPermission(
        "sys.dm_os_buffer_pool_extension_configuration",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-os-buffer-pool-extension-configuration"),
    ),
    ObjectPermission(
        "sys.server_memory_optimized_hybrid_buffer_pool_configuration",
        (),
        (),
        "https://learn.microsoft.com/en-us/sql/database-engine/configure-windows/hybrid-buffer-pool",
        "not documented (2019 and later); [see below](#hybrid-buffer-pool-views)",
    ),
    ObjectPermission(
        "sys.dm_hadr_availability_replica_states",
        (VSS,),
        (VSS,),
        _dmv("sys-dm-hadr-availability-replica-states"),
        "own rows only; Microsoft's pages name no finer permission for 2022 (not verified on 2022)",
    ),
    ObjectPermission(
        "sys.dm_hadr_database_replica_states",
        (VSS,),
        (VSS,),
        _dmv("sys-dm-hadr-database-replica-states"),
        "own rows only; Microsoft's pages name no finer permission for 2022 (not verified on 2022)",
    ),
    ObjectPermission(
        "sys.dm_os_ring_buffers",
        (VSS,),
        (VSPS,),
        "https://techcommunity.microsoft.com/blog/sqlserversupport/how-it-works-what-are-the-ring-buffer-resource-monitor-telling-me/315837",
        "undocumented: no reference page states a permission; it answers what the other sys.dm_os_* views"
        " need, and a login without it gets Msg 300 for this collector alone",
    ),
    ObjectPermission(
        "sys.dm_hadr_availability_group_states",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-hadr-availability-group-states"),
    ),
    ObjectPermission(
        "sys.dm_hadr_database_replica_cluster_states",
        (VSS,),
        (VSPS,),
        _dmv("sys-dm-hadr-database-replica-cluster-states"),
        UNCHECKED_2022 + "; SQL Server only (not Managed Instance)",
    ),
    ObjectPermission(
        "sys.availability_groups", (VAD,), (VAD,), f"{CATALOG_PAGES}sys-availability-groups-transact-sql"
    ),
    ObjectPermission(
        "sys.availability_replicas",
        (VAD,),
        (VAD,),
        f"{CATALOG_PAGES}sys-availability-replicas-transact-sql",
    ),
)
BY_NAME = {o.name: o for o in OBJECTS}

# Objects named in a section's SQL: `sys.x`, `tempdb.sys.x` (functions such as SERVERPROPERTY need none).
_OBJECT = re.compile(r"\b(?:tempdb\.)?sys\.(?!sp_)\w+", re.I)


def objects_in(section: Section) -> tuple[str, ...]:
    """The objects a section reads, in the order its SQL names them (each once)."""
    return tuple(dict.fromkeys(m.group(0) for m in _OBJECT.finditer(section.sql)))


# The volume lookups files.py adds on its own for Windows paths: read by whoever brings the file list.
VOLUME_LOOKUP = files.volume_lookup(0, 0)


def sections_read(
    record: CollectorRecord, collectors: Iterable[CollectorRecord], *, lookups: bool = True
) -> list[Section]:
    """The sections a collector's metrics depend on: the ones it brings, the ones it reads that another
    brings, its perf object's, and (with `lookups`) the volume lookups that come with the file list."""
    brought = {s.tag: s for c in collectors for s in c.defines}
    wanted = {s.tag: s for s in record.defines}
    for tag in record.sections:
        if tag in brought:
            wanted.setdefault(tag, brought[tag])
    wanted.update(shared_sections(record.reads))
    if lookups and files.FILES_TAG in wanted:
        wanted[files.VOLUMES_TAG] = VOLUME_LOOKUP
    return list(wanted.values())


def objects_read(
    record: CollectorRecord,
    collectors: Iterable[CollectorRecord],
    *,
    lookups: bool = True,
    needed: bool = True,
) -> tuple[str, ...]:
    """Every object the collector's sections read, and (with `needed`) those of the collectors it needs.
    Without `lookups`, what its metrics depend on: a refused volume lookup only leaves a label at its
    drive root."""
    collectors = tuple(collectors)
    by_name = {c.name: c for c in collectors}
    found: dict[str, None] = {}
    for section in sections_read(record, collectors, lookups=lookups):
        found.update(dict.fromkeys(objects_in(section)))
    for name in record.needs if needed else ():
        found.update(dict.fromkeys(objects_read(by_name[name], collectors, lookups=lookups)))
    return tuple(found)


def label_lookups(record: CollectorRecord, collectors: Iterable[CollectorRecord]) -> tuple[str, ...]:
    """Objects the collector reads only for the volume label of Windows paths (files.py's lookups)."""
    collectors = tuple(collectors)
    needed = set(objects_read(record, collectors, lookups=False))
    return tuple(o for o in objects_read(record, collectors) if o not in needed)


def needing(permission: str, collectors: Iterable[CollectorRecord], *, from_2022: bool = False) -> list[str]:
    """The collectors that fail or lose series without `permission` (label lookups left out)."""
    collectors = tuple(collectors)
    names = []
    for record in collectors:
        needs = [BY_NAME[o] for o in objects_read(record, collectors, lookups=False) if o in BY_NAME]
        if any(permission in (n.from_2022 if from_2022 else n.before_2022) for n in needs):
            names.append(record.name)
    return names


def undeclared(collectors: Iterable[CollectorRecord]) -> dict[str, list[str]]:
    """Objects a collector reads that have no permission declared above, by collector."""
    collectors = tuple(collectors)
    missing = {c.name: [o for o in objects_read(c, collectors) if o not in BY_NAME] for c in collectors}
    return {name: objs for name, objs in missing.items() if objs}
