"""The exporter's YAML configuration: models, loader, secrets and ODBC connection strings.

Everything an operator can get wrong is reported as one `ConfigError` line per problem, in the form
`<file>: <dotted.field.path>: <what is wrong>`, so a failed start points at the line to fix.
Passwords never live in the file or in these objects: an auth module names an environment variable or
a file, which is read only when a connection is made, so a rotated secret needs no restart.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Self

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = [
    "RESERVED_LABELS",
    "AuthModule",
    "ConfigError",
    "CredentialError",
    "Credentials",
    "DriverError",
    "ExporterConfig",
    "KnownWritten",
    "SsdDrives",
    "SsdPool",
    "TargetConfig",
    "build_connection_string",
    "connection_string_redacted",
    "driver_kind",
    "freetds_section",
    "freetds_verifies",
    "load_config",
    "normalize_host_disk",
    "normalize_volume",
    "parse_config",
    "resolve_driver",
]

TARGET_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"
TARGET_NAME_MAX = 128

# Label names the exporter itself puts on samples (design.md metric contract). A constant label with one
# of these names would make a sample carry the same label twice, which Prometheus rejects.
# Prometheus attaches these to every scraped series; an exported label of the same name gets renamed.
PROMETHEUS_TARGET_LABELS = frozenset({"job", "instance"})

# Label names the exporter's own metrics use; an extra label with one of these names would clash.
# tests/test_scenarios.py checks this list against every label the exporter actually emits.
RESERVED_LABELS = frozenset(
    {
        "collector",
        "node",
        "target",
        "file",
        "volume",
        "file_type",
        "pool",
        "source",
        "device",
        "workload",
        "version",
        "product_level",
        "update_level",
        "edition",
        "engine_edition",
    }
)

ODBC18 = "ODBC Driver 18 for SQL Server"
ODBC17 = "ODBC Driver 17 for SQL Server"
FREETDS = "FreeTDS"

DriverChoice = Literal["auto", "odbc18", "odbc17", "freetds"]
Encryption = Literal["off", "request", "require", "strict"]
DriverKind = Literal["odbc18", "odbc17", "freetds"]

# Never names the variable (see AuthModule._env_is_set).
ENV_UNSET_MESSAGE = "the environment variable it names is not set or is empty"
INLINE_PASSWORD_MESSAGE = "inline passwords are not allowed; use password_env or password_file"


class ConfigError(Exception):
    """A configuration problem; `str()` is one line per problem, never a secret."""

    def __init__(self, lines: list[str] | str) -> None:
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class CredentialError(ConfigError):
    """A password source that could not be read at connect time (names the source, never the value)."""


class DriverError(ConfigError):
    """No installed ODBC driver satisfies a target's `driver` / `encryption` choice."""


class Credentials(NamedTuple):
    username: str
    # SecretStr so that a tuple that ends up in a log line or traceback shows '**********'.
    password: SecretStr


def _error_at(loc: tuple[str | int, ...], message: str) -> ValidationError:
    """A validation error pinned to a field, for checks that span fields. Raised from inside a
    validator, pydantic prefixes the location of the enclosing model, so the report stays dotted."""
    # The message goes in as context, not as the template, so braces in user-supplied names stay literal.
    error = PydanticCustomError("config", "{message}", {"message": message})
    detail = InitErrorDetails(type=error, loc=loc, input=None)
    return ValidationError.from_exception_data("config", [detail])


def _check_label_name(name: str) -> str:
    if name.startswith("__"):
        raise PydanticCustomError("label_name", "label names starting with __ are reserved by Prometheus")
    if name in PROMETHEUS_TARGET_LABELS:
        raise PydanticCustomError(
            "label_name",
            "label {name} is Prometheus' own target label (it would be renamed exported_{name}); set it "
            "with relabeling in Prometheus instead",
            {"name": name},
        )
    if name in RESERVED_LABELS:
        raise PydanticCustomError(
            "label_name",
            "label {name} is set by the exporter itself; choose another name",
            {"name": repr(name)},
        )
    return name


TargetName = Annotated[str, Field(max_length=TARGET_NAME_MAX, pattern=TARGET_NAME_PATTERN)]
LabelName = Annotated[str, Field(pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$"), AfterValidator(_check_label_name)]
# Values end up inside `Server=` and friends; characters that would change its meaning are refused
# here rather than quoted, because no driver accepts them in a host name anyway.
HostName = Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9_.:%\[\]-]+$")]
# SQL Server instance names: at most 16 characters, letters/digits/_/$/#, not starting with a digit or $.
InstanceName = Annotated[str, Field(pattern=r"^[A-Za-z_#][A-Za-z0-9_#$]{0,15}$")]
SqlName = Annotated[str, Field(min_length=1, max_length=128)]
Seconds = Annotated[float, Field(gt=0)]


# `rack: 12` is a label value of "12", not a type error: the one place numbers become strings.
LabelValue = Annotated[str, Field(strict=False)]


class _Strict(BaseModel):
    # YAML turns `rack: 12` into an int; accepting it as "12" is what an operator expects.
    model_config = ConfigDict(
        extra="forbid", frozen=True, coerce_numbers_to_str=True, allow_inf_nan=False, strict=True
    )


class AuthModule(_Strict):
    username: SqlName
    password_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    password_file: Annotated[str, Field(min_length=1)] | None = None

    @field_validator("password_env")
    @classmethod
    def _env_is_set(cls, name: str | None) -> str | None:
        # The name is not repeated: a password pasted here by mistake would otherwise end up in the
        # error, in a terminal, a CI log or the journal. The field path says which line to look at.
        if name is not None and not os.environ.get(name):
            raise PydanticCustomError("secret_source", ENV_UNSET_MESSAGE)
        return name

    @field_validator("password_file")
    @classmethod
    def _file_is_readable(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return None
        # Relative paths follow the config file, as in Prometheus, not the working directory.
        base = Path((info.context or {}).get("base_dir", "."))
        resolved = str((base / path).absolute())
        try:
            readable = os.path.isfile(resolved) and os.access(resolved, os.R_OK)
        except ValueError:  # an embedded NUL byte
            readable = False
        if not readable:
            raise PydanticCustomError(
                "secret_source", "file {path} does not exist or is not readable", {"path": resolved}
            )
        # Refused at start-up like an empty environment variable: an empty secret would only show up as
        # failed logins (and a lockout policy counts those). Read as read_password() reads it.
        try:
            with open(resolved, encoding="utf-8") as fh:
                empty = not fh.read().removesuffix("\n").removesuffix("\r")
        except (OSError, UnicodeDecodeError):
            empty = False  # read_password() names the problem on the first login
        if empty:
            raise PydanticCustomError("secret_source", "file {path} is empty", {"path": resolved})
        return resolved

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Self:
        if (self.password_env is None) == (self.password_file is None):
            raise PydanticCustomError("secret_source", "set exactly one of password_env or password_file")
        return self

    def read_password(self) -> SecretStr:
        """Read the secret now; an error names its source and never its content."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env, "")
            if not value:
                raise CredentialError(f"password_env: {ENV_UNSET_MESSAGE}")
            return SecretStr(value)
        assert self.password_file is not None  # guaranteed by _exactly_one_source
        try:
            with open(self.password_file, encoding="utf-8") as fh:
                value = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise CredentialError(f"cannot read password file {self.password_file}: {reason}") from None
        # Secrets written by `echo` or an editor end in a newline that is not part of the password.
        value = value.removesuffix("\n").removesuffix("\r")
        if not value:
            raise CredentialError(f"password file {self.password_file} is empty")
        return SecretStr(value)


# --- volumes, disks and SSD pools ----------------------------------------------------------------------

# Volume labels are compared with what the exporter reports, so both spellings are brought to SQL
# Server's own: on Windows `sys.dm_os_volume_stats.volume_mount_point` ends in a backslash ("T:\",
# "D:\mnt\ssd\"); on Linux it is NULL and the label is a mount point as the mount table writes it, without
# a trailing slash (except "/" itself).
_LINUX_PART = r"[^/\x00-\x1f\x7f]+"
_LINUX_VOLUME = re.compile(rf"/(?:{_LINUX_PART}/)*(?:{_LINUX_PART})?")
_WINDOWS_PART = r'[^\\/:*?"<>|\x00-\x1f\x7f]+'
_WINDOWS_VOLUME = re.compile(rf"([A-Za-z]):\\((?:{_WINDOWS_PART}\\)*(?:{_WINDOWS_PART})?)")
VOLUME_SYNTAX = (
    "unknown volume syntax: expected an absolute Linux path like /var/opt/mssql/tempdb "
    "or a Windows drive or mount point like T:\\ or D:\\mnt\\ssd\\"
)


def _volume_hint(label: str) -> str:
    if not label:
        return "it is empty"
    if re.fullmatch(r"[A-Za-z]:", label):
        # "C:" alone means "the current directory of drive C", not the volume.
        return f"{label} without a backslash is not a volume; write {label}\\"
    if "://" in label:
        return "a URL is not a volume"
    if re.match(r"[A-Za-z]:/", label):
        return "Windows paths are written with backslashes"
    if label.startswith("\\\\"):
        return "network shares (\\\\server\\share) are not local volumes"
    if not label.startswith(("/", "\\")) and not re.match(r"[A-Za-z]:", label):
        return "relative paths are not volumes"
    return "empty path component, control character or a character Windows does not allow"


def normalize_volume(label: str) -> str:
    """A volume label (or directory) in the spelling the exporter reports: Linux paths without a trailing
    slash, Windows paths with an upper-case drive letter and a trailing backslash. Raises ValueError
    ("unknown volume syntax: ...") for anything else: relative paths, "C:", URLs, UNC shares, "." or ".."."""
    linux = _LINUX_VOLUME.fullmatch(label)
    windows = None if linux else _WINDOWS_VOLUME.fullmatch(label)
    if linux:
        parts = label.split("/")
    elif windows:
        parts = windows.group(2).split("\\")
    else:
        raise ValueError(f"{VOLUME_SYNTAX} ({_volume_hint(label)})")
    if any(part in (".", "..") for part in parts):
        # A label must name one place; "." and ".." would let two spellings name the same volume.
        raise ValueError(f"{VOLUME_SYNTAX} (no '.' or '..' components)")
    if linux:
        return label.removesuffix("/") or "/"
    assert windows is not None
    drive, rest = windows.groups()
    if rest and not rest.endswith("\\"):
        rest += "\\"
    return f"{drive.upper()}:\\{rest}"


# Disk names as psutil reports them: the kernel's names from /proc/diskstats on Linux, PhysicalDriveN on
# Windows. Partitions and virtual devices are refused: a drive wears from the writes of all its
# partitions, and md/dm devices count writes before RAID or LVM fan them out to the drives (and would
# count them twice next to their member disks).
# "!" is sysfs's spelling of "/" in names like cciss/c0d0 (host.blockdev.sysfs_name), which is allowed.
_KERNEL_DISK = re.compile(r"[a-z][a-z0-9]*(?:[-_!][a-z0-9]+)*")
_WINDOWS_DISK = re.compile(r"physicaldrive(\d+)", re.IGNORECASE)
_PARTITION = re.compile(
    r"(?:[shv]d[a-z]+|xvd[a-z]+)\d+|(?:nvme\d+n\d+|mmcblk\d+|nbd\d+|zd\d+|rbd\d+|cciss!c\d+d\d+)p\d+"
)
_VIRTUAL_DISK = re.compile(r"(?:dm-|md|loop|zram|ram)\d+(?:p\d+)?")
DISK_SYNTAX = (
    "unknown disk name: expected a kernel disk name like nvme0n1 or sda, or PhysicalDrive2 on Windows"
)


def normalize_host_disk(name: str) -> str:
    """A host disk name in psutil's spelling; raises ValueError for anything that is not a whole disk."""
    windows = _WINDOWS_DISK.fullmatch(name)
    if windows:
        return f"PhysicalDrive{int(windows.group(1))}"
    if name.startswith("/dev/"):
        raise ValueError(f"{DISK_SYNTAX} (leave out /dev/)")
    if not _KERNEL_DISK.fullmatch(name):
        raise ValueError(DISK_SYNTAX)
    if _VIRTUAL_DISK.fullmatch(name):
        raise ValueError(f"{name} is a virtual block device; list the physical disks under it")
    if _PARTITION.fullmatch(name):
        raise ValueError(f"{name} is a partition; name the whole disk, which wears from all its partitions")
    return name


def _list_twice(items: list[str], field: str) -> None:
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if item in seen:
            # Listed twice, its writes would be counted twice.
            raise _error_at((field, index), f"{item} is listed twice (also at {field}.{seen[item]})")
        seen[item] = index


VolumeLabel = Annotated[str, AfterValidator(normalize_volume)]
HostDisk = Annotated[str, AfterValidator(normalize_host_disk)]
PoolName = Annotated[str, Field(max_length=TARGET_NAME_MAX, pattern=TARGET_NAME_PATTERN)]
# strict: YAML `count: yes` is a boolean, and pydantic would otherwise take it as 1 drive.
DriveCount = Annotated[int, Field(gt=0, strict=True)]
PositiveNumber = Annotated[float, Field(gt=0, strict=True)]


class SsdDrives(_Strict):
    """The drives of a pool and their rated endurance, in decimal TB (10^12 bytes) as vendors rate them:
    either the TBW per drive, or DWPD with the capacity and warranty period it is quoted against."""

    count: DriveCount
    tbw_per_drive_tb: PositiveNumber | None = None
    dwpd: PositiveNumber | None = None
    capacity_tb: PositiveNumber | None = None
    warranty_years: PositiveNumber | None = None

    @model_validator(mode="after")
    def _one_rating(self) -> Self:
        dwpd_fields = {
            "dwpd": self.dwpd,
            "capacity_tb": self.capacity_tb,
            "warranty_years": self.warranty_years,
        }
        given = [key for key, value in dwpd_fields.items() if value is not None]
        if self.tbw_per_drive_tb is not None and given:
            raise PydanticCustomError(
                "drive_rating",
                "set either tbw_per_drive_tb or dwpd with capacity_tb and warranty_years, not both",
            )
        if self.tbw_per_drive_tb is None and not given:
            raise PydanticCustomError(
                "drive_rating", "set tbw_per_drive_tb, or dwpd with capacity_tb and warranty_years"
            )
        if self.tbw_per_drive_tb is None and len(given) < len(dwpd_fields):
            missing = " and ".join(key for key in dwpd_fields if key not in given)
            raise PydanticCustomError(
                "drive_rating",
                "dwpd, capacity_tb and warranty_years go together; missing: {missing}",
                {"missing": missing},
            )
        return self

    @property
    def rating(self) -> Literal["tbw", "dwpd"]:
        return "tbw" if self.tbw_per_drive_tb is not None else "dwpd"


def _calendar_date(value: Any) -> Any:
    # pydantic would also take a unix timestamp or a datetime at midnight; only a plain date says what is
    # meant. Unquoted, YAML has already turned 2023-01-15 into a date.
    if isinstance(value, datetime) or not isinstance(value, date | str):
        raise PydanticCustomError("date_syntax", "must be a date written YYYY-MM-DD")
    if isinstance(value, str) and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise PydanticCustomError("date_syntax", "must be a date written YYYY-MM-DD")
    return value


def _not_in_future(what: str) -> Callable[[date], date]:
    def check(value: date) -> date:
        # Today anywhere on Earth is accepted: the easternmost time zone is UTC+14, so an operator there
        # may write a date that is still tomorrow in UTC.
        latest = (datetime.now(UTC) + timedelta(hours=14)).date()
        if value > latest:
            raise PydanticCustomError(
                "date_future",
                "{value} is in the future; give the date {what}",
                {"value": value.isoformat(), "what": what},
            )
        return value

    return check


# Lax (strict=False) after _calendar_date: a quoted "2021-11-30" is as clear as an unquoted date.
InServiceDate = Annotated[
    date,
    Field(strict=False),
    BeforeValidator(_calendar_date),
    AfterValidator(_not_in_future("the drives went into service")),
]
ReadDate = Annotated[
    date,
    Field(strict=False),
    BeforeValidator(_calendar_date),
    AfterValidator(_not_in_future("the counters were read")),
]
NonNegativeNumber = Annotated[float, Field(ge=0, strict=True)]


class KnownWritten(_Strict):
    """What the drives themselves say they have written, read once by the operator: the sum over the
    pool's drives of their lifetime host-write counters, in decimal TB, and the day it was read."""

    written_tb: NonNegativeNumber
    read_date: ReadDate


class SsdPool(_Strict):
    """SSDs whose write endurance is tracked together (design.md, Endurance math)."""

    drives: SsdDrives
    planned_lifetime_years: PositiveNumber
    in_service_date: InServiceDate
    known_written: KnownWritten | None = None
    volumes: list[VolumeLabel] = Field(default_factory=list)
    host_disks: list[HostDisk] = Field(default_factory=list)

    @model_validator(mode="after")
    def _where_writes_are_counted(self) -> Self:
        if not self.volumes and not self.host_disks:
            raise PydanticCustomError(
                "pool_sources", "set volumes, host_disks or both: the pool needs something to count writes on"
            )
        _list_twice(self.volumes, "volumes")
        _list_twice(self.host_disks, "host_disks")
        return self

    @model_validator(mode="after")
    def _read_in_service(self) -> Self:
        # A reading from before the drives went into service is of other drives, or a typo; the rules
        # count from the later of the two dates.
        known = self.known_written
        if known is not None and known.read_date < self.in_service_date:
            raise _error_at(
                ("known_written", "read_date"),
                f"{known.read_date.isoformat()} is before in_service_date "
                f"{self.in_service_date.isoformat()}; the reading must be of these drives in service",
            )
        return self


class TargetConfig(_Strict):
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
    ca_file: str | None = None
    login_timeout_seconds: Seconds = 5.0
    query_timeout_seconds: Seconds = 10.0
    # After a refused login (18456) the next one waits this long, doubling up to the max: a lockout
    # policy counts every failed login, and Prometheus would otherwise bring one per scrape.
    login_backoff_seconds: Seconds = 30.0
    login_backoff_max_seconds: Seconds = 900.0
    workload: Literal["oltp", "olap"] = "oltp"
    labels: dict[LabelName, LabelValue] = Field(default_factory=dict)
    auth_module: SqlName
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
    # Linked by ExporterConfig so a target can be turned into a connection string on its own.
    _auth: AuthModule | None = PrivateAttr(default=None)

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
            raise _error_at(
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
            raise _error_at(("instance",), "set either port or instance, not both")
        if self.ca_file is not None:
            if self.driver != "freetds":
                raise _error_at(
                    ("ca_file",),
                    "is for driver: freetds; the Microsoft drivers check the server certificate against "
                    "the system trust store (install the CA there)",
                )
            if self.encryption not in ("request", "require"):
                raise _error_at(("ca_file",), f"needs encryption request or require, not {self.encryption}")
            if self.trust_server_certificate:
                raise _error_at(
                    ("ca_file",), "contradicts trust_server_certificate: true (nothing would be checked)"
                )
        if self.encryption == "strict" and self.driver in ("freetds", "odbc17"):
            raise _error_at(
                ("encryption",),
                f"strict (TDS 8) needs ODBC Driver 18; driver {self.driver} cannot do it",
            )
        return self

    @model_validator(mode="after")
    def _pools(self) -> Self:
        _list_twice(self.pmem_volumes, "pmem_volumes")
        volume_pool: dict[str, str] = {}
        disk_pool: dict[str, str] = {}
        for name, pool in self.ssd_pools.items():
            if pool.host_disks and not self.colocated:
                raise _error_at(
                    ("ssd_pools", name, "host_disks"),
                    "needs colocated: true on the target; host disk counters can only be read on "
                    "SQL Server's own host",
                )
            # A volume or disk belongs to one set of drives; in two pools its writes would wear both.
            lists = (("volumes", pool.volumes, volume_pool), ("host_disks", pool.host_disks, disk_pool))
            for field, items, owner in lists:
                for index, item in enumerate(items):
                    if item in owner:
                        raise _error_at(
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
        return self._auth.username if self._auth is not None else None


class ExporterConfig(_Strict):
    default_target: str | None = None
    auth_modules: dict[SqlName, AuthModule] = Field(default_factory=dict)
    targets: Annotated[dict[str, TargetConfig], Field(min_length=1)]

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
            raise _error_at(("default_target",), f"no target named {self.default_target!r} under targets")
        for key, target in self.targets.items():
            if target.name != key:
                raise _error_at(("targets", key, "name"), "leave it out: a target is named by its key")
            module = self.auth_modules.get(target.auth_module)
            if module is None:
                raise _error_at(
                    ("targets", key, "auth_module"),
                    f"no auth module named {target.auth_module!r} under auth_modules",
                )
            target._auth = module
        return self

    def credentials_for(self, target: TargetConfig | str) -> Credentials:
        """Username and password for a target, reading the password source at this moment."""
        name = target if isinstance(target, str) else target.name
        module = self.auth_modules[self.targets[name].auth_module]
        return Credentials(module.username, module.read_password())


# --- loading -------------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; two targets with one name would silently merge."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: the base class reports it with its position
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: yaml.Node) -> Any:
        # An unquoted 2023-02-30 looks like a date to YAML, and the base class lets datetime's ValueError
        # escape; report it like any other YAML error, with its position.
        try:
            return super().construct_yaml_timestamp(node)  # type: ignore[misc]
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"invalid date: {exc}", node.start_mark
            ) from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:timestamp", _UniqueKeyLoader.construct_yaml_timestamp)


def _yaml_error(path: str, exc: yaml.YAMLError) -> ConfigError:
    # str(exc) would quote a snippet of the offending line, which may be next to a secret; keep to
    # the position and the parser's description.
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or "invalid YAML"
    context = getattr(exc, "context", None)
    detail = f"{context}: {problem}" if context else problem
    return ConfigError(f"{path}: {where}invalid YAML: {detail}")


def _read_yaml(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not valid UTF-8") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None


_SHOULD = re.compile(r"^(Input|String|Value|Dictionary|List|Number) should (?:be )?")
_GENERIC_TYPES = {
    "model_type": "must be a mapping (key: value)",
    "dict_type": "must be a mapping (key: value)",
}


# Type checks are strict (no "1433" for a port, no `true` for a number, no "yes" for a boolean): the error
# names what YAML made of the value, since that is what the operator must change.
_STRICT_TYPES = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
}


def _yaml_type(value: Any) -> str:
    """What YAML made of a value, for an error message. Strings are not echoed: a misplaced secret
    could be one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string (quoted in YAML, or not a plain number or true/false)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _describe(error: Mapping[str, Any]) -> str:
    """pydantic's wording ("Input should be ...") rephrased for someone editing a YAML file."""
    kind = error["type"]
    if kind in _STRICT_TYPES:
        return f"expected {_STRICT_TYPES[kind]}, got {_yaml_type(error.get('input'))}"
    loc = error["loc"]
    if kind == "extra_forbidden":
        return INLINE_PASSWORD_MESSAGE if loc and loc[-1] == "password" else "unknown key"
    if kind == "missing":
        return "is required"
    if kind in _GENERIC_TYPES:
        return _GENERIC_TYPES[kind]
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    match = _SHOULD.match(message)
    if match:
        verb = "must be " if "be " in match.group(0) else "must "
        message = verb + message[match.end() :]
    return message


def _error_line(source: str, error: Mapping[str, Any]) -> str:
    parts = [str(part) for part in error["loc"]]
    what = _describe(error)
    if parts and parts[-1] == "[key]":
        # pydantic's marker for an invalid mapping key; the key itself is already the previous part.
        parts.pop()
        what = f"invalid key: {what}"
    return f"{source}: {'.'.join(parts)}: {what}" if parts else f"{source}: {what}"


def _to_config_error(source: str, exc: ValidationError) -> ConfigError:
    # Inputs are kept only for the type errors, where _yaml_type shows a string's type but never its text.
    errors = [
        error if error["type"] in _STRICT_TYPES else {k: v for k, v in error.items() if k != "input"}
        for error in exc.errors(include_url=False, include_input=True)
    ]
    return ConfigError([_error_line(source, error) for error in errors])


def parse_config(
    data: Any, source: str = "<config>", base_dir: str | os.PathLike[str] = "."
) -> ExporterConfig:
    """Validate already-parsed YAML. `source` prefixes every error line; `base_dir` anchors relative
    password_file paths."""
    if data is None:
        raise ConfigError(f"{source}: the config is empty; at least one target is required")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping (key: value)")
    try:
        return ExporterConfig.model_validate(data, context={"base_dir": str(base_dir)})
    except ValidationError as exc:
        raise _to_config_error(source, exc) from None


def load_config(path: str) -> ExporterConfig:
    """Read and validate the YAML config at `path`; every problem raises ConfigError."""
    data = _read_yaml(path)
    return parse_config(data, source=path, base_dir=os.path.dirname(os.path.abspath(path)))


# --- drivers and connection strings --------------------------------------------------------------------


def driver_kind(driver: str) -> DriverKind:
    """Which connection-string dialect an installed driver name (from pyodbc.drivers()) speaks."""
    lowered = driver.lower()
    if "freetds" in lowered:
        return "freetds"
    if lowered.startswith("odbc driver 18 "):
        return "odbc18"
    if lowered.startswith("odbc driver 17 "):
        return "odbc17"
    raise DriverError(
        f"unsupported ODBC driver {driver!r}; use ODBC Driver 18 or 17 for SQL Server or FreeTDS"
    )


def resolve_driver(choice: str, available: list[str], *, encryption: str = "require") -> str:
    """The installed driver name to use for a target's `driver` choice.

    `auto` prefers ODBC Driver 18, then 17, then FreeTDS; with `encryption: strict` only 18 qualifies,
    because neither 17 nor FreeTDS 1.3 speaks TDS 8.
    """
    kinds: dict[str, str] = {}
    for name in available:
        try:
            kinds.setdefault(driver_kind(name), name)
        except DriverError:
            continue
    wanted = ["odbc18", "odbc17", "freetds"] if choice == "auto" else [choice]
    if encryption == "strict":
        wanted = [kind for kind in wanted if kind == "odbc18"]
    for kind in wanted:
        if kind in kinds:
            return kinds[kind]
    installed = ", ".join(available) if available else "none"
    label = {"odbc18": ODBC18, "odbc17": ODBC17, "freetds": FREETDS}
    needed = " or ".join(label.get(kind, kind) for kind in wanted) or choice
    why = " for encryption strict" if encryption == "strict" else ""
    raise DriverError(
        f"driver {choice!r} needs {needed}{why}, which is not installed (installed ODBC drivers: {installed})"
    )


def _odbc_value(value: str) -> str:
    # ODBC connection-string quoting: braces protect ';' and '}'; a closing brace inside is doubled.
    if ";" in value or "}" in value or value.startswith("{") or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


_MS_ENCRYPT = {"off": "no", "request": "no", "require": "yes", "strict": "strict"}


def freetds_verifies(target: TargetConfig) -> bool:
    """Whether FreeTDS must check this target's certificate: it encrypts, and nobody said to trust."""
    return target.encryption in ("request", "require") and not target.trust_server_certificate


FREETDS_SYSTEM_CA = "system"  # freetds.conf's name for the system trust store


def freetds_section(target: TargetConfig) -> tuple[str, str]:
    """The freetds.conf section (name, text) that makes FreeTDS check the target's certificate.

    FreeTDS 1.3 takes a CA file only from freetds.conf, and reads that file only for a `Servername=`
    connection string (measured; tests/test_tds_protocol.py), so the address moves into the section.
    The name carries a digest of the text: two configs never share a section, even in one process.
    """
    lines = [f"host = {target.host}"]
    lines.append(f"instance = {target.instance}" if target.instance else f"port = {target.port}")
    lines += [
        "tds version = 7.4",
        f"ca file = {target.ca_file or FREETDS_SYSTEM_CA}",
        "check certificate hostname = yes",
    ]
    body = "".join(f"\t{line}\n" for line in lines)
    digest = hashlib.sha256(f"{target.name}\n{body}".encode()).hexdigest()[:12]
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", target.name)[:40]
    name = f"mssql-exporter-{readable}-{digest}"
    return name, f"[{name}]\n{body}"


def _connection_pairs(
    target: TargetConfig, driver: str, username: str, password: str
) -> list[tuple[str, str]]:
    kind = driver_kind(driver)
    if kind == "freetds":
        if target.encryption == "strict":
            raise DriverError(f"target {target.name}: FreeTDS cannot do strict (TDS 8) encryption")
        if freetds_verifies(target):
            server = [("Servername", freetds_section(target)[0])]
        elif target.instance:
            server = [("Server", f"{target.host}\\{target.instance}")]
        else:
            server = [("Server", target.host), ("Port", str(target.port))]
        # FreeTDS ignores Encrypt=; its own key is Encryption= (design.md, Drivers).
        dialect = [("TDS_Version", "7.4"), ("Encryption", target.encryption), ("ClientCharset", "UTF-8")]
    else:
        if target.encryption == "strict" and kind != "odbc18":
            raise DriverError(f"target {target.name}: {driver} cannot do strict (TDS 8) encryption")
        address = (
            f"{target.host}\\{target.instance}" if target.instance else f"tcp:{target.host},{target.port}"
        )
        server = [("Server", address)]
        dialect = [
            ("Encrypt", _MS_ENCRYPT[target.encryption]),
            ("TrustServerCertificate", "yes" if target.trust_server_certificate else "no"),
        ]
    return [
        ("Driver", driver),
        *server,
        ("Database", target.database),
        *dialect,
        ("APP", "mssql-memory-exporter"),
        ("UID", username),
        ("PWD", password),
    ]


def _join(pairs: list[tuple[str, str]]) -> str:
    # The driver name is always braced: that is the form every driver manager documents. The closing
    # `;` matters: without it FreeTDS 1.3 keeps a last braced value's closing brace, so a password with
    # `;` or leading/trailing blanks (the values that need braces) never logged in.
    return "".join(
        (f"{key}={{{value.replace('}', '}}')}}}" if key == "Driver" else f"{key}={_odbc_value(value)}") + ";"
        for key, value in pairs
    )


def _username(target: TargetConfig, username: str | None) -> str:
    resolved = username if username is not None else target.username
    if resolved is None:
        raise ConfigError(f"target {target.name}: no username; load the target through ExporterConfig")
    return resolved


def build_connection_string(
    target: TargetConfig, driver: str, password: str | SecretStr, *, username: str | None = None
) -> str:
    """ODBC connection string for `target` through the installed `driver` (a pyodbc.drivers() name).

    The username comes from the target's auth module unless given. The result holds the password:
    log `connection_string_redacted()` instead.
    """
    secret = password.get_secret_value() if isinstance(password, SecretStr) else password
    return _join(_connection_pairs(target, driver, _username(target, username), secret))


def connection_string_redacted(target: TargetConfig, driver: str, *, username: str | None = None) -> str:
    """The same connection string with the password replaced, for logs and error messages."""
    return _join(_connection_pairs(target, driver, _username(target, username), "********"))
