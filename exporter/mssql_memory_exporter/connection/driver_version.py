"""The version of the FreeTDS ODBC driver a driver name resolves to, and what that version cannot send.

FreeTDS before 1.4 misparses a braced connection-string value holding `}`: it keeps the closing brace
as part of the value and does not un-double `}}` (measured with Debian 12's 1.3.17 against the stand-in),
so a password with `}` can never log in through it. 1.4 parses it. The version is read from the
driver library that the driver manager would load for the name, not from a package manager: the one
actually resolved is what matters (a self-built FreeTDS in /usr/local shadows Debian's).
"""

from __future__ import annotations

import ctypes
import functools
import re
import shutil
import subprocess
from pathlib import Path

# FreeTDS embeds "freetds v1.3.17" in its libraries (what `tsql -C` prints).
_VERSION = re.compile(rb"freetds v(\d+)\.(\d+)(?:\.(\d+))?")
FIRST_TO_PARSE_BRACES = (1, 4)


def _driver_library(driver: str) -> str | None:
    """The `Driver=` path odbcinst registers for `driver` (absolute, or a name dlopen resolves)."""
    odbcinst = shutil.which("odbcinst")
    if odbcinst is None:
        return None
    try:
        result = subprocess.run(
            [odbcinst, "-q", "-d", "-n", driver], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^Driver\s*=\s*(.+?)\s*$", result.stdout, re.MULTILINE)
    return match.group(1) if match else None


def _mapped(stem: str) -> Path | None:
    """The file of a library this process has mapped whose name starts with `stem`."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(stem):
            return Path(fields[5])
    return None


def _loaded_path(library: str) -> Path | None:
    """Where the driver manager finds `library`: as given when absolute; otherwise where the dynamic
    loader finds it, or unixODBC's default driver directory (`<libdir>/odbc`, next to libodbc itself,
    which is where Debian's odbcinst.ini entry `Driver=libtdsodbc.so` resolves)."""
    if Path(library).is_absolute():
        return Path(library).resolve()
    try:
        ctypes.CDLL(library)
        return _mapped(Path(library).name.split(".so")[0])
    except OSError:
        pass
    try:
        import pyodbc  # noqa: F401 - maps libodbc into the process, so its directory can be read
    except ImportError:
        return None
    libodbc = _mapped("libodbc.so")
    if libodbc is None:
        return None
    for candidate in (libodbc.parent / "odbc" / library, libodbc.parent / library):
        if candidate.exists():
            return candidate.resolve()
    return None


@functools.cache
def freetds_version(driver: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the FreeTDS library behind `driver`, or None when it cannot be told."""
    library = _driver_library(driver)
    path = _loaded_path(library) if library else None
    if path is None:
        return None
    try:
        match = _VERSION.search(path.read_bytes())
    except OSError:
        return None
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def unsendable_password_reason(driver: str, password: str) -> str | None:
    """Why `password` cannot log in through the FreeTDS `driver`, or None when it can (or the version is
    unknown: then the login itself will tell). Never contains the password."""
    if "}" not in password:
        return None
    version = freetds_version(driver)
    if version is None or version[:2] >= FIRST_TO_PARSE_BRACES:
        return None
    dotted = ".".join(str(part) for part in version)
    return (
        f"the password contains '}}', which FreeTDS {dotted} (the ODBC driver '{driver}' resolves to) "
        "cannot send: before 1.4 it keeps the closing brace of a quoted value. Change the password, "
        "or use FreeTDS 1.4 or later, or Microsoft's ODBC Driver 18 (driver: odbc18)"
    )
