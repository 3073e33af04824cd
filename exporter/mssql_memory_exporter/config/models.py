"""The exporter's config: targets and the whole file, parsed and loaded with every problem named."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..collectors import COLLECTORS
from ..collectors.base import CollectorRecord
from ..collectors.custom import CustomQuery
from .auth import AuthModule, Credentials
from .collectors import COLLECTOR_NAMES, CollectorsConfig
from .custom import DEFAULT_PREFIX, label_clashes, load_custom, records_of
from .drives import DriveHealthConfig
from .errors import (
    ConfigError,
    CredentialError,
    LoadAbandoned,
    error_at,
    to_config_error,
    unexpected_error,
)
from .fields import (
    DriverChoice,
    Encryption,
    HostName,
    InstanceName,
    LabelName,
    LabelValue,
    PathText,
    Seconds,
    SqlName,
    Strict,
    TargetName,
)
from .ssd import SsdPool
from .volumes import PoolName, VolumeLabel, list_twice, normalize_volume
from .windows_auth import KerberosSettings
from .yaml_loading import read_yaml, surrogate_errors

# The fields of a target that shape its connection (with its auth module's username and password source).
CONNECTION_FIELDS = frozenset(
    {
        "host",
        "port",
        "instance",
        "database",
        "driver",
        "encryption",
        "trust_server_certificate",
        "ca_file",
        "login_timeout_seconds",
        "query_timeout_seconds",
        "login_backoff_seconds",
        "login_backoff_max_seconds",
        "auth_module",
    }
)


class TargetConfig(Strict):
    name: TargetName
    host: HostName
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    instance: InstanceName | None = None
    database: SqlName = "master"
    driver: DriverChoice = "auto"
    encryption: Encryption = "require"
    trust_server_certificate: bool = False
    # FreeTDS only: PEM CA certificates the server's certificate must chain to. Without it FreeTDS
    # checks against the system trust store (the Microsoft drivers always do).
    ca_file: PathText | None = None
    login_timeout_seconds: Seconds = 5.0
    query_timeout_seconds: Seconds = 10.0
    # After a refused login (18456) the next one waits this long, doubling up to the max: a lockout
    # policy counts every failed login, and Prometheus would otherwise bring one per scrape.
    login_backoff_seconds: Seconds = 30.0
    login_backoff_max_seconds: Seconds = 900.0
    workload: Literal["oltp", "olap"] = "oltp"
    labels: dict[LabelName, LabelValue] = Field(default_factory=dict)
    auth_module: SqlName
    # Kerberos only: the service principal to ask a ticket for, when not the one FreeTDS derives
    # (MSSQLSvc/<canonical host>:<port>), e.g. for an alias or a load balancer in front of the server.
    spn: Annotated[str, Field(min_length=1, max_length=255, pattern=r"^\S+$")] | None = None
    # The exporter runs on this SQL Server's host, so it may read the host's mount table and disk counters.
    colocated: bool = False
    # File names and volume lookups (dm_os_volume_stats is costly per file) are refreshed this often;
    # the I/O counters themselves are read on every scrape.
    volume_refresh_seconds: Seconds = 300.0
    # Directory prefix -> volume label, for SQL Server on Linux (which reports no mount points) when the
    # exporter cannot read the host's mount table.
    volume_map: dict[VolumeLabel, VolumeLabel] = Field(default_factory=dict)
    # Volumes on PMEM/DAX, for when that cannot be detected (not co-located, or Windows).
    pmem_volumes: list[VolumeLabel] = Field(default_factory=list)
    ssd_pools: dict[PoolName, SsdPool] = Field(default_factory=dict)
    # Which collectors run; without it the top-level `collectors` applies, and without that, all of them.
    collectors: CollectorsConfig | None = None
    # Linked by ExporterConfig so a target can be turned into a connection string on its own.
    _auth: AuthModule | None = PrivateAttr(default=None)
    # Set by ExporterConfig from the top-level `collectors` when the target has none of its own.
    _default_collectors: CollectorsConfig | None = PrivateAttr(default=None)
    # Every collector of the config, its custom ones included (set by parse_config).
    _all_collectors: tuple[CollectorRecord, ...] = PrivateAttr(default=COLLECTORS)

    @model_validator(mode="before")
    @classmethod
    def _abandon_when_asked(cls, data: Any, info: ValidationInfo) -> Any:
        # Not a ValueError: pydantic lets any other exception end the whole validation at once.
        cancelled = (info.context or {}).get("cancelled")
        if cancelled is not None and cancelled():
            raise LoadAbandoned("config validation abandoned")
        return data

    @model_validator(mode="before")
    @classmethod
    def _default_port(cls, data: Any) -> Any:
        # A named instance gets its port from SQL Browser, so 1433 applies only when neither is given.
        if isinstance(data, Mapping) and data.get("port") is None and data.get("instance") is None:
            return {**data, "port": 1433}
        return data

    @model_validator(mode="after")
    def _backoff_bounds(self) -> TargetConfig:
        if self.login_backoff_max_seconds < self.login_backoff_seconds:
            raise error_at(
                ("login_backoff_max_seconds",),
                f"{self.login_backoff_max_seconds:g} is less than login_backoff_seconds "
                f"({self.login_backoff_seconds:g})",
            )
        return self

    @field_validator("ca_file")
    @classmethod
    def _ca_file_is_readable(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return None
        # It goes into a freetds.conf line: characters that would end or comment out that line are
        # refused rather than escaped (freetds.conf has no quoting).
        if path != path.strip() or any(c in path for c in "#;[]") or any(ord(c) < 32 for c in path):
            raise PydanticCustomError(
                "ca_file", "{path} contains a character FreeTDS cannot read in a path", {"path": path}
            )
        base = Path((info.context or {}).get("base_dir", "."))
        resolved = str((base / path).absolute())
        if not (os.path.isfile(resolved) and os.access(resolved, os.R_OK)):
            raise PydanticCustomError(
                "ca_file", "file {path} does not exist or is not readable", {"path": resolved}
            )
        return resolved

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.port is not None and self.instance is not None:
            raise error_at(("instance",), "set either port or instance, not both")
        if self.ca_file is not None:
            if self.driver != "freetds":
                raise error_at(
                    ("ca_file",),
                    "is for driver: freetds; the Microsoft drivers check the server certificate against "
                    "the system trust store (install the CA there)",
                )
            if self.encryption not in ("request", "require"):
                raise error_at(("ca_file",), f"needs encryption request or require, not {self.encryption}")
            if self.trust_server_certificate:
                raise error_at(
                    ("ca_file",), "contradicts trust_server_certificate: true (nothing would be checked)"
                )
        if self.encryption == "strict" and self.driver in ("freetds", "odbc17"):
            raise error_at(
                ("encryption",),
                f"strict (TDS 8) needs ODBC Driver 18; driver {self.driver} cannot do it",
            )
        return self

    @model_validator(mode="after")
    def _pools(self) -> Self:
        list_twice(self.pmem_volumes, "pmem_volumes")
        volume_pool: dict[str, str] = {}
        disk_pool: dict[str, str] = {}
        for name, pool in self.ssd_pools.items():
            if pool.host_disks and not self.colocated:
                raise error_at(
                    ("ssd_pools", name, "host_disks"),
                    "needs colocated: true on the target; host disk counters can only be read on "
                    "SQL Server's own host",
                )
            # A volume or disk belongs to one set of drives; in two pools its writes would wear both.
            lists = (("volumes", pool.volumes, volume_pool), ("host_disks", pool.host_disks, disk_pool))
            for field, items, owner in lists:
                for index, item in enumerate(items):
                    if item in owner:
                        raise error_at(
                            ("ssd_pools", name, field, index), f"{item} is already in pool {owner[item]}"
                        )
                    owner[item] = name
        return self

    @field_validator("volume_map", mode="before")
    @classmethod
    def _distinct_prefixes(cls, value: Any) -> Any:
        # "/a/" and "/a" are one directory; as two keys, one mapping would silently replace the other.
        if not isinstance(value, Mapping):
            return value
        seen: dict[str, Any] = {}
        for key in value:
            try:
                normal = normalize_volume(key) if isinstance(key, str) else None
            except ValueError:
                continue  # reported by the key's own validation
            if normal is None:
                continue
            if normal in seen:
                raise PydanticCustomError(
                    "volume_map",
                    "{a} and {b} are the same directory",
                    {"a": str(seen[normal]), "b": key},
                )
            seen[normal] = key
        return value

    @field_validator("encryption", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 reads an unquoted `off` (or `no`) as false; for this key that can only mean "off".
        return "off" if value is False else value

    @property
    def username(self) -> str | None:
        if self._auth is None:
            return None
        return "" if self._auth.kerberos is not None or self._auth.entra is not None else self._auth.username

    @property
    def auth(self) -> AuthModule | None:
        """The linked auth module (None until ExporterConfig links it)."""
        return self._auth

    @property
    def enabled_collectors(self) -> frozenset[str]:
        """The names of the collectors this target runs: its own setting, else the top-level one."""
        chosen = self.collectors if self.collectors is not None else self._default_collectors
        every = self._all_collectors
        return chosen.enabled(every) if chosen is not None else frozenset(r.name for r in every)

    def credentials(self) -> Credentials:
        """Username and password from this target's own auth module, reading the password now. A probe
        that started before a reload keeps using the module of the config it started with."""
        if self._auth is None:
            raise CredentialError(f"target {self.name} is not linked to an auth module")
        return self._auth.credentials()

    def connection_key(self) -> tuple[object, ...]:
        """Everything that decides which server is logged in to, as whom, and how: a reload that changes
        any of it drops the target's connection and its state; other changes keep the connection."""
        fields = self.model_dump(include=set(CONNECTION_FIELDS))
        auth = self._auth.model_dump() if self._auth is not None else None
        return (tuple(sorted(fields.items())), tuple(sorted(auth.items())) if auth else None)


class ExporterConfig(Strict):
    default_target: str | None = None
    auth_modules: dict[SqlName, AuthModule] = Field(default_factory=dict)
    targets: Annotated[dict[str, TargetConfig], Field(min_length=1)]
    # smartctl readings of this host's drives (host/drive_health.py); pools link to them by name.
    drive_health: DriveHealthConfig | None = None
    # Every target's collectors unless it sets its own.
    collectors: CollectorsConfig | None = None
    # A site's own queries (config/custom.py reads and checks them before the rest of the file).
    custom_collectors: list[Any] | None = None
    collector_files: list[Any] = Field(default_factory=list)
    custom_metric_prefix: str = DEFAULT_PREFIX
    _custom: tuple[CustomQuery, ...] = PrivateAttr(default=())
    _custom_records: tuple[CollectorRecord, ...] = PrivateAttr(default=())

    @property
    def custom_queries(self) -> tuple[CustomQuery, ...]:
        return self._custom

    @property
    def collector_records(self) -> tuple[CollectorRecord, ...]:
        """The built-in collectors and the config's custom ones, in batch order."""
        return (*COLLECTORS, *self._custom_records)

    @field_validator("targets", mode="before")
    @classmethod
    def _name_targets(cls, targets: Any) -> Any:
        """A target is named by its key; copy the key in so each TargetConfig knows its name."""
        if not isinstance(targets, Mapping):
            return targets
        named: dict[Any, Any] = {}
        for key, body in targets.items():
            # An explicit `name:` is left alone here and compared with the key after validation, so
            # that one slip does not hide the target's other errors.
            named[key] = {"name": key, **body} if isinstance(body, Mapping) and "name" not in body else body
        return named

    @model_validator(mode="after")
    def _references(self) -> Self:
        if self.default_target is not None and self.default_target not in self.targets:
            raise error_at(("default_target",), f"no target named {self.default_target!r} under targets")
        for key, target in self.targets.items():
            if target.name != key:
                raise error_at(("targets", key, "name"), "leave it out: a target is named by its key")
            module = self.auth_modules.get(target.auth_module)
            if module is None:
                raise error_at(
                    ("targets", key, "auth_module"),
                    f"no auth module named {target.auth_module!r} under auth_modules",
                )
            target._auth = module
            target._default_collectors = self.collectors
            if target.spn is not None and module.kerberos is None:
                raise error_at(("targets", key, "spn"), "only a kerberos auth module uses an SPN")
            if module.entra is not None and target.driver in ("freetds", "odbc17"):
                raise error_at(
                    ("targets", key, "driver"),
                    f"{target.driver} cannot log in with an Entra ID access token (auth_modules."
                    f"{target.auth_module}.entra); only ODBC Driver 18 takes one: set driver: odbc18 or auto",
                )
        return self

    @model_validator(mode="after")
    def _one_kerberos_identity(self) -> Self:
        """FreeTDS takes Kerberos credentials from the process's one credential cache, so every
        Kerberos module must name the same identity; a second one needs a second exporter."""
        first: tuple[str, str] | None = None
        for name, module in self.auth_modules.items():
            if module.kerberos is None:
                continue
            identity = module.kerberos.identity()
            if first is None:
                first = (name, identity)
            elif identity != first[1]:
                raise error_at(
                    ("auth_modules", name, "kerberos"),
                    f"asks for {identity}, but auth_modules.{first[0]} asks for {first[1]}: FreeTDS logs "
                    "in with one Kerberos identity per process; run one exporter per identity",
                )
        return self

    def kerberos(self) -> KerberosSettings | None:
        """The process's Kerberos settings, when a target uses a Kerberos module."""
        for target in self.targets.values():
            module = self.auth_modules.get(target.auth_module)
            if module is not None and module.kerberos is not None:
                return module.kerberos
        return None

    @model_validator(mode="after")
    def _drive_links(self) -> Self:
        known = self.drive_health.names() if self.drive_health is not None else set()
        owner: dict[str, str] = {}
        for key, target in self.targets.items():
            for pool_name, pool in target.ssd_pools.items():
                if pool.smart_drives and not target.colocated:
                    raise error_at(
                        ("targets", key, "ssd_pools", pool_name, "smart_drives"),
                        "needs colocated: true on the target; drives can only be read on SQL Server's own "
                        "host",
                    )
                for index, name in enumerate(pool.smart_drives):
                    if name not in known:
                        raise error_at(
                            ("targets", key, "ssd_pools", pool_name, "smart_drives", index),
                            f"no drive named {name!r} under drive_health.drives",
                        )
                linked = [("smart_drives", i, n) for i, n in enumerate(pool.smart_drives)]
                linked += [("host_disks", i, n) for i, n in enumerate(pool.host_disks) if n in known]
                for field, index, name in linked:
                    # One drive's wear belongs to one pool; in two, its bytes would count in both.
                    here = f"targets.{key}.ssd_pools.{pool_name}"
                    if name in owner and owner[name] != here:
                        raise error_at(
                            ("targets", key, "ssd_pools", pool_name, field, index),
                            f"drive {name} is already in pool {owner[name]}",
                        )
                    owner[name] = here
        return self

    def drive_pools(self) -> dict[str, tuple[str, str]]:
        """(target, pool) of each drive_health drive a pool links, by drive name."""
        known = self.drive_health.names() if self.drive_health is not None else set()
        out: dict[str, tuple[str, str]] = {}
        for key, target in self.targets.items():
            for pool_name, pool in target.ssd_pools.items():
                for name in [*pool.smart_drives, *pool.host_disks]:
                    if name in known:
                        out[name] = (key, pool_name)
        return out

    def credentials_for(self, target: TargetConfig | str) -> Credentials:
        """Username and password for a target, reading the password source at this moment."""
        name = target if isinstance(target, str) else target.name
        return self.targets[name].credentials()

    def secret_warnings(self) -> list[str]:
        """One line per password file or keytab that others can read or change (logged at start and
        at reload)."""
        return [
            f"auth_modules.{name}.password_file: {warning}"
            for name, module in self.auth_modules.items()
            for warning in module.file_warnings()
        ] + [
            f"auth_modules.{name}.kerberos.keytab: {warning}"
            for name, module in self.auth_modules.items()
            if module.kerberos is not None
            for warning in module.kerberos.keytab_warnings()
        ]


def parse_config(
    data: Any,
    source: str = "<config>",
    base_dir: str | os.PathLike[str] = ".",
    cancelled: Callable[[], bool] | None = None,
) -> ExporterConfig:
    """Validate already-parsed YAML. `source` prefixes every error line; `base_dir` anchors relative
    password_file paths."""
    if data is None:
        raise ConfigError(f"{source}: the config is empty; at least one target is required")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping (key: value)")
    surrogates = surrogate_errors(data, source)
    if surrogates:
        raise ConfigError(surrogates)
    custom = load_custom(data, source, str(base_dir))
    names = COLLECTOR_NAMES | {query.name for query in custom}
    try:
        config = ExporterConfig.model_validate(
            data, context={"base_dir": str(base_dir), "collector_names": names, "cancelled": cancelled}
        )
    except ValidationError as exc:
        raise to_config_error(source, exc) from None
    clashes = label_clashes(custom, {key: t.labels for key, t in config.targets.items()})
    if clashes:
        raise ConfigError(clashes)
    config._custom = custom
    config._custom_records = records_of(custom)
    for target in config.targets.values():
        target._all_collectors = config.collector_records
    return config


def load_config(path: str, cancelled: Callable[[], bool] | None = None) -> ExporterConfig:
    """Read and validate the YAML config at `path`; every problem raises ConfigError, also one no check
    foresaw (a reload must be refused, never crash the exporter; --config.check must say why).
    `cancelled` is asked while reading and between targets; once true, LoadAbandoned is raised."""
    try:
        data = read_yaml(path, cancelled)
        return parse_config(
            data, source=path, base_dir=os.path.dirname(os.path.abspath(path)), cancelled=cancelled
        )
    except (ConfigError, LoadAbandoned):
        raise
    except Exception as exc:
        raise unexpected_error(path, exc) from None
