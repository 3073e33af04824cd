"""Databases and their files in a scenario: sizes, paths, I/O rates, drops, and the DMVs built from them.

Scenario YAML:
  platform: linux | windows          # what sys.dm_os_volume_stats reports (NULL mount points on Linux)
  volumes: {"T:\\": "T:\\"}          # Windows: mount point of each directory prefix
  volume_lookup_fails: ["E:\\mnt\\"]  # sys.dm_os_volume_stats raises an OS error for files under these
  hybrid_buffer_pool: {configured: 1, enabled: 1}
  buffer_pool_extension: {path: "E:\\bpe.BPE", size_kb: 33554432}
  databases:
    - {id: 2, name: tempdb, hbp: true, drop_at: null, offline: [[30, 50]], files: [
        {id: 1, name: tempdev, path: /var/opt/mssql/tempdb/tempdb.mdf, type: 0, size_mb: 8192,
         write_mb_s: 99.4, read_mb_s: 60, write_stall_ms_per_s: 40, read_stall_ms_per_s: 20}]}
    - {generate: 5000, first_id: 5, name: "db{n}", dir: /var/opt/mssql/data,
       data: {size_mb: 64, write_mb_s: 0.01}, log: {size_mb: 16, write_mb_s: 0.005}}
tempdb's files also take growth settings and what they hold (the log: `log_used`, `log_reuse_wait`), and
the scenario the free space of their volumes (`volume_space`): see tempdb.py.
Rates are in MB/s (10^6 bytes); I/O counts assume 64 KiB per I/O, as for SQL Server's extent-sized I/O.
`hbp` is sys.databases.is_memory_optimized_enabled, 1 unless the scenario says otherwise: SQL Server
2019 and later create every database with the database-level Hybrid Buffer Pool switch on.

Dropped (`drop_at`) and offline (`offline`, intervals of scenario time) differ as on SQL Server: a dropped
database leaves every view; an offline one leaves sys.dm_io_virtual_file_stats (and volume lookups) but
stays in sys.master_files and sys.databases with state OFFLINE. Its counters start again from 0 when it
comes back online, unless `offline_keeps_counters: true` (then they carry on from where they stopped).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from .tempdb import PAGE, REUSE_WAITS, TEMPDB_ID, SpaceSpec, TempdbModel

MB = 1_000_000
IO_SIZE = 65536
# The hidden resource database: sys.dm_io_virtual_file_stats reports its two files on every instance,
# sys.master_files and sys.databases never list it. Read a little at start-up, never written.
RESOURCE_DATABASE_ID = 32767
RESOURCE_READ_BPS = 0.05 * MB


@dataclass(frozen=True)
class FileSpec:
    database_id: int
    file_id: int
    name: str
    path: str
    type: int  # 0 rows (data), 1 log
    size_pages: int  # 8 KiB pages, as sys.master_files.size
    write_bps: float
    read_bps: float
    write_stall_ms_per_s: float
    read_stall_ms_per_s: float
    space: SpaceSpec  # growth settings (and, in tempdb, what the file holds)


@dataclass(frozen=True)
class DatabaseSpec:
    database_id: int
    name: str
    files: tuple[FileSpec, ...]
    hbp: bool = True  # is_memory_optimized_enabled: on by default in 2019+
    drop_at: float | None = None
    created_at: float = 0.0
    offline: tuple[tuple[float, float], ...] = ()  # [from, to) intervals of scenario time
    offline_keeps_counters: bool = False

    def is_offline(self, now: float) -> bool:
        return any(start <= now < end for start, end in self.offline)

    def counting_seconds(self, now: float, since: float) -> float:
        """Seconds the file counters have been counting at `now`, for an instance started at `since`."""
        start = max(since, self.created_at)
        if not self.offline_keeps_counters:
            # Back online, the files are opened afresh: their counters start from 0 again.
            start = max([start, *(end for _, end in self.offline if end <= now)])
            return max(0.0, now - start)
        away = sum(max(0.0, min(end, now) - max(begin, start)) for begin, end in self.offline)
        return max(0.0, now - start - away)


def _file(db_id: int, raw: dict[str, Any]) -> FileSpec:
    return FileSpec(
        database_id=db_id,
        file_id=int(raw["id"]),
        name=str(raw["name"]),
        path=str(raw["path"]),
        type=int(raw.get("type", 0)),
        size_pages=int(float(raw.get("size_mb", 8)) * MB / 8192),
        write_bps=float(raw.get("write_mb_s", 0)) * MB,
        read_bps=float(raw.get("read_mb_s", 0)) * MB,
        write_stall_ms_per_s=float(raw.get("write_stall_ms_per_s", 0)),
        read_stall_ms_per_s=float(raw.get("read_stall_ms_per_s", 0)),
        space=SpaceSpec.parse(raw, f"file {raw['name']}"),
    )


def _generated(raw: dict[str, Any]) -> list[DatabaseSpec]:
    out = []
    directory = raw["dir"]
    sep = "\\" if "\\" in directory else "/"
    for n in range(int(raw["generate"])):
        db_id = int(raw.get("first_id", 5)) + n
        name = str(raw.get("name", "db{n}")).format(n=n)
        files = []
        for file_id, kind, ext in ((1, "data", "mdf"), (2, "log", "ldf")):
            spec = dict(raw.get(kind, {}))
            spec.update(
                id=file_id,
                name=f"{name}_{kind}",
                path=f"{directory}{sep}{name}.{ext}",
                type=0 if kind == "data" else 1,
            )
            files.append(_file(db_id, spec))
        out.append(DatabaseSpec(db_id, name, tuple(files), bool(raw.get("hbp", True)), raw.get("drop_at")))
    return out


def parse_databases(raw: list[dict[str, Any]] | None) -> list[DatabaseSpec]:
    out: list[DatabaseSpec] = []
    for entry in raw or []:
        if "generate" in entry:
            out += _generated(entry)
            continue
        db_id = int(entry["id"])
        files = tuple(_file(db_id, f) for f in entry.get("files", []))
        drop_at = entry.get("drop_at")
        out.append(
            DatabaseSpec(
                db_id,
                str(entry["name"]),
                files,
                bool(entry.get("hbp", True)),
                None if drop_at is None else float(drop_at),
                float(entry.get("created_at", 0)),
                tuple((float(a), float(b)) for a, b in entry.get("offline", [])),
                bool(entry.get("offline_keeps_counters", False)),
            )
        )
    return out


@dataclass
class FileModel:
    databases: list[DatabaseSpec]
    platform: str = "linux"
    volumes: dict[str, str] = field(default_factory=dict)
    hbp: dict[str, int] | None = None
    bpe: dict[str, Any] | None = None
    # Databases whose rows sys.master_files hides, as from a login without VIEW ANY DEFINITION.
    hidden_from_master_files: set[int] = field(default_factory=set)
    # Path prefixes whose volume sys.dm_os_volume_stats cannot read (an OS error for those files only).
    volume_lookup_fails: list[str] = field(default_factory=list)
    volume_space: dict[str, dict[str, float]] = field(default_factory=dict)  # by path prefix (tempdb.py)

    @property
    def tempdb(self) -> TempdbModel:
        cached = self.__dict__.get("_tempdb")
        tempdb = self._database(TEMPDB_ID)
        if cached is None or cached[0] is not tempdb:
            files = [
                (f.file_id, f.path, f.type, f.size_pages, f.space) for f in (tempdb.files if tempdb else ())
            ]
            cached = self.__dict__["_tempdb"] = (tempdb, TempdbModel(files, self.volume_space))
        return cached[1]

    def _tempdb_files(self, now: float) -> tuple[FileSpec, ...]:
        db = self._live(TEMPDB_ID, now)
        return db.files if db is not None else ()

    def tempdb_database_files(self, now: float, since: float) -> list[dict[str, object]]:
        """tempdb.sys.database_files: current sizes (grown since the start) and growth settings."""
        sizes = {f.file_id: f.size_pages for f in self.tempdb.space(now, since)}
        return [
            {
                "file_id": f.file_id,
                "type": f.type,
                "type_desc": "ROWS" if f.type == 0 else "LOG",
                "data_space_id": 1 if f.type == 0 else 0,
                "name": f.name,
                "physical_name": f.path,
                "state": 0,
                "state_desc": "ONLINE",
                "size": sizes[f.file_id],
                "max_size": f.space.max_size_pages,
                "growth": f.space.growth,
                "is_percent_growth": f.space.percent,
                "is_read_only": False,
                "is_sparse": False,
            }
            for f in self._tempdb_files(now)
        ]

    def tempdb_space_usage(self, now: float, since: float) -> list[dict[str, object]]:
        """tempdb.sys.dm_db_file_space_usage: one row per data file."""
        types = {f.file_id: f.type for f in self._tempdb_files(now)}
        rows = []
        for f in self.tempdb.space(now, since):
            if types.get(f.file_id) != 0:
                continue
            rows.append(
                {
                    "database_id": TEMPDB_ID,
                    "file_id": f.file_id,
                    "filegroup_id": 1,
                    "total_page_count": f.size_pages,
                    "allocated_extent_page_count": f.size_pages - f.unallocated_pages,
                    "unallocated_extent_page_count": f.unallocated_pages,
                    "version_store_reserved_page_count": f.held["version_store"],
                    "user_object_reserved_page_count": f.held["user_objects"],
                    "internal_object_reserved_page_count": f.held["internal_objects"],
                    "mixed_extent_page_count": f.held["mixed_extents"],
                }
            )
        return rows

    def tempdb_log_space(self, now: float, since: float) -> list[dict[str, object]]:
        """tempdb.sys.dm_db_log_space_usage: one row, every log file of tempdb combined."""
        logs = {f.file_id for f in self._tempdb_files(now) if f.type == 1}
        if not logs:
            return []
        space = [f for f in self.tempdb.space(now, since) if f.file_id in logs]
        total = sum(f.size_pages for f in space) * PAGE
        used = sum(f.log_used_pages for f in space) * PAGE
        return [
            {
                "database_id": TEMPDB_ID,
                "total_log_size_in_bytes": total,
                "used_log_space_in_bytes": used,
                "used_log_space_in_percent": used * 100.0 / total if total else 0.0,
                # tempdb is never backed up (SIMPLE recovery): the stand-in counts all of the log in use.
                # The exporter does not read this column.
                "log_space_in_bytes_since_last_backup": used,
            }
        ]

    def live(self, now: float) -> list[DatabaseSpec]:
        """Databases that exist, online or not: what the catalog views list."""
        return [d for d in self.databases if d.created_at <= now and (d.drop_at is None or d.drop_at > now)]

    def online(self, now: float) -> list[DatabaseSpec]:
        """Databases whose files are open: what the I/O functions report."""
        return [d for d in self.live(now) if not d.is_offline(now)]

    def virtual_file_stats(self, now: float, since: float) -> list[dict[str, object]]:
        up = max(0.0, now - since)
        rows = [
            {
                "database_id": RESOURCE_DATABASE_ID,
                "file_id": file_id,
                "num_of_writes": 0,
                "num_of_bytes_written": 0,
                "io_stall_write_ms": 0,
                "num_of_reads": int(RESOURCE_READ_BPS * up) // IO_SIZE,
                "num_of_bytes_read": int(RESOURCE_READ_BPS * up),
                "io_stall_read_ms": int(up),
                "io_stall": int(up),
                "size_on_disk_bytes": 64 * MB,
                "sample_ms": int(up * 1000),
            }
            for file_id in (1, 2)
        ]
        for db in self.online(now):
            elapsed = db.counting_seconds(now, since)
            for f in db.files:
                written = int(f.write_bps * elapsed)
                read = int(f.read_bps * elapsed)
                rows.append(
                    {
                        "database_id": f.database_id,
                        "file_id": f.file_id,
                        "num_of_writes": written // IO_SIZE,
                        "num_of_bytes_written": written,
                        "io_stall_write_ms": int(f.write_stall_ms_per_s * elapsed),
                        "num_of_reads": read // IO_SIZE,
                        "num_of_bytes_read": read,
                        "io_stall_read_ms": int(f.read_stall_ms_per_s * elapsed),
                        "io_stall": int((f.write_stall_ms_per_s + f.read_stall_ms_per_s) * elapsed),
                        "size_on_disk_bytes": f.size_pages * 8192,
                        "sample_ms": int(elapsed * 1000),
                    }
                )
        return rows

    def master_files(self, now: float) -> list[dict[str, object]]:
        return [
            {
                "database_id": f.database_id,
                "file_id": f.file_id,
                "name": f.name,
                "physical_name": f.path,
                "type": f.type,
                "type_desc": "ROWS" if f.type == 0 else "LOG",
                "size": f.size_pages,
                "state": 6 if db.is_offline(now) else 0,
                "state_desc": "OFFLINE" if db.is_offline(now) else "ONLINE",
            }
            for db in self.live(now)
            if db.database_id not in self.hidden_from_master_files
            for f in db.files
        ]

    def sys_databases(self, now: float) -> list[dict[str, object]]:
        return [
            {
                "database_id": d.database_id,
                "name": d.name,
                "state": 6 if d.is_offline(now) else 0,
                "state_desc": "OFFLINE" if d.is_offline(now) else "ONLINE",
                "is_memory_optimized_enabled": d.hbp,
                "log_reuse_wait": REUSE_WAITS[reuse_wait],
                "log_reuse_wait_desc": reuse_wait,
                # Azure SQL Database's own (catalog.yaml `platforms`): dropped where the server plays another.
                "catalog_collation_type": 0,
                "catalog_collation_type_desc": "DATABASE_DEFAULT",
            }
            for d in self.live(now)
            # tempdb's from its log file's spec; the stand-in's other databases wait on nothing.
            for reuse_wait in [self.tempdb.log_reuse_wait if d.database_id == TEMPDB_ID else "NOTHING"]
        ]

    def volume_lookup_fails_for(self, now: float, database_id: object, file_id: object) -> str | None:
        """The file's path if its volume lookup is to fail, else None."""
        for db in self.online(now):
            for f in db.files:
                if (f.database_id, f.file_id) == (database_id, file_id) and any(
                    f.path.lower().startswith(prefix.lower()) for prefix in self.volume_lookup_fails
                ):
                    return f.path
        return None

    def _database(self, database_id: object) -> DatabaseSpec | None:
        """A database by id, without a walk over thousands (the function is asked once per file)."""
        cached = self.__dict__.get("_by_id")
        if cached is None or cached[0] is not self.databases or cached[1] != len(self.databases):
            cached = (self.databases, len(self.databases), {d.database_id: d for d in self.databases})
            self.__dict__["_by_id"] = cached
        return cached[2].get(database_id)  # type: ignore[call-overload]

    def _live(self, database_id: int, now: float) -> DatabaseSpec | None:
        """The database if it exists at `now` (online or not), as live() has it."""
        db = self._database(database_id)
        if db is None or db.created_at > now or (db.drop_at is not None and db.drop_at <= now):
            return None
        return db

    def volume_stats(
        self, now: float, database_id: object, file_id: object, since: float = 0.0
    ) -> list[dict[str, object]]:
        db = self._live(database_id, now)  # type: ignore[arg-type]
        if db is not None and not db.is_offline(now):
            for f in db.files:
                if f.database_id == database_id and f.file_id == file_id:
                    mount = self._mount_of(f.path) if self.platform == "windows" else None
                    total, available = self.tempdb.volume_bytes(f.path, now, since)
                    return [
                        {
                            "database_id": f.database_id,
                            "file_id": f.file_id,
                            "volume_mount_point": mount,
                            "total_bytes": total,
                            "available_bytes": available,
                            "is_read_only": 0,
                        }
                    ]
        return []

    def _mount_of(self, path: str) -> str:
        best = ""
        for prefix in self.volumes:
            if path.lower().startswith(prefix.lower()) and len(prefix) > len(best):
                best = prefix
        if best:
            return self.volumes[best]
        return path[:3] if len(path) > 2 and path[1] == ":" else posixpath.dirname(path)
