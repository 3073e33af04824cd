"""Entra ID access tokens for ODBC Driver 18: obtained with Microsoft's azure-identity (the `entra` extra),
kept until shortly before they expire, handed to the driver before it connects.

The driver takes the token as the pre-connect attribute SQL_COPT_SS_ACCESS_TOKEN (1256), an ACCESSTOKEN
structure: a 4-byte little-endian length, then the token in UTF-16-LE (Microsoft's "Using Microsoft
Entra ID with the ODBC Driver"; pyodbc passes it through `attrs_before`). The token never goes into the
connection string, a log line, an error or a metric: errors name the identity and the endpoint asked.
"""

from __future__ import annotations

import hashlib
import os
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from ..config.entra import EntraSettings
from ..config.secret_file import SecretFileError, read_secret_file

SQL_COPT_SS_ACCESS_TOKEN = 1256
# App Service / Azure Arc style managed identity endpoint, and Azure's instance metadata service.
_IMDS = "http://169.254.169.254/metadata/identity/oauth2/token"
_DEFAULT_AUTHORITY = "https://login.microsoftonline.com"


class EntraError(Exception):
    """No token: the message names the identity and the endpoint, never a secret or a token."""


def token_struct(token: str) -> bytes:
    """SQL_COPT_SS_ACCESS_TOKEN's value for `token`."""
    raw = token.encode("utf-16-le")
    return struct.pack("<I", len(raw)) + raw


def endpoint_of(settings: EntraSettings) -> str:
    """Where the token is asked for, as a user would look for it."""
    if settings.kind == "managed_identity":
        return os.environ.get("IDENTITY_ENDPOINT") or os.environ.get("MSI_ENDPOINT") or _IMDS
    authority = settings.authority_host or os.environ.get("AZURE_AUTHORITY_HOST") or _DEFAULT_AUTHORITY
    tenant = settings.tenant_id or os.environ.get("AZURE_TENANT_ID", "<AZURE_TENANT_ID>")
    return f"{authority.rstrip('/')}/{tenant}"


def _read_secret(path: str) -> str:
    try:
        return read_secret_file(path).content.decode("utf-8").strip()
    except SecretFileError as exc:
        raise EntraError(f"client secret file: {exc}") from None
    except UnicodeDecodeError:
        raise EntraError(f"client secret file {path} is not UTF-8 text") from None


def make_credential(settings: EntraSettings) -> Any:
    """The azure-identity credential for `settings` (imported here: only Entra targets need the extra)."""
    try:
        from azure import identity
    except ImportError:
        raise EntraError(
            "Entra ID logins need azure-identity: pip install 'mssql-memory-exporter[entra]'"
        ) from None
    # One retry at most: a login runs inside the scrape's timeout, and azure-identity's default retries
    # of a managed identity endpoint back off for longer than that.
    common: dict[str, Any] = {"retry_total": 1}
    if settings.authority_host:
        # A named authority is used as given: no instance discovery against Microsoft's public cloud,
        # which a private or sovereign authority would not pass.
        common["authority"] = settings.authority_host
        common["disable_instance_discovery"] = True
    if settings.kind == "managed_identity":
        return identity.ManagedIdentityCredential(client_id=settings.client_id, retry_total=1)
    if settings.kind == "workload_identity":
        return identity.WorkloadIdentityCredential(
            tenant_id=settings.tenant_id,
            client_id=settings.client_id,
            token_file_path=settings.token_file,
            **common,
        )
    assert settings.tenant_id is not None and settings.client_id is not None  # EntraSettings checks it
    if settings.certificate_file is not None:
        return identity.CertificateCredential(
            settings.tenant_id, settings.client_id, certificate_path=settings.certificate_file, **common
        )
    assert settings.client_secret_file is not None
    secret = _read_secret(settings.client_secret_file)
    return identity.ClientSecretCredential(settings.tenant_id, settings.client_id, secret, **common)


def _secret_digest(settings: EntraSettings) -> str:
    """Changes when the client secret file does: a rotated secret makes a new credential."""
    if settings.client_secret_file is None:
        return ""
    return hashlib.sha256(_read_secret(settings.client_secret_file).encode()).hexdigest()


class TokenKeeper:
    """One identity's token, reused until `refresh_before_seconds` before it expires."""

    def __init__(self, settings: EntraSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._credential: Any = None
        self._digest = ""
        self._token: str | None = None
        self._expires_on = 0.0
        self.fetched = 0  # tokens obtained, for the tests and the log

    def token(self) -> str:
        with self._lock:
            if (
                self._token is not None
                and self._expires_on - self._clock() > self.settings.refresh_before_seconds
            ):
                return self._token
            digest = _secret_digest(self.settings)
            if self._credential is None or digest != self._digest:
                self._credential, self._digest = make_credential(self.settings), digest
            try:
                got = self._credential.get_token(self.settings.scope)
            except Exception as exc:  # azure-identity's errors differ by credential; all mean "no token"
                raise EntraError(self._failure(exc)) from None
            self._token, self._expires_on = got.token, float(got.expires_on)
            self.fetched += 1
            return got.token

    def _failure(self, exc: Exception) -> str:
        # azure-identity's message says what the endpoint answered (AADSTS codes, "connection refused");
        # its first line is enough, and holds no secret (tokens and secrets are never echoed back).
        first = (getattr(exc, "message", None) or str(exc)).strip().splitlines()[0][:300]
        return (
            f"cannot get an Entra ID access token for {self.settings.identity()} from "
            f"{endpoint_of(self.settings)}: {first}"
        )


_KEEPERS: dict[str, TokenKeeper] = {}
_KEEPERS_LOCK = threading.Lock()


def keeper_for(settings: EntraSettings) -> TokenKeeper:
    """The process's keeper for these settings (a reload with the same settings keeps its token)."""
    key = settings.model_dump_json()
    with _KEEPERS_LOCK:
        keeper = _KEEPERS.get(key)
        if keeper is None:
            keeper = _KEEPERS[key] = TokenKeeper(settings)
        return keeper
