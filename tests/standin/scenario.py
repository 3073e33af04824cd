"""Scenarios: what the stand-in SQL Server reports, as functions of time.

Every scenario file extends `scenarios/base.yml` and states only what it changes; how files inherit
(`extends:`, `delete:`, which mappings merge) is in scenario_files.py.

A scenario file (YAML) names the server's properties, its NUMA nodes and, per perf object, each counter
as one of:
  - a number, or {gauge: v}                   a raw value (cntr_type 65792)
  - {gauge: v, steps: [[t, v2], ...]}         a value that changes at scenario time t
  - {rate: r}  (optionally steps of rates)    a cumulative "/sec" counter (cntr_type 272696576) that
                                              grows by r per second and restarts from 0 on a restart
  - {fraction: f}                             a ratio and its base row (537003264 / 1073939712)
  - any of the above with cntr_type: N        to imitate a server that types a counter differently
  - {instances: {name: spec, ...}}            one row (or row pair) per named counter instance, as the
                                              Plan Cache object's `SQL Plans`, `Bound Trees`, `_Total`
Under "Buffer Node" and "Memory Node", a list gives one spec per node; a single spec applies to every
node. When the scenario gives no Buffer Manager page life expectancy, it is the harmonic mean of the
nodes', as in SQL Server.

`views:` gives the rows of the DMVs that are not performance counters, by view name without `sys.`
(dm_os_sys_memory, dm_os_process_memory, configurations, dm_exec_query_resource_semaphores,
dm_os_memory_clerks, dm_os_wait_stats; for dm_os_sys_info, columns added to the row the stand-in
computes). A mapping is one row, a list is many. The keyed views (KEYED_VIEWS: dm_os_memory_clerks by
`type`, dm_os_wait_stats by `wait_type`) are mappings from that key to one row or a list of rows (a clerk
type has one clerk per memory node), so a scenario that extends another changes or deletes one clerk type
or wait type and keeps the rest;
each column is a literal (number, text, null) or a counter spec as above ({gauge:, steps:} or {rate:},
which grows with time and restarts from 0). Columns the catalog says the scenario's ProductVersion
or platform (EngineEdition) lacks are dropped from the rows, as that server would not have them.

A view cell's `steps` may name a moment instead of a time: `role: {gauge: 1, steps: [[failover, 2]]}`
with `moments: {failover: 300}` at the top. The moment happens at that scenario time unless something
brings it forward (`Instance.reach`, which a schedule calls: schedule.py `--moment failover@40`), so a
test can fail an availability group over when its own conditions are met instead of at a fixed second.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from .files import FileModel, parse_databases
from .moments import at_moments, check_moments
from .scenario_files import read_scenario, scenario_path
from .sql_catalog import Catalog, available, load_catalog, release_of
from .tds import Column, ResultSet

RAW, BULK, FRACTION, FRACTION_BASE = 65792, 272696576, 537003264, 1073939712
NCHAR = 128
BOOT_UPTIME_SECONDS = 86_400.0  # the OS had been up a day when the scenario starts: ms_ticks never start at 0


class Clock:
    """Scenario time in seconds. Real time by default; tests drive a manual clock for exact rates."""

    def __init__(self, manual: bool = False) -> None:
        self._manual = manual
        self._origin = time.monotonic()
        self._manual_now = 0.0
        self.wall_origin = time.time()

    def now(self) -> float:
        return self._manual_now if self._manual else time.monotonic() - self._origin

    def advance(self, seconds: float) -> None:
        if not self._manual:
            raise RuntimeError("only a manual clock can be advanced")
        self._manual_now += seconds

    def utcnow(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.wall_origin + self.now(), tz=dt.UTC).replace(tzinfo=None)


def _steps(spec: Mapping[str, Any], key: str) -> list[tuple[float, float]]:
    points = [(0.0, float(spec[key]))]
    points += [(float(t), float(v)) for t, v in spec.get("steps", [])]
    return sorted(points)


@dataclass(frozen=True)
class CounterSpec:
    kind: str  # gauge | rate | fraction
    points: tuple[tuple[float, float], ...]  # (scenario time, value or rate)
    cntr_type: int | None = None

    @classmethod
    def parse(cls, raw: Any, where: str) -> CounterSpec:
        if isinstance(raw, int | float):
            return cls("gauge", ((0.0, float(raw)),))
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: expected a number or a mapping, got {raw!r}")
        kinds = [k for k in ("gauge", "rate", "fraction") if k in raw]
        if len(kinds) != 1:
            raise ValueError(f"{where}: give exactly one of gauge, rate, fraction")
        return cls(kinds[0], tuple(_steps(raw, kinds[0])), raw.get("cntr_type"))

    def at(self, now: float, since: float) -> float:
        """Value at scenario time `now` for an instance (re)started at `since`."""
        if self.kind != "rate":
            value = self.points[0][1]
            for t, v in self.points:
                if t <= now:
                    value = v
            return value
        total = 0.0
        for i, (t, rate) in enumerate(self.points):
            end = self.points[i + 1][0] if i + 1 < len(self.points) else now
            lo, hi = max(t, since), min(end, now)
            if hi > lo:
                total += rate * (hi - lo)
        return total


@dataclass
class Scenario:
    name: str
    description: str
    properties: dict[str, object]
    object_prefix: str
    pad: bool
    numa_nodes: int
    counters: dict[str, dict[str, CounterSpec | list[CounterSpec] | dict[str, CounterSpec]]]
    restarts: list[float] = field(default_factory=list)
    uptime_seconds: float = 0.0  # how long the instance had been up when the scenario starts
    # other objects a real server reports too, so the exporter's filter is exercised
    noise: dict[str, list[str]] = field(default_factory=dict)
    files: FileModel = field(default_factory=lambda: FileModel([]))
    workload: str = "oltp"  # what the server runs: the `workload` a target config for it should set
    views: dict[str, Any] = field(default_factory=dict)  # DMV rows by view name without "sys."
    # Named scenario times that view cells' steps may use (`[[failover, 2]]`); Instance.reach moves them.
    moments: dict[str, float] = field(default_factory=dict)
    # Answers to a site's own queries (custom collectors), by name: {sql, reads, columns, rows}. A query
    # the interpreter cannot run (joins, msdb) is answered only when its text is one of these.
    custom_queries: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, name_or_path: str | Path) -> Scenario:
        path = scenario_path(name_or_path)
        raw = read_scenario(path)
        counters: dict[str, dict[str, CounterSpec | list[CounterSpec] | dict[str, CounterSpec]]] = {}
        for obj, specs in raw.get("counters", {}).items():
            counters[obj] = {}
            for counter, spec in specs.items():
                where = f"{path.name}: counters.{obj}.{counter}"
                if isinstance(spec, dict) and "instances" in spec:
                    counters[obj][counter] = _named_instances(spec, where)
                elif isinstance(spec, list):
                    counters[obj][counter] = [CounterSpec.parse(s, where) for s in spec]
                else:
                    counters[obj][counter] = CounterSpec.parse(spec, where)
        server = raw.get("server", {})
        moments = {str(k): float(v) for k, v in (raw.get("moments") or {}).items()}
        views = dict(raw.get("views", {}))
        check_moments(views, moments, path.name)
        return cls(
            name=raw.get("name", path.stem),
            description=raw.get("description", ""),
            properties=dict(server.get("properties", {})),
            object_prefix=server.get("object_prefix", "SQLServer:"),
            pad=bool(server.get("pad", True)),
            numa_nodes=int(raw.get("numa_nodes", 1)),
            counters=counters,
            restarts=[float(t) for t in raw.get("restarts", [])],
            uptime_seconds=float(server.get("uptime_seconds", 0)),
            noise={k: list(v) for k, v in raw.get("noise", DEFAULT_NOISE).items()},
            files=FileModel(
                parse_databases(raw.get("databases", DEFAULT_DATABASES)),
                platform=str(raw.get("platform", "linux")),
                volumes=dict(raw.get("volumes", {})),
                volume_lookup_fails=list(raw.get("volume_lookup_fails", [])),
                volume_space=dict(raw.get("volume_space", {})),
                hbp=raw.get("hybrid_buffer_pool"),
                bpe=raw.get("buffer_pool_extension"),
            ),
            workload=str(raw.get("workload", "oltp")),
            views=views,
            moments=moments,
            custom_queries=_custom_queries(raw.get("custom_queries") or {}, path.name),
        )


def _custom_queries(raw: Any, where: str) -> dict[str, Any]:
    """`custom_queries:` checked: each {sql, columns, rows, reads?}, rows lists as long as columns."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: custom_queries must map names to {{sql, columns, rows}}")
    for name, spec in raw.items():
        if isinstance(spec, dict) and "shipped" in spec:
            # The query of a collector file shipped with the exporter, read from that file: typed once.
            spec = raw[name] = {
                **{k: v for k, v in spec.items() if k != "shipped"},
                "sql": _shipped(spec["shipped"]),
            }
        extra = sorted(set(spec) - {"sql", "columns", "rows", "reads"}) if isinstance(spec, dict) else ["?"]
        if extra or not isinstance(spec.get("sql"), str) or not isinstance(spec.get("columns"), list):
            raise ValueError(f"{where}: custom_queries.{name}: give sql (text), columns (list), rows, reads")
        for index, row in enumerate(spec.get("rows") or []):
            if not isinstance(row, list) or len(row) != len(spec["columns"]):
                raise ValueError(f"{where}: custom_queries.{name}.rows.{index}: one value per column")
    return dict(raw)


def _shipped(name: str) -> str:
    import mssql_memory_exporter

    path = Path(mssql_memory_exporter.__file__).parent / "collectors" / "shipped" / f"{name}.yml"
    collectors = yaml.safe_load(path.read_text())["collectors"]
    return str(collectors[0]["query"]).strip()


def _normal_sql(sql: str) -> str:
    return " ".join(sql.split())


def _named_instances(spec: dict[str, Any], where: str) -> dict[str, CounterSpec]:
    """`{instances: {name: spec}}`: a counter reported once per named instance (SQL Server's instance_name
    column), e.g. the Plan Cache object's cache types and their `_Total`."""
    extra = sorted(set(spec) - {"instances"})
    instances = spec["instances"]
    if extra or not isinstance(instances, dict) or not instances:
        raise ValueError(f"{where}: instances must be the only key, mapping instance names to counter specs")
    named: dict[str, CounterSpec] = {}
    for name, raw in instances.items():
        if not isinstance(name, str) or not name.strip() or len(name) > NCHAR:
            raise ValueError(f"{where}: instance name {name!r} must be non-empty text of at most {NCHAR}")
        named[name] = CounterSpec.parse(raw, f"{where}.instances.{name}")
    return named


# A handful of the ~1,500 rows a real server has in objects the exporter does not read.
DEFAULT_NOISE = {
    "General Statistics": ["User Connections", "Logins/sec", "Processes blocked"],
    "Locks": ["Lock Requests/sec", "Lock Waits/sec"],
    "Buffer Manager": [],
    "Memory Manager": ["External benefit of memory", "Lock Blocks", "Lock Owner Blocks"],
    "SQL Statistics": ["Auto-Param Attempts/sec", "Safe Auto-Params/sec"],
    "Access Methods": ["Full Scans/sec", "Page Splits/sec"],
}


# Every instance has the system databases; tempdb is written a little even when idle.
DEFAULT_DATABASES = [
    {
        "id": 1,
        "name": "master",
        "files": [
            {
                "id": 1,
                "name": "master",
                "path": "/var/opt/mssql/data/master.mdf",
                "type": 0,
                "size_mb": 8,
                "write_mb_s": 0.01,
            },
            {
                "id": 2,
                "name": "mastlog",
                "path": "/var/opt/mssql/data/mastlog.ldf",
                "type": 1,
                "size_mb": 2,
                "write_mb_s": 0.01,
            },
        ],
    },
    {
        "id": 2,
        "name": "tempdb",
        "files": [
            {
                "id": 1,
                "name": "tempdev",
                "path": "/var/opt/mssql/data/tempdb.mdf",
                "type": 0,
                "size_mb": 8,
                "write_mb_s": 0.5,
                # a little of everything, well inside the 8 MB (tests/standin/tempdb.py)
                "usage": {"version_store": 1, "user_objects": 2, "internal_objects": 1, "mixed_extents": 0.5},
            },
            {
                "id": 2,
                "name": "templog",
                "path": "/var/opt/mssql/data/templog.ldf",
                "type": 1,
                "size_mb": 8,
                "write_mb_s": 0.2,
                "max_size_mb": 268435456 * 8192 / 1e6,  # SQL Server's default for a log: 2 TiB
                "log_used": 2,  # a quarter of the 8 MB log, truncated at every checkpoint
            },
        ],
    },
]


# What SQL Server says when a login may not read a view, by error number.
DENIAL_MESSAGES = {
    # The login lacks VIEW SERVER STATE (or VIEW SERVER PERFORMANCE STATE on 2022).
    300: "VIEW SERVER STATE permission was denied on object 'server', database 'master'.",
    # An explicit DENY SELECT on the view; system views live in the resource database, schema sys.
    229: (
        "The SELECT permission was denied on the object '{object}', database 'mssqlsystemresource',"
        " schema 'sys'."
    ),
    297: "The user does not have permission to perform this action.",
}


class Denials(dict[str, int]):
    """Denied objects and the error number each answers with: `add(name)` denies with 300 like the
    earlier set did, `add(name, 229)` as an explicit DENY would; `discard(name)` lifts it."""

    def add(self, name: str, error: int = 300) -> None:
        if error not in DENIAL_MESSAGES:
            raise ValueError(f"no denial message for error {error}; known: {sorted(DENIAL_MESSAGES)}")
        self[name] = error

    def discard(self, name: str) -> None:
        self.pop(name, None)


class Instance:
    """A running stand-in instance playing a scenario: restarts, denied objects, the DMV rows."""

    # Views whose rows come straight from the scenario's `views:`.
    SCENARIO_VIEWS = (
        "sys.dm_os_sys_memory",
        "sys.dm_os_process_memory",
        "sys.configurations",
        "sys.dm_exec_query_resource_semaphores",
        "sys.dm_os_memory_clerks",
        "sys.dm_os_wait_stats",
        # Always On: rows only in a scenario that plays a replica; every other server answers none.
        "sys.dm_hadr_availability_replica_states",
        "sys.dm_hadr_database_replica_states",
        "sys.availability_groups",
        "sys.availability_replicas",
        # SQL Server 2025's tempdb space governance, and the persistent version store (rows only where a
        # scenario gives them).
        "sys.dm_resource_governor_workload_groups",
        "sys.resource_governor_workload_groups",
        "sys.resource_governor_configuration",
        "sys.dm_tran_persistent_version_store_stats",
    )
    # SQL Server 2025's memory health snapshots (memory_health_rows): generated every 15 s from the
    # scenario's column specs, or the scenario's literal rows.
    MEMORY_HEALTH_VIEW = "sys.dm_os_memory_health_history"
    OBJECTS = (
        "sys.dm_os_performance_counters",
        "sys.dm_os_sys_info",
        "sys.dm_io_virtual_file_stats",
        "sys.master_files",
        "sys.databases",
        "sys.dm_os_volume_stats",
        "sys.dm_os_buffer_pool_extension_configuration",
        # tempdb's own views, by three-part name from any database (the exporter's session is in master).
        "tempdb.sys.database_files",
        "tempdb.sys.dm_db_file_space_usage",
        "tempdb.sys.dm_db_log_space_usage",
        *SCENARIO_VIEWS,
        MEMORY_HEALTH_VIEW,
    )
    # Views written as a mapping from one column's value to that value's row(s); the key becomes the column.
    KEYED_VIEWS: ClassVar[Mapping[str, str]] = {
        "sys.dm_os_memory_clerks": "type",
        "sys.dm_os_wait_stats": "wait_type",
    }
    HBP_VIEW = "sys.server_memory_optimized_hybrid_buffer_pool_configuration"

    def __init__(self, scenario: Scenario, clock: Clock | None = None) -> None:
        self.scenario = scenario
        self.clock = clock or Clock()
        self._lock = threading.Lock()
        self._started_at = -scenario.uptime_seconds  # scenario time of the last (re)start
        self._scheduled = sorted(scenario.restarts)
        self.denied = Denials()
        self.missing: set[str] = set()
        self.moments = dict(scenario.moments)  # this instance's copy: reach() moves its moments only
        # Servers playing this instance register here (StandInServer.start) so a restart can end their
        # sessions.
        self.session_droppers: list[Callable[[], None]] = []

    # restarts ------------------------------------------------------------
    def restart(self, drop_sessions: bool = False) -> None:
        """Start the instance over. By default only the start time moves and open sessions live on,
        which keeps counter tests simple; `drop_sessions=True` also closes every client connection, as
        a real restart, failover or session kill does."""
        with self._lock:
            self._started_at = self.clock.now()
        if drop_sessions:
            for drop in list(self.session_droppers):
                drop()

    def reach(self, moment: str) -> bool:
        """The scenario's named moment (say `failover`) happens now, if it has not happened yet: every
        view cell stepping at it changes from this scenario second on. True when it moved."""
        now = self.clock.now()
        with self._lock:
            if moment not in self.moments:
                known = ", ".join(sorted(self.moments)) or "none"
                raise KeyError(f"scenario {self.scenario.name} has no moment {moment!r} (moments: {known})")
            if self.moments[moment] <= now:
                return False
            self.moments[moment] = now
            return True

    def configure(self, name: str, value: int) -> None:
        """What `sp_configure name, value; RECONFIGURE` does to sys.configurations: both `value` and
        `value_in_use` take the new value (a DBA raising max server memory, say)."""
        with self._lock:
            rows = [dict(row) for row in self.scenario.views.get("configurations", ())]
            matching = [row for row in rows if row.get("name") == name]
            if not matching:
                raise KeyError(f"no configuration option {name!r} in this scenario")
            for row in matching:
                row["value"] = row["value_in_use"] = value
            self.scenario.views["configurations"] = rows

    def _since(self) -> float:
        now = self.clock.now()
        with self._lock:
            while self._scheduled and self._scheduled[0] <= now:
                self._started_at = self._scheduled.pop(0)
            return self._started_at

    # Data protocol for the interpreter -----------------------------------
    # SERVERPROPERTY('EngineEdition') -> the catalog's platform names (5 and 8 are Azure's).
    PLATFORM_OF_EDITION: ClassVar[Mapping[int, str]] = {
        5: "azure_sql_database",
        8: "azure_sql_managed_instance",
    }

    @property
    def platform(self) -> str:
        edition = int(str(self.scenario.properties.get("EngineEdition", 3)))
        return self.PLATFORM_OF_EDITION.get(edition, "sql_server")

    def object_exists(self, name: str) -> bool:
        if name in self.missing:
            return False
        known = _catalog().objects.get(_catalog_name(name))
        if known is not None and known.platforms and self.platform not in known.platforms:
            return False  # Msg 208 there, as the platform's pages say (catalog.yaml `platforms`)
        if known is not None and not available(known.since, known.until, self.release):
            return False  # not in this release (catalog.yaml `since`): SQL Server 2025's views on 2022
        if name == self.HBP_VIEW:  # SQL Server 2019 (15.x) and later
            return int(str(self.scenario.properties.get("ProductVersion", "16")).split(".")[0]) >= 15
        if known is not None and any(
            name.lower() in (r.lower() for r in q.get("reads", ()))
            for q in self.scenario.custom_queries.values()
        ):
            return True  # an object a scenario's custom query reads (msdb's tables, say), where it exists
        return name in self.OBJECTS

    def canned(self, sql: str) -> ResultSet | None:
        """The scenario's answer to a site's own query (custom_queries), None when it has none. An object
        it reads that this server lacks answers 208, a denied one its denial, as SQL Server would."""
        from .tsql import SqlRuntimeError  # local: tsql imports nothing from here

        text = _normal_sql(sql)
        spec = next((q for q in self.scenario.custom_queries.values() if _normal_sql(q["sql"]) == text), None)
        if spec is None:
            return None
        for name in spec.get("reads", ()):
            if not self.object_exists(name):
                raise SqlRuntimeError(208, f"Invalid object name '{name}'.")
            if name in self.denied:
                error = self.denied[name]
                message = DENIAL_MESSAGES[error].format(object=name.split(".")[-1])
                if error == 229 and name.count(".") == 2:
                    database, schema, obj = name.split(".")
                    message = (
                        f"The SELECT permission was denied on the object '{obj}', database '{database}', "
                        f"schema '{schema}'."
                    )
                raise SqlRuntimeError(error, message, 16 if error == 297 else 14)
        rows = [tuple(row) for row in spec.get("rows") or []]
        columns = [
            Column(str(c), _canned_type([row[i] for row in rows])) for i, c in enumerate(spec["columns"])
        ]
        return ResultSet(columns, rows)

    @property
    def release(self) -> str | None:
        """The catalog release of the scenario's ProductVersion (None: newer than the catalog knows)."""
        version = self.scenario.properties.get("ProductVersion")
        return release_of(str(version)) if version else None

    def column_exists(self, name: str, column: str) -> bool:
        """What COL_LENGTH answers: the object exists here and the catalog gives this release and this
        platform the column."""
        if not self.object_exists(name):
            return False
        obj = _catalog().objects.get(_catalog_name(name))
        if obj is None:
            return False
        spec = obj.columns.get(column.lower())
        return spec is not None and available(spec.since, spec.until, self.release) and spec.on(self.platform)

    def _drop_absent(self, name: str, rows: list[dict[str, object]]) -> list[dict[str, object]]:
        obj = _catalog().objects.get(_catalog_name(name))
        if obj is None:
            return rows
        gone = {
            k
            for k, c in obj.columns.items()
            if not available(c.since, c.until, self.release) or not c.on(self.platform)
        }
        if not gone:
            return rows
        return [{k: v for k, v in row.items() if k not in gone} for row in rows]

    def database_name(self, database_id: object) -> str | None:
        """What DB_NAME answers: the name of a database that exists now, else NULL."""
        now = self.clock.now()
        return next((d.name for d in self.scenario.files.live(now) if d.database_id == database_id), None)

    def serverproperty(self, name: str) -> object:
        return self.scenario.properties.get(name)

    def utcnow(self) -> dt.datetime:
        return self.clock.utcnow()

    def rows(self, name: str, args: Sequence[object]) -> list[dict[str, object]]:
        from .tsql import SqlRuntimeError  # local: tsql imports nothing from here

        if name in self.denied:
            error = self.denied[name]
            severity = 16 if error == 297 else 14
            raise SqlRuntimeError(error, DENIAL_MESSAGES[error].format(object=name.split(".")[-1]), severity)
        files = self.scenario.files
        now = self.clock.now()
        if name == "sys.dm_os_volume_stats" and (path := files.volume_lookup_fails_for(now, *args)):
            # Msg 3634 is what SQL Server raises when the OS call behind a file's volume fails.
            raise SqlRuntimeError(
                3634,
                f"The operating system returned the error '21(The device is not ready.)' while attempting "
                f"'GetVolumeInformation' on '{path}'.",
            )
        producer: Callable[[], list[dict[str, object]]] = {
            "sys.dm_os_performance_counters": self.perf_rows,
            "sys.dm_os_sys_info": self.sys_info_rows,
            "sys.dm_io_virtual_file_stats": lambda: files.virtual_file_stats(now, self._since()),
            "sys.master_files": lambda: files.master_files(now),
            "sys.databases": lambda: files.sys_databases(now),
            "sys.dm_os_volume_stats": lambda: files.volume_stats(now, *args, since=self._since()),
            "tempdb.sys.database_files": lambda: files.tempdb_database_files(now, self._since()),
            "tempdb.sys.dm_db_file_space_usage": lambda: files.tempdb_space_usage(now, self._since()),
            "tempdb.sys.dm_db_log_space_usage": lambda: files.tempdb_log_space(now, self._since()),
            self.HBP_VIEW: lambda: [
                {
                    "is_configured": int((files.hbp or {}).get("configured", 0)),
                    "is_enabled": int((files.hbp or {}).get("enabled", 0)),
                }
            ],
            "sys.dm_os_buffer_pool_extension_configuration": self._bpe_rows,
            **{view: (lambda view=view: self.view_rows(view)) for view in self.SCENARIO_VIEWS},
            self.MEMORY_HEALTH_VIEW: self.memory_health_rows,
        }[name]
        return self._drop_absent(name, producer())

    def view_rows(self, name: str) -> list[dict[str, object]]:
        """The scenario's rows for a view, each column evaluated at the current scenario time."""
        spec = self.scenario.views.get(name.removeprefix("sys."))
        if spec is None:
            return []
        if name in self.KEYED_VIEWS:
            rows = [
                {self.KEYED_VIEWS[name]: key, **row}
                for key, value in spec.items()
                for row in ([value] if isinstance(value, dict) else list(value))
            ]
        else:
            rows = [spec] if isinstance(spec, dict) else list(spec)
        now, since = self.clock.now(), self._since()
        with self._lock:
            moments = dict(self.moments)
        return [
            {
                str(k).lower(): self._cell(at_moments(v, moments, f"{name}.{k}"), now, since, f"{name}.{k}")
                for k, v in row.items()
            }
            for row in rows
        ]

    # sys.dm_os_memory_health_history (Microsoft's page): a snapshot about every 15 s, up to 256 kept, none
    # left after a restart.
    MEMORY_HEALTH_EVERY_SECONDS = 15.0
    MEMORY_HEALTH_KEPT = 256

    def memory_health_rows(self) -> list[dict[str, object]]:
        """`views: dm_os_memory_health_history:` as a mapping is one snapshot every 15 s since the last
        (re)start, each column's spec ({gauge:, steps:}) read at the snapshot's own time, the newest 256
        kept; as a list it is the literal rows (an empty list: an empty view)."""
        spec = self.scenario.views.get(self.MEMORY_HEALTH_VIEW.removeprefix("sys."))
        if not isinstance(spec, dict):
            return self.view_rows(self.MEMORY_HEALTH_VIEW)
        now, since = self.clock.now(), self._since()
        wall_now = self.clock.utcnow()
        count = int((now - since) // self.MEMORY_HEALTH_EVERY_SECONDS)
        rows = []
        for k in range(max(1, count - self.MEMORY_HEALTH_KEPT + 1), count + 1):
            at = since + k * self.MEMORY_HEALTH_EVERY_SECONDS
            row = {
                str(c).lower(): self._cell(v, at, since, f"{self.MEMORY_HEALTH_VIEW}.{c}")
                for c, v in spec.items()
            }
            row["snapshot_time"] = wall_now - dt.timedelta(seconds=now - at)
            rows.append(row)
        return rows

    @staticmethod
    def _cell(raw: object, now: float, since: float, where: str) -> object:
        if not isinstance(raw, dict):
            return raw
        spec = CounterSpec.parse(raw, where)
        value = spec.at(now, since)
        # DMV counts are whole numbers: a count growing at a fractional rate reads as its floor.
        return int(value) if spec.kind == "rate" or float(value).is_integer() else value

    def _bpe_rows(self) -> list[dict[str, object]]:
        bpe = self.scenario.files.bpe
        if not bpe:
            return [
                {
                    "path": None,
                    "file_id": 0,
                    "state": 0,
                    "state_description": "BUFFER POOL EXTENSION DISABLED",
                    "current_size_in_kb": 0,
                }
            ]
        return [
            {
                "path": bpe["path"],
                "file_id": 0,
                "state": 5,
                "state_description": "BUFFER POOL EXTENSION ENABLED",
                "current_size_in_kb": int(bpe["size_kb"]),
            }
        ]

    def sys_info_rows(self) -> list[dict[str, object]]:
        since = self._since()
        now = self.clock.now()
        start_local = self.clock.utcnow() - dt.timedelta(seconds=now - since)
        return [
            {
                "ms_ticks": int((BOOT_UPTIME_SECONDS + now) * 1000),
                "sqlserver_start_time_ms_ticks": int((BOOT_UPTIME_SECONDS + since) * 1000),
                "sqlserver_start_time": start_local,
                "cpu_count": 8,
                "physical_memory_kb": 64 * 1024 * 1024,
                **next(iter(self.view_rows("sys.dm_os_sys_info")), {}),
            }
        ]

    def perf_rows(self) -> list[dict[str, object]]:
        since = self._since()
        now = self.clock.now()
        rows: list[dict[str, object]] = []
        for obj, counters in self.scenario.counters.items():
            for counter, spec in counters.items():
                if isinstance(spec, dict):
                    for instance, named_spec in spec.items():
                        rows += self._rows_for(obj, counter, instance, named_spec, now, since)
                elif isinstance(spec, list) or obj in ("Buffer Node", "Memory Node"):
                    specs = spec if isinstance(spec, list) else [spec] * self.scenario.numa_nodes
                    for node, node_spec in enumerate(specs):
                        rows += self._rows_for(obj, counter, f"{node:03d}", node_spec, now, since)
                else:
                    rows += self._rows_for(obj, counter, "", spec, now, since)
        if "Page life expectancy" not in self.scenario.counters.get("Buffer Manager", {}):
            rows += self._derived_ple(rows)
        for obj, names in self.scenario.noise.items():
            for counter in names:
                rows.append(self._row(obj, counter, "", 42, RAW))
        return rows

    def _rows_for(
        self, obj: str, counter: str, instance: str, spec: CounterSpec, now: float, since: float
    ) -> list[dict[str, object]]:
        value = spec.at(now, since)
        if spec.kind == "gauge":
            return [self._row(obj, counter, instance, int(value), spec.cntr_type or RAW)]
        if spec.kind == "rate":
            return [self._row(obj, counter, instance, int(value), spec.cntr_type or BULK)]
        base = 10_000
        return [
            self._row(obj, counter, instance, round(value * base), spec.cntr_type or FRACTION),
            self._row(obj, _base_name(counter), instance, base, FRACTION_BASE),
        ]

    def _derived_ple(self, rows: list[dict[str, object]]) -> list[dict[str, object]]:
        node_ples = [
            int(r["cntr_value"])  # type: ignore[call-overload]
            for r in rows
            if str(r["object_name"]).rstrip().endswith(":Buffer Node")
            and str(r["counter_name"]).rstrip() == "Page life expectancy"
        ]
        if not node_ples:
            return []
        harmonic = len(node_ples) / sum(1.0 / max(p, 1) for p in node_ples)
        return [self._row("Buffer Manager", "Page life expectancy", "", int(harmonic), RAW)]

    def _row(self, obj: str, counter: str, instance: str, value: int, cntr_type: int) -> dict[str, object]:
        return {
            "object_name": self._nchar(self.scenario.object_prefix + obj),
            "counter_name": self._nchar(counter),
            "instance_name": self._nchar(instance),
            "cntr_value": value,
            "cntr_type": cntr_type,
        }

    def _nchar(self, text: str) -> str:
        return text.ljust(NCHAR) if self.scenario.pad else text


def _base_name(counter: str) -> str:
    """The base row's name in the counter's own capitalisation: `Buffer cache hit ratio base`, but
    `Cache Hit Ratio Base` (Plan Cache), as SQL Server names them."""
    last = counter.split()[-1] if counter.split() else ""
    return f"{counter} {'Base' if last[:1].isupper() else 'base'}"


_CATALOG: Catalog | None = None


def _canned_type(values: list[object]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bit"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "bigint"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "float"
    return "nvarchar"


def _catalog_name(name: str) -> str:
    """The catalog's name of an object: a three-part name (tempdb.sys.x) is the system object sys.x."""
    return ".".join(name.split(".")[-2:])


def _catalog() -> Catalog:
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = load_catalog()
    return _CATALOG
