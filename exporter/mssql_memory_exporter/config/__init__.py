"""The exporter's YAML configuration: models, loader, secrets and ODBC connection strings.

Modules, each with one job: `fields` (shared field types and constants), `auth` (auth modules and where
passwords live), `volumes` (volume and disk syntax), `ssd` (SSD pools), `drives` (drive health),
`collectors` (which collectors run), `models` (targets, the whole file, parse and load), `yaml_loading`
(strict YAML reading), `errors` (the error type and the rewording of pydantic's messages), `odbc` (drivers
and connection strings). Import from the package: its names below are the interface; the modules may move.

Everything an operator can get wrong is reported as one `ConfigError` line per problem, in the form
`<file>: <dotted.field.path>: <what is wrong>`, so a failed start points at the line to fix.
Passwords never live in the file or in these objects: an auth module names an environment variable or
a file, which is read only when a connection is made, so a rotated secret needs no restart.
"""

from __future__ import annotations

from .auth import AuthModule, Credentials
from .drives import DriveConfig, DriveHealthConfig
from .errors import ConfigError, CredentialError, DriverError, LoadAbandoned, ReloadRefused
from .fields import RESERVED_LABELS, TARGET_NAME_MAX
from .models import ExporterConfig, TargetConfig, load_config, parse_config
from .odbc import (
    build_connection_string,
    connection_string_redacted,
    driver_kind,
    freetds_section,
    freetds_verifies,
    resolve_driver,
)
from .ssd import KnownWritten, SsdDrives, SsdPool
from .volumes import normalize_host_disk, normalize_volume

__all__ = [
    "RESERVED_LABELS",
    "TARGET_NAME_MAX",
    "AuthModule",
    "ConfigError",
    "CredentialError",
    "Credentials",
    "DriveConfig",
    "DriveHealthConfig",
    "DriverError",
    "ExporterConfig",
    "KnownWritten",
    "LoadAbandoned",
    "ReloadRefused",
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
