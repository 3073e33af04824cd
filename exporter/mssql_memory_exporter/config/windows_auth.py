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
from typing import Annotated, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import Strict
from .secret_file import SecretFileError, check_secret_file

Principal = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[^\s@]+(@[^\s@]+)?$")]
Realm = Annotated[str, Field(min_length=1, max_length=255, pattern=r"^[A-Za-z0-9._-]+$")]


def check_keytab(path: str) -> list[str]:
    """Check a keytab as a password file is checked (secret_file.py: a regular file or a secret mount's
    symlink to one, readable by the exporter; raises SecretFileError), and refuse one every user can
    read: a keytab is the account's key, valid until the password changes. Returns the warnings (owned
    by another user, readable by a group the exporter is not in)."""
    warnings = check_secret_file(path)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & stat.S_IROTH:
        raise SecretFileError(
            f"{path} is readable by every user on this machine (mode {mode:04o}); a keytab is the "
            "account's key: make it readable by the exporter only (chmod 600, or 0400/0440 with fsGroup "
            "for a Kubernetes secret)"
        )
    return warnings


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
        try:
            check_keytab(resolved)
        except SecretFileError as exc:
            raise PydanticCustomError("secret_source", "{problem}", {"problem": str(exc)}) from None
        return resolved

    def keytab_warnings(self) -> list[str]:
        """How the keytab is kept, when others could change it or a foreign group read it."""
        if self.keytab is None:
            return []
        try:
            return check_keytab(self.keytab)
        except SecretFileError:
            return []  # an error, not a warning: the next ticket fetch reports it

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
