"""Windows logins in auth modules: Kerberos settings, NTLM user names, and the refusal of Entra ID.

What FreeTDS 1.3 does (read from its source: src/odbc/connectparams.c, src/tds/login.c, gssapi.c):

* `Trusted_Connection=yes` empties the user name and password, and an empty user name makes it log in
  with Kerberos through GSSAPI, with the process's default credentials (KRB5CCNAME): one Kerberos
  identity per process. It asks for a ticket for `MSSQLSvc/<host>:<port>`, where a host name without a
  dot is replaced by its canonical name when that has one, `@<REALM>` appended when `REALM=` is set;
  `ServerSPN=` replaces the whole name.
* A user name with a backslash (`DOMAIN\\user`) makes it log in with NTLM; `UseNTLMv2=yes` keeps it to
  NTLMv2.
"""

from __future__ import annotations

import os
import socket
import stat
from typing import Annotated, Any, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import Strict

Principal = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\s@]+(@[^\s@]+)?$")]
Realm = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")]

ENTRA_REFUSED = (
    "Microsoft Entra ID logins are not supported: FreeTDS cannot do them, and the exporter does not "
    "pass Entra settings to Microsoft's ODBC driver (docs/permissions.md says what works where); use a "
    "SQL login, Kerberos or NTLM"
)


def private_file_problem(path: str) -> str | None:
    """Why a secret file (a keytab) is unsafe to use, or None: a regular file owned by the exporter's
    user or root that no other user can read; group read only for a root-owned file of the exporter's
    own group (a Kubernetes secret mounted 0440 with fsGroup). systemd's LoadCredential= hands over
    such files. Follows symbolic links: Kubernetes mounts secrets through them."""
    try:
        info = os.stat(path)
    except ValueError:
        return f"file {path} does not exist or is not readable"
    except OSError as exc:
        return f"file {path} does not exist or is not readable ({exc.strerror or type(exc).__name__})"
    if not stat.S_ISREG(info.st_mode):
        return f"{path} is not a regular file"
    if info.st_uid not in (os.getuid(), 0):
        return f"file {path} is owned by uid {info.st_uid}, not by the exporter's user or root"
    own_group = info.st_uid == 0 and info.st_gid in (os.getgid(), *os.getgroups())
    if info.st_mode & (0o007 if own_group else 0o077):
        mode = stat.S_IMODE(info.st_mode)
        return f"file {path} can be read by other users (mode {mode:04o}); make it 0600 or 0400"
    if not os.access(path, os.R_OK):
        return f"file {path} is not readable by the exporter's user"
    return None


class KerberosSettings(Strict):
    """How the exporter gets its Kerberos tickets. `keytab` (for a service: tickets are fetched and
    renewed from it) or `ccache` (a credential cache someone else keeps fresh); neither means the
    process's own credentials (on Windows the service account, through Microsoft's driver)."""

    principal: Principal | None = None
    keytab: Annotated[str, Field(min_length=1)] | None = None
    ccache: Annotated[str, Field(min_length=1)] | None = None
    # The SQL Server's realm when it is not the one krb5.conf maps the host to (FreeTDS's REALM=).
    realm: Realm | None = None

    @field_validator("keytab")
    @classmethod
    def _keytab_is_private(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return None
        base = (info.context or {}).get("base_dir", ".")
        resolved = os.path.abspath(os.path.join(base, path))
        problem = private_file_problem(resolved)
        if problem is not None:
            raise PydanticCustomError("secret_source", "{problem}", {"problem": problem})
        return resolved

    @field_validator("ccache")
    @classmethod
    def _ccache_is_a_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        kind, sep, rest = value.partition(":")
        if sep and kind.upper() != "FILE":
            raise PydanticCustomError(
                "ccache", "only FILE: credential caches are supported (got type {kind})", {"kind": kind}
            )
        base = (info.context or {}).get("base_dir", ".")
        return "FILE:" + os.path.abspath(os.path.join(base, rest if sep else value))

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.keytab is not None and self.ccache is not None:
            raise PydanticCustomError("kerberos", "set keytab or ccache, not both")
        if self.keytab is not None and self.principal is None:
            raise PydanticCustomError("kerberos", "a keytab needs the principal to log in as")
        return self

    def identity(self) -> str:
        """What FreeTDS will log in as, for messages and the one-identity-per-process rule."""
        who = self.principal or "the default principal"
        if self.keytab is not None:
            return f"{who} (keytab {self.keytab})"
        if self.ccache is not None:
            return f"{who} (ccache {self.ccache})"
        return f"{who} (the process's default credentials)"


def is_ntlm_user(username: str | None) -> bool:
    return username is not None and "\\" in username


def refuse_entra(value: Any) -> None:
    if value is not None:
        raise PydanticCustomError("entra", ENTRA_REFUSED)


def freetds_spn(host: str, port: int, realm: str | None = None) -> str:
    """The service principal FreeTDS 1.3 asks a ticket for when no ServerSPN is given (gssapi.c)."""
    name = host
    if "." not in host:
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_CANONNAME)
        except OSError:
            infos = []
        canonical = infos[0][3] if infos else ""
        if "." in canonical:
            name = canonical
    spn = f"MSSQLSvc/{name}:{port}"
    return f"{spn}@{realm}" if realm else spn
