"""Microsoft's ODBC Driver 18 as pip installs it (the `msodbc` extra: PyPI's `mssql-python-odbc`).

The wheel carries the driver's Linux builds for three families of distributions
(`libs/linux/<family>/<arch>/lib/libmsodbcsql-18.*.so.*`, each with the `libodbcinst.so.2` it was built
against beside it, found through the library's own run path). Nothing registers it with unixODBC. The
exporter does not either: no file of the system's is edited, no odbcinst.ini is written and no
environment variable is set. It names the library's path where a driver name goes (`Driver={/path}`),
which unixODBC's driver manager accepts as it is (measured with unixODBC 2.3.11: pyodbc logs in to the
stand-in either way; a private odbcinst.ini through ODBCSYSINI works too, but hides the system's own
drivers unless copied into it, and must be in place before the driver manager first reads it).

So the path is the "installed driver name" the rest of the exporter passes around for this driver:
`config.driver_kind` knows it by its file name, `available_drivers()` lists it after the registered ones.
A Driver 18 registered in odbcinst.ini (Microsoft's apt package) is listed first and so preferred: an
administrator who installed it chose it, and keeps it patched with the system.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass
from pathlib import Path

DISTRIBUTION = "mssql-python-odbc"
MODULE = "mssql_python_odbc"
# The wheel's directory per family of distributions, and the os-release ids that belong to it.
_FAMILIES = (
    ("debian_ubuntu", ("debian", "ubuntu")),
    ("rhel", ("rhel", "centos", "fedora", "rocky", "almalinux", "ol", "amzn")),
    ("suse", ("suse", "sles", "opensuse", "opensuse-leap")),
    ("alpine", ("alpine",)),
)


@dataclass(frozen=True)
class PackagedDriver:
    path: Path  # the driver library; also its name in a connection string
    version: str  # the package's version: the driver's release and the package's own revision
    family: str  # which of the wheel's builds: debian_ubuntu, rhel, suse, alpine

    def describe(self) -> str:
        """How --version and the build info name it."""
        return f"ODBC Driver 18 for SQL Server {self.version} ({DISTRIBUTION})"


def _os_ids(text: str) -> list[str]:
    """ID then ID_LIKE of an os-release file, lowercased: the first family that matches wins."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'").lower()
    return [values.get("ID", ""), *values.get("ID_LIKE", "").split()]


def family_for(os_release: str) -> str:
    """The wheel's family for this system's os-release text; Debian's build when nothing matches
    (it needs the fewest libraries beyond glibc's)."""
    for os_id in _os_ids(os_release):
        for family, ids in _FAMILIES:
            if os_id in ids:
                return family
    return "debian_ubuntu"


def _read_os_release() -> str:
    for candidate in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            return Path(candidate).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return ""


def library_in(libs: Path, family: str, machine: str) -> Path | None:
    """The driver library of `family` for CPU `machine` under the package's `libs` directory."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    found = sorted((libs / "linux" / family / arch / "lib").glob("libmsodbcsql-18.*.so*"))
    return found[-1] if found else None


@functools.cache
def packaged_driver() -> PackagedDriver | None:
    """The driver the `msodbc` extra installed for this system, or None without the extra (or on a
    system the wheel has no build for)."""
    try:
        import mssql_python_odbc
    except ImportError:
        return None
    libs = Path(mssql_python_odbc.get_libs_dir())
    family = family_for(_read_os_release())
    library = library_in(libs, family, platform.machine())
    if library is None:
        return None
    return PackagedDriver(library, str(getattr(mssql_python_odbc, "__version__", "unknown")), family)


def with_packaged(registered: list[str]) -> list[str]:
    """The registered driver names (pyodbc.drivers()) and then the packaged driver's path, if any."""
    packaged = packaged_driver()
    return [*registered, str(packaged.path)] if packaged is not None else list(registered)


def available_drivers() -> list[str]:
    """Every driver a target may use: the ones unixODBC has registered, then the packaged one."""
    import pyodbc

    return with_packaged(pyodbc.drivers())
