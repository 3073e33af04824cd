"""What this exporter is built from: its version, the source revision, Python, pyodbc and the ODBC drivers.

The revision is the git commit the package was built from. An installed package has no git checkout
beside it, so the build writes the commit into the package (`REVISION`, beside this module): setup.py
does it when `pip install .` or a wheel build runs in a git work tree, and the Dockerfile (whose build
context has no .git) writes the `REVISION` build argument there. Running from a source checkout
(an editable install, tests) asks git. `MSSQL_EXPORTER_REVISION` in the environment overrides both,
for packagers with their own scheme. Otherwise: "unknown".
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import Metric

from .. import __version__
from ..metrics.builder import FamilyBuilder

REVISION_ENV = "MSSQL_EXPORTER_REVISION"
REVISION_FILE = Path(__file__).with_name("REVISION")
UNKNOWN = "unknown"
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
# Driver names that speak to SQL Server, as unixODBC lists them.
_SQL_SERVER_DRIVERS = re.compile(r"FreeTDS|SQL Server", re.IGNORECASE)


@dataclass(frozen=True)
class BuildInfo:
    version: str
    revision: str
    python: str
    pyodbc: str
    driver: str  # the SQL Server ODBC drivers installed, comma-separated, FreeTDS with its version

    def labels(self) -> dict[str, str]:
        return {
            "version": self.version,
            "revision": self.revision,
            "python": self.python,
            "pyodbc": self.pyodbc,
            "driver": self.driver,
        }

    def text(self) -> str:
        """What --version prints."""
        return (
            f"mssql-memory-exporter {self.version} (revision {self.revision})\n"
            f"  python {self.python}, pyodbc {self.pyodbc}\n"
            f"  drivers: {self.driver or 'none found'}"
        )


def _git_revision(directory: Path) -> str | None:
    """HEAD of the git work tree holding `directory`, if it is in one and git is installed."""
    if not any((parent / ".git").exists() for parent in (directory, *directory.parents)):
        return None
    try:
        result = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and _COMMIT.match(commit) else None


def _file_revision() -> str | None:
    try:
        text = REVISION_FILE.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if _COMMIT.match(text) else None


@functools.cache
def revision() -> str:
    from_env = os.environ.get(REVISION_ENV, "").strip()
    if from_env:
        return from_env if _COMMIT.match(from_env) else UNKNOWN
    return _file_revision() or _git_revision(Path(__file__).resolve().parent) or UNKNOWN


def _drivers() -> tuple[str, str]:
    try:
        import pyodbc
    except ImportError:
        return UNKNOWN, ""
    from ..connection.driver_version import freetds_version
    from ..connection.msodbc import packaged_driver

    names = []
    for name in pyodbc.drivers():
        if not _SQL_SERVER_DRIVERS.search(name):
            continue
        version = freetds_version(name) if "freetds" in name.lower() else None
        names.append(f"{name} {'.'.join(map(str, version))}" if version else name)
    packaged = packaged_driver()
    if packaged is not None:
        # Named with the package's version: its library file only says 18.6.
        names.append(packaged.describe())
    return str(getattr(pyodbc, "version", UNKNOWN)), ",".join(sorted(names))


@functools.cache
def build_info() -> BuildInfo:
    pyodbc_version, drivers = _drivers()
    return BuildInfo(__version__, revision(), platform.python_version(), pyodbc_version, drivers)


def build_info_families() -> list[Metric]:
    out = FamilyBuilder({})
    out.gauge(
        "mssql_exporter_build_info",
        "1, labelled with the exporter's version, source revision, Python, pyodbc and SQL Server ODBC "
        "drivers.",
        1.0,
        build_info().labels(),
    )
    return out.families()
