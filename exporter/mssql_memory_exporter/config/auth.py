"""Auth modules: a username and where its password lives (never in the file, read at each login),
Kerberos settings (windows_auth.py), or an Entra ID identity (entra.py). A username `DOMAIN\\user` is an
NTLM login (FreeTDS only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, NamedTuple, Self

from pydantic import (
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .entra import EntraSettings
from .errors import ENV_UNSET_MESSAGE, CredentialError
from .fields import PathText, SqlName, Strict
from .secret_file import SecretFile, SecretFileError, check_secret_file, read_secret_file
from .windows_auth import KerberosSettings, is_ntlm_user


class Credentials(NamedTuple):
    username: str
    # SecretStr so that a tuple that ends up in a log line or traceback shows '**********'.
    password: SecretStr


class AuthModule(Strict):
    # Absent only for Kerberos, which logs in as the ticket's principal.
    username: SqlName | None = None
    password_env: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] | None = None
    password_file: PathText | None = None
    kerberos: KerberosSettings | None = None
    # An access token from Microsoft Entra ID (entra.py); ODBC Driver 18 only.
    entra: EntraSettings | None = None

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
    def _file_is_a_secret(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is None:
            return None
        # Relative paths follow the config file, as in Prometheus, not the working directory.
        base = Path((info.context or {}).get("base_dir", "."))
        resolved = str((base / path).absolute())
        # Refused at start-up like an empty environment variable: an empty secret would only show up as
        # failed logins (and a lockout policy counts those). Read as read_password() reads it.
        try:
            text = _decoded(read_secret_file(resolved))
        except SecretFileError as exc:
            raise PydanticCustomError("secret_source", "{problem}", {"problem": str(exc)}) from None
        except UnicodeDecodeError:
            text = "?"  # read_password() names the problem on the first login
        if not text:
            raise PydanticCustomError("secret_source", "file {path} is empty", {"path": resolved})
        if "\0" in text:
            raise PydanticCustomError("secret_source", "file {path} contains a NUL byte", {"path": resolved})
        return resolved

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Self:
        if self.entra is not None:
            given = [
                f
                for f in ("username", "password_env", "password_file", "kerberos")
                if getattr(self, f) is not None
            ]
            if given:
                raise PydanticCustomError(
                    "entra",
                    "an entra module logs in with an access token for its identity; leave out {fields}",
                    {"fields": ", ".join(given)},
                )
            return self
        if self.kerberos is not None:
            given = [f for f in ("username", "password_env", "password_file") if getattr(self, f) is not None]
            if given:
                raise PydanticCustomError(
                    "kerberos",
                    "a kerberos module logs in as its ticket's principal; leave out {fields}",
                    {"fields": ", ".join(given)},
                )
            return self
        if self.username is None:
            raise PydanticCustomError("secret_source", "set username (or kerberos for a Kerberos login)")
        if (self.password_env is None) == (self.password_file is None):
            raise PydanticCustomError("secret_source", "set exactly one of password_env or password_file")
        return self

    @property
    def ntlm(self) -> bool:
        return is_ntlm_user(self.username)

    def credentials(self) -> Credentials:
        """Username and password read now; Kerberos sends neither (FreeTDS uses the ticket cache)."""
        if self.kerberos is not None or self.entra is not None:
            return Credentials("", SecretStr(""))
        assert self.username is not None  # guaranteed by _exactly_one_source
        return Credentials(self.username, self.read_password())

    def read_password(self) -> SecretStr:
        """Read the secret now; an error names its source and never its content."""
        if self.password_env is not None:
            value = os.environ.get(self.password_env, "")
            if not value:
                raise CredentialError(f"password_env: {ENV_UNSET_MESSAGE}")
            return SecretStr(value)
        assert self.password_file is not None  # guaranteed by _exactly_one_source
        try:
            value = _decoded(read_secret_file(self.password_file))
        except SecretFileError as exc:
            raise CredentialError(f"password file: {exc}") from None
        except UnicodeDecodeError:
            raise CredentialError(f"password file {self.password_file} is not UTF-8 text") from None
        if not value:
            raise CredentialError(f"password file {self.password_file} is empty")
        if "\0" in value:
            # The driver would cut the password at the NUL and send only the part before it.
            raise CredentialError(f"password file {self.password_file} contains a NUL byte")
        return SecretStr(value)

    def file_warnings(self) -> list[str]:
        """How the password file is kept, when others could read or change it (empty for password_env)."""
        if self.password_file is None:
            return []
        try:
            return check_secret_file(self.password_file)
        except SecretFileError:
            return []  # an error, not a warning: the first login reports it


def _decoded(secret: SecretFile) -> str:
    """The password in a file: UTF-8 text, without the newline `echo` or an editor leaves at the end."""
    return secret.content.decode("utf-8").removesuffix("\n").removesuffix("\r")
