"""The exporter's own freetds.conf, the one place FreeTDS 1.3 takes a CA file from.

FreeTDS verifies a server certificate only when the connection's freetds.conf section names a CA file
(`ca file`, or `system` for the system trust store), and it reads freetds.conf only for connection
strings that name a section (`Servername=`). So each FreeTDS target that encrypts without
`trust_server_certificate` gets a section in a file this module writes, and FREETDSCONF points there.

The environment is changed once, from the thread that builds the Scraper, before any connection is
opened: setenv while another thread is inside the driver's getenv is not safe.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from .config import TargetConfig, freetds_section, freetds_verifies

log = logging.getLogger(__name__)

ENV = "FREETDSCONF"
HEADER = "# Written by mssql-memory-exporter for its FreeTDS connections; rewritten when needed.\n"


class FreeTdsConfError(Exception):
    """The private freetds.conf cannot be written; the message names the path, never a secret."""


class _Conf:
    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="mssql-exporter-freetds-"))  # mode 0700
        self.path = self.directory / "freetds.conf"
        self.sections: dict[str, str] = {}
        self.lock = threading.Lock()
        atexit.register(shutil.rmtree, self.directory, True)

    def add(self, name: str, text: str) -> None:
        with self.lock:
            self.sections[name] = text
            self._write_if_changed()

    def check(self) -> None:
        with self.lock:
            self._write_if_changed()

    def _write_if_changed(self) -> None:
        wanted = HEADER + "\n".join(self.sections[name] for name in sorted(self.sections))
        try:
            if self.path.read_text() == wanted:
                return
        except OSError:
            pass  # missing (a temp cleaner, say): written again below
        try:
            self._own_directory()
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".freetds.conf.")
            with os.fdopen(fd, "w") as fh:
                fh.write(wanted)
            os.replace(tmp, self.path)
        except OSError as exc:
            raise FreeTdsConfError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def _own_directory(self) -> None:
        """Recreate the directory if it vanished; never use one that someone else made in its place."""
        with contextlib.suppress(FileExistsError):
            self.directory.mkdir(mode=0o700)
        info = self.directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise FreeTdsConfError(f"{self.directory} is not a private directory of this user")


_conf: _Conf | None = None
_conf_lock = threading.Lock()


def _the_conf() -> _Conf:
    global _conf
    with _conf_lock:
        if _conf is None:
            try:
                _conf = _Conf()
            except OSError as exc:
                where = tempfile.gettempdir()
                message = f"cannot create a private directory in {where}: {exc.strerror or exc}"
                raise FreeTdsConfError(message) from None
        return _conf


def prepare(targets: Iterable[TargetConfig]) -> Path | None:
    """Write the sections of every target FreeTDS would have to verify and point FREETDSCONF at the
    file. Call before any connection is opened. Returns the file, or None if no target needs it."""
    # Targets pinned to a Microsoft driver never reach FreeTDS.
    wanted = [t for t in targets if t.driver in ("auto", "freetds") and freetds_verifies(t)]
    if not wanted:
        return None
    try:
        conf = _the_conf()
        for target in wanted:
            conf.add(*freetds_section(target))
    except FreeTdsConfError as exc:
        # Not fatal here: only FreeTDS logins need the file, and each one tries again (and fails
        # with this message) rather than connect without checking the certificate.
        log.warning("cannot write the FreeTDS configuration", extra={"err": str(exc)})
        return None
    if os.environ.get(ENV) != str(conf.path):
        os.environ[ENV] = str(conf.path)
    return conf.path


def ensure(target: TargetConfig) -> str:
    """Make sure the target's section is on disk (a temp cleaner may have removed it) and FREETDSCONF
    still points there; returns the section name for `Servername=`."""
    name, text = freetds_section(target)
    conf = _the_conf()
    if conf.sections.get(name) != text:
        conf.add(name, text)
    else:
        conf.check()
    if os.environ.get(ENV) != str(conf.path):
        # Only when something else changed the variable after prepare() (tests do); rare by design.
        log.warning("FREETDSCONF changed under the exporter; pointing it back", extra={"path": conf.path})
        os.environ[ENV] = str(conf.path)
    return name
