"""The exporter's own freetds.conf, the one place FreeTDS 1.3 takes a CA file from.

FreeTDS verifies a server certificate only when the connection's freetds.conf section names a CA file
(`ca file`, or `system` for the system trust store), and it reads freetds.conf only for connection
strings that name a section (`Servername=`). So each FreeTDS target that encrypts without
`trust_server_certificate` gets a section in a file this module writes, and FREETDSCONF points there.

The environment is changed once, from the thread that builds the Scraper, before any connection is
opened: setenv while another thread is inside the driver's getenv is not safe.

The file is written once at start-up with every section (not once per target: that grew with the
square of the fleet), and again only when a section changes or the file on disk is no longer the one
written (checked by stat at each login). remove_directory() removes it; the CLI calls it on every way
out of main(), and atexit covers other users of this module.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

from ..config import TargetConfig, freetds_section, freetds_verifies

log = logging.getLogger(__name__)

ENV = "FREETDSCONF"
PREFIX = "mssql-exporter-freetds-"  # the private directory, under $TMPDIR or /tmp
HEADER = "# Written by mssql-memory-exporter for its FreeTDS connections; rewritten when needed.\n"


class FreeTdsConfError(Exception):
    """The private freetds.conf cannot be written; the message names the path, never a secret."""


class _Conf:
    """The file and its directory. The text is built and written only when a section is added or
    changed, and at a login only when the file on disk is no longer the one written last (a temp
    cleaner removed it): start-up with N targets writes the file once, not N times (issue 14)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "freetds.conf"
        self.sections: dict[str, str] = {}
        self.lock = threading.Lock()
        self.closed = False
        # (device, inode, size, mtime) of the file as last written: a login compares two lstat() calls
        # against it instead of reading the whole file back.
        self._written: tuple[int, int, int, int] | None = None

    def add(self, sections: Iterable[tuple[str, str]], *, reopen: bool = False) -> None:
        with self.lock:
            if reopen:
                self.closed = False
            changed = False
            for name, text in sections:
                if self.sections.get(name) != text:
                    self.sections[name] = text
                    changed = True
            if changed or not self._on_disk():
                self._write()

    def check(self) -> None:
        with self.lock:
            if not self._on_disk():
                self._write()

    def _on_disk(self) -> bool:
        """Whether the file this process wrote last is still there, in the private directory."""
        if self._written is None:
            return False
        try:
            self._check_directory()
            info = self.path.lstat()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise FreeTdsConfError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        # Another user cannot make a file owned by this one, so the owner check rules out a file
        # planted in a directory recreated by someone else (that directory fails _check_directory).
        return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and self._written == _identity(info)

    def _write(self) -> None:
        if self.closed:
            raise FreeTdsConfError(f"{self.path} was removed: the exporter is stopping")
        text = HEADER + "\n".join(self.sections[name] for name in sorted(self.sections))
        tmp = None
        try:
            self._own_directory()
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".freetds.conf.")
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
                fh.flush()
                written = os.fstat(fh.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:
            if tmp is not None:  # a full disk, say: no half-written file left beside the real one
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise FreeTdsConfError(f"cannot write {self.path}: {exc.strerror or exc}") from None
        self._written = _identity(written)

    def _own_directory(self) -> None:
        """Recreate the directory if it vanished; never use one that someone else made in its place."""
        with contextlib.suppress(FileExistsError):
            self.directory.mkdir(mode=0o700)
        self._check_directory()

    def _check_directory(self) -> None:
        info = self.directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise FreeTdsConfError(f"{self.directory} is not a private directory of this user")

    def remove(self) -> None:
        with self.lock:
            self.closed = True
            _remove_if_ours(self.directory)


def _identity(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _remove_if_ours(directory: Path) -> None:
    try:
        info = directory.lstat()
    except OSError:
        return  # never made, or already gone
    # A directory of that name made by another user (the name was taken first) is not ours to remove.
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
        shutil.rmtree(directory, ignore_errors=True)


_conf: _Conf | None = None
_conf_lock = threading.Lock()


def _the_conf() -> _Conf:
    global _conf
    with _conf_lock:
        if _conf is None:
            # The name is chosen and recorded here, and the directory made by the first write: a
            # signal that stops start-up in between finds it recorded, so remove_directory() removes it.
            name = PREFIX + secrets.token_hex(8)
            _conf = _Conf(Path(tempfile.gettempdir()) / name)
        return _conf


def remove_directory() -> None:
    """Remove the private directory and its freetds.conf. A FreeTDS login after this fails instead of
    writing it again (the exporter is stopping). Idempotent; runs at exit too (atexit), and the CLI
    calls it on every way out of main(), signals during start-up included."""
    with _conf_lock:
        conf = _conf
    if conf is not None:
        conf.remove()


atexit.register(remove_directory)


def private_directory_path() -> Path:
    """Where the private directory is (or will be), without making it."""
    return _the_conf().directory


def private_directory(*, reopen: bool = False) -> Path:
    """The exporter's private directory (mode 0700, this user's), made if needed; the Kerberos
    credential cache lives here too, so it goes with the directory when the exporter stops. `reopen`
    as in prepare(): a new Scraper after remove_directory()."""
    conf = _the_conf()
    with conf.lock:
        if reopen:
            conf.closed = False
        if conf.closed:
            raise FreeTdsConfError(f"{conf.directory} was removed: the exporter is stopping")
        conf._own_directory()
    return conf.directory


def prepare(targets: Iterable[TargetConfig]) -> Path | None:
    """Write the sections of every target FreeTDS would have to verify and point FREETDSCONF at the
    file. Call before any connection is opened. Returns the file, or None if no target needs it."""
    # Targets pinned to a Microsoft driver never reach FreeTDS.
    wanted = [t for t in targets if t.driver in ("auto", "freetds") and freetds_verifies(t)]
    if not wanted:
        return None
    try:
        conf = _the_conf()
        # One write, whatever the fleet size. A new Scraper after remove_directory() (tests run main()
        # in-process, then build more) reopens it; stray logins of the stopped one do not.
        conf.add((freetds_section(target) for target in wanted), reopen=True)
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
        conf.add([(name, text)])
    else:
        conf.check()
    if os.environ.get(ENV) != str(conf.path):
        # Only when something else changed the variable after prepare() (tests do); rare by design.
        log.warning("FREETDSCONF changed under the exporter; pointing it back", extra={"path": conf.path})
        os.environ[ENV] = str(conf.path)
    return name
