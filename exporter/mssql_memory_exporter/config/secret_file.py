"""Files that hold a secret (a password, a keytab): what may be one, and what is risky about it.

A secret file must be a regular file, or a symlink to one: Kubernetes mounts a secret's keys as
`<key> -> ..data/<key>` with `..data -> ..<timestamp>/`, and swaps `..data` to rotate them. Anything else
is refused with what it is, because each of those fails badly later: a directory or a socket cannot be
read, a FIFO blocks the reading thread until someone writes to it, a device can be endless, and a
/proc or /sys file (`/proc/self/environ`) reads as a "regular" empty-sized file whose content is the
process' own state, which the exporter would then send to SQL Server as the password.

Risky but working set-ups are warnings, not errors: a secret other users can read, or one owned by
another (non-root) user, who can change it. Kubernetes (defaultMode 0440 with fsGroup) and systemd
credentials (0400) pass without a warning.

Messages name the path and the problem, never the content.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import stat
from dataclasses import dataclass

# Filesystems whose files describe the kernel or a process rather than hold data someone wrote.
PSEUDO_FILESYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "devtmpfs",
        "devpts",
        "cgroup",
        "cgroup2",
        "debugfs",
        "tracefs",
        "securityfs",
        "configfs",
        "bpf",
        "pstore",
        "efivarfs",
        "fusectl",
        "mqueue",
        "hugetlbfs",
        "binfmt_misc",
        "autofs",
    }
)
# Where those are mounted when the mount table cannot be read (not Linux, or /proc missing).
PSEUDO_PREFIXES = ("/proc/", "/sys/", "/dev/")
MOUNTINFO = "/proc/self/mountinfo"
# A password is at most 128 characters to SQL Server; a keytab a few kilobytes. Anything far larger
# was not meant as a secret.
DEFAULT_MAX_BYTES = 1 << 20


class SecretFileError(Exception):
    """What is wrong with a secret file, in words an operator can act on; never its content."""


@dataclass(frozen=True)
class SecretFile:
    """A checked secret file: its bytes and the warnings about how it is kept."""

    path: str
    content: bytes
    warnings: tuple[str, ...]


def _kind(mode: int) -> str | None:
    """The file type in words when it is not a regular file."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def _filesystem_type(device: int) -> str | None:
    """The type of the filesystem mounted with this device number, from the mount table (Linux)."""
    wanted = f"{os.major(device)}:{os.minor(device)}"
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                # "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
                fields = line.split()
                if len(fields) > 2 and fields[2] == wanted and " - " in line:
                    return line.split(" - ", 1)[1].split()[0]
    except OSError:
        return None
    return None


def _pseudo_file(resolved: str, info: os.stat_result) -> str | None:
    fs_type = _filesystem_type(info.st_dev)
    if fs_type in PSEUDO_FILESYSTEMS:
        return fs_type
    if fs_type is None and resolved.startswith(PSEUDO_PREFIXES):
        return resolved.split("/", 2)[1]
    return None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _group(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def _own_groups() -> set[int]:
    groups = {os.getegid()}
    with contextlib.suppress(OSError):
        groups.update(os.getgroups())
    return groups


def access_warnings(path: str, info: os.stat_result) -> list[str]:
    """Who besides this process can read or change the secret, when that is more than it needs."""
    mode = stat.S_IMODE(info.st_mode)
    warnings = []
    if mode & stat.S_IROTH:
        warnings.append(
            f"{path} is readable by every user on this machine (mode {mode:04o}); make it readable by the "
            "exporter only (chmod 600, or 0400 for a Kubernetes secret's defaultMode)"
        )
    elif mode & stat.S_IRGRP and info.st_gid not in _own_groups():
        warnings.append(
            f"{path} is readable by group {_group(info.st_gid)}, which the exporter's user is not in "
            f"(mode {mode:04o}); chmod g-r unless that group is meant to read it"
        )
    euid = os.geteuid()
    if info.st_uid not in (euid, 0):
        warnings.append(
            f"{path} is owned by {_user(info.st_uid)}, not by the exporter's user {_user(euid)} or root: "
            "that user can change the secret"
        )
    return warnings


def _check_path(path: str, what: str = "a secret") -> os.stat_result:
    """stat() the path (following symlinks), or say exactly why it cannot hold `what`."""
    try:
        link = os.lstat(path)
    except FileNotFoundError:
        raise SecretFileError(f"{path} does not exist") from None
    except NotADirectoryError:
        raise SecretFileError(f"{path} does not exist (a part of the path is not a directory)") from None
    except PermissionError:
        raise SecretFileError(f"{path} cannot be reached: a directory on the way is not searchable") from None
    except (OSError, ValueError) as exc:  # ValueError: an embedded NUL byte
        raise SecretFileError(f"{path} cannot be examined: {_reason(exc)}") from None
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise SecretFileError(f"{path} is a symlink to a file that does not exist") from None
    except OSError as exc:
        raise SecretFileError(f"{path} cannot be examined: {_reason(exc)}") from None
    kind = _kind(info.st_mode)
    if kind is not None:
        via = " (through a symlink)" if stat.S_ISLNK(link.st_mode) else ""
        raise SecretFileError(f"{path} is {kind}{via}, not a regular file")
    resolved = os.path.realpath(path)
    pseudo = _pseudo_file(resolved, info)
    if pseudo is not None:
        raise SecretFileError(
            f"{path} is on the kernel's {pseudo} filesystem ({resolved}): it describes the system, it does "
            f"not hold {what}"
        )
    return info


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__


def check_secret_file(path: str) -> list[str]:
    """Check that `path` can hold a secret without reading it; returns warnings, raises SecretFileError."""
    info = _check_path(path)
    if not os.access(path, os.R_OK):
        raise SecretFileError(
            f"{path} is not readable by the exporter's user {_user(os.geteuid())} (owner "
            f"{_user(info.st_uid)}, group {_group(info.st_gid)}, mode {stat.S_IMODE(info.st_mode):04o})"
        )
    return access_warnings(path, info)


def read_secret_file(path: str, max_bytes: int = DEFAULT_MAX_BYTES) -> SecretFile:
    """Read a secret file after the checks above. The file is opened without blocking and checked
    again through the open descriptor, so one swapped for a FIFO in between cannot hang the reader."""
    content, info = read_regular_file(path, max_bytes, "a secret")
    return SecretFile(path, content, tuple(access_warnings(path, info)))


def read_regular_file(path: str, max_bytes: int, what: str) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file of at most `max_bytes`, and its stat; `what` names what it should
    hold ("a secret", "a config") in the errors. Shared by every file the exporter reads on its own
    initiative (secrets, the config file on a reload): none of them may block the reader (a FIFO), be
    endless (/dev/zero) or be the kernel's view of a process (/proc)."""
    _check_path(path, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except PermissionError:
        user = _user(os.geteuid())
        raise SecretFileError(f"{path} is not readable by the exporter's user {user}") from None
    except OSError as exc:
        raise SecretFileError(f"cannot open {path}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        kind = _kind(info.st_mode)
        if kind is not None:
            raise SecretFileError(f"{path} is {kind}, not a regular file")
        pseudo = _pseudo_file(os.path.realpath(path), info)
        if pseudo is not None:
            raise SecretFileError(f"{path} is on the kernel's {pseudo} filesystem: it does not hold {what}")
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise SecretFileError(f"{path} is larger than {max_bytes} bytes: it cannot be {what} file")
            chunks.append(chunk)
    except OSError as exc:
        raise SecretFileError(f"cannot read {path}: {_reason(exc)}") from None
    finally:
        os.close(fd)
    return b"".join(chunks), info
