"""`--web.config.file`: the Prometheus exporter-toolkit `web-config.yml` format, for Python's HTTP server.

Operators already write this file for Go exporters (TLS certificate and key, client certificates,
bcrypt basic auth users, extra response headers), so the exporter reads the same keys and validates
them like its main config: every problem is one line `<file>: <dotted.field>: <what is wrong>`.

The file, and the certificate, key and CA files it names, are re-read while the exporter runs (at most
once per `RELOAD_INTERVAL_SECONDS`, when a connection or request arrives), so rotated certificates and
passwords take effect without a restart. A reload that fails keeps the last good configuration and logs
an error: a half-written file must never take the server down or leave it open.

Where Python's `ssl` module cannot do what Go's `crypto/tls` does, the difference is either stricter
(and said so in a start-up warning) or refused with a message; it is never silently looser.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import secrets
import ssl
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import bcrypt
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from mssql_memory_exporter.config import (
    ConfigError,
    _error_at,
    _to_config_error,
    _UniqueKeyLoader,
    _yaml_error,
)

__all__ = [
    "AUTH_REALM",
    "RELOAD_INTERVAL_SECONDS",
    "BasicAuthChecker",
    "TokenBucket",
    "WebConfig",
    "WebConfigSource",
    "WebState",
    "load_web_config",
    "parse_go_duration",
    "parse_web_config",
]

log = logging.getLogger(__name__)

RELOAD_INTERVAL_SECONDS = 1.0
AUTH_REALM = "mssql-memory-exporter"
# Certificates, keys and CA bundles are a few KiB; a bigger file is a mistake (or a device), not PEM.
MAX_FILE_BYTES = 1024 * 1024

ClientAuthType = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "RequireClientCert",  # exporter-toolkit keeps this old spelling of RequireAnyClientCert
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]
TlsVersionName = Literal["TLS10", "TLS11", "TLS12", "TLS13"]
CurveName = Literal["CurveP256", "CurveP384", "CurveP521", "X25519"]

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}

# Go's names (crypto/tls CipherSuites()) -> OpenSSL's names for the same TLS 1.0-1.2 suites.
GO_CIPHER_SUITES: dict[str, str] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    # Go's older spellings of the two above.
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
}
# Go lists these too, but TLS 1.3 suites are not configurable there either: accepted, then ignored.
GO_TLS13_SUITES = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)

# Headers the HTTP layer owns: overriding them would break framing, keep-alive or the auth challenge.
RESERVED_HEADERS = frozenset(
    {
        "allow",
        "connection",
        "content-length",
        "content-type",
        "date",
        "keep-alive",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "www-authenticate",
    }
)
# exporter-toolkit accepts only these values for these headers (web/handler.go); so do we.
TOOLKIT_HEADER_VALUES: dict[str, frozenset[str]] = {
    "x-content-type-options": frozenset({"nosniff"}),
    "x-frame-options": frozenset({"deny", "sameorigin"}),
}
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Printable ASCII only: no CR/LF (header injection), and http.server encodes headers as Latin-1.
_HEADER_VALUE = re.compile(r"[\x20-\x7e\t]*")
# $2a$, $2b$, $2y$ (htpasswd writes 2y) with a two-digit cost and 53 characters of salt and hash.
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}

HASH_MESSAGE = (
    "must be a bcrypt hash such as $2y$10$... (make one with: htpasswd -nBC 10 \"\" | tr -d ':\\n'); "
    "plain passwords are not accepted"
)


def parse_go_duration(value: Any) -> float:
    """Seconds in a Go duration string ("1s", "1m30s", "250ms", "0"); raises ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("must be a duration such as 1s, 500ms or 1m")
    text = str(value).strip()
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != position:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if position == 0 or position != len(text):
        raise ValueError("must be a duration such as 1s, 500ms or 1m")
    return total


# --- models --------------------------------------------------------------------------------------------


class _Model(BaseModel):
    # Go's YAML decoder turns `X-XSS-Protection: 0` into the string "0"; do the same. Booleans and numbers
    # are strict, as in the exporter's own config: `http2: "no"` is a mistake, not false.
    model_config = ConfigDict(
        extra="forbid", frozen=True, coerce_numbers_to_str=True, allow_inf_nan=False, strict=True
    )


def _resolve(path: str | None, info: ValidationInfo) -> str | None:
    """Relative paths follow the web config file, as in exporter-toolkit, not the working directory."""
    if path is None:
        return None
    if not path or "\x00" in path:
        raise PydanticCustomError("file_path", "must be a file path")
    base = Path((info.context or {}).get("base_dir", "."))
    return str((base / path).absolute())


FilePath = Annotated[str, Field(min_length=1)]


class TlsServerConfig(_Model):
    cert_file: FilePath | None = None
    key_file: FilePath | None = None
    client_ca_file: FilePath | None = None
    # exporter-toolkit also takes PEM text inline; refused below with a message rather than dropped.
    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None
    client_auth_type: ClientAuthType = "NoClientCert"
    client_allowed_sans: list[Annotated[str, Field(min_length=1)]] | None = None
    min_version: TlsVersionName = "TLS12"
    max_version: TlsVersionName = "TLS13"
    cipher_suites: list[str] = Field(default_factory=list)
    prefer_server_cipher_suites: bool = True
    curve_preferences: list[CurveName] = Field(default_factory=list)

    _resolve_paths = field_validator("cert_file", "key_file", "client_ca_file")(_resolve)

    @field_validator("cert", "key", "client_ca")
    @classmethod
    def _no_inline_pem(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:
            # Python's ssl loads certificates and keys from files only; writing an inline key to a
            # temporary file would put it on disk where the operator did not choose to.
            raise PydanticCustomError(
                "inline_pem",
                "inline PEM is not supported; put it in a file and use {name}_file",
                {"name": info.field_name},
            )
        return value

    @field_validator("cipher_suites")
    @classmethod
    def _known_ciphers(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if name not in GO_CIPHER_SUITES and name not in GO_TLS13_SUITES:
                raise _error_at(
                    (index,),
                    f"unknown cipher suite {name[:80]!r}; use Go's names such as "
                    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                )
        return names

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.cert_file is None:
            raise _error_at(("cert_file",), "is required: the PEM certificate the exporter serves HTTPS with")
        if self.key_file is None:
            raise _error_at(("key_file",), "is required: the PEM private key of cert_file")
        kind = self.client_auth
        if self.client_ca_file is not None and kind == "NoClientCert":
            # As exporter-toolkit: a CA without a policy usually means the policy was forgotten.
            raise _error_at(
                ("client_auth_type",),
                "client_ca_file is set but client_auth_type is NoClientCert; "
                "set client_auth_type: RequireAndVerifyClientCert",
            )
        if kind in ("RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and (
            self.client_ca_file is None
        ):
            # Go would fall back to the system roots; accepting any public CA's certificate as a client
            # credential is almost never meant, so the CA must be named.
            raise _error_at(
                ("client_ca_file",),
                f"is required when client_auth_type is {self.client_auth_type}: client certificates are "
                "verified against this CA",
            )
        if self.client_allowed_sans is not None and kind not in (
            "RequireAnyClientCert",
            "RequireAndVerifyClientCert",
        ):
            raise _error_at(
                ("client_allowed_sans",),
                "needs client_auth_type RequireAndVerifyClientCert (or RequireAnyClientCert): "
                "otherwise a client may send no certificate to match",
            )
        if TLS_VERSIONS[self.min_version] > TLS_VERSIONS[self.max_version]:
            raise _error_at(("min_version",), f"{self.min_version} is above max_version {self.max_version}")
        return self

    @property
    def client_auth(self) -> str:
        """client_auth_type with the old alias folded in."""
        return (
            "RequireAnyClientCert" if self.client_auth_type == "RequireClientCert" else self.client_auth_type
        )


class HttpServerConfig(_Model):
    http2: bool = True
    # `X-XSS-Protection: 0` is the header value "0" (Go's YAML decoder does the same).
    headers: dict[str, Annotated[str, Field(strict=False)]] = Field(default_factory=dict)

    @field_validator("headers", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _valid_headers(self) -> Self:
        seen: dict[str, str] = {}
        for name, value in self.headers.items():
            lowered = name.lower()
            if not _HEADER_NAME.fullmatch(name):
                raise _error_at(("headers", name), "is not a valid HTTP header name")
            if lowered in RESERVED_HEADERS:
                raise _error_at(("headers", name), "is set by the exporter itself and cannot be configured")
            if lowered in seen:
                raise _error_at(("headers", name), f"is given twice (also as {seen[lowered]})")
            seen[lowered] = name
            if not _HEADER_VALUE.fullmatch(value):
                raise _error_at(("headers", name), "value must be printable ASCII on one line")
            allowed = TOOLKIT_HEADER_VALUES.get(lowered)
            if allowed is not None and value and value.lower() not in allowed:
                raise _error_at(("headers", name), f"must be one of {', '.join(sorted(allowed))}")
        return self


def _check_hash(value: str) -> str:
    match = _BCRYPT_HASH.fullmatch(value)
    if match is None or not 4 <= int(match.group(1)) <= 31:
        # Never quote the value: it may be a plain password someone pasted by mistake.
        raise PydanticCustomError("bcrypt_hash", HASH_MESSAGE)
    return value


def _check_username(name: str) -> str:
    # RFC 7617: the user-id cannot contain a colon, so such a user could never log in.
    if not name or len(name) > 256 or re.search(r"[:\x00-\x1f\x7f]", name):
        raise PydanticCustomError(
            "username", "user names must be 1 to 256 characters without ':' or control characters"
        )
    return name


Username = Annotated[str, AfterValidator(_check_username)]
BcryptHash = Annotated[str, AfterValidator(_check_hash)]


class RateLimit(_Model):
    interval: float = 0.0
    burst: Annotated[int, Field(ge=0, strict=True)] = 0

    @field_validator("interval", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        try:
            return parse_go_duration(value)
        except ValueError as exc:
            raise PydanticCustomError("duration", str(exc)) from None

    @model_validator(mode="after")
    def _burst_when_enabled(self) -> Self:
        if self.interval > 0 and self.burst < 1:
            raise _error_at(
                ("burst",), "must be at least 1 when interval is set (0 would refuse every request)"
            )
        return self


class WebConfig(_Model):
    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig = Field(default_factory=HttpServerConfig)
    basic_auth_users: dict[Username, BcryptHash] = Field(default_factory=dict)
    rate_limit: RateLimit | None = None

    @field_validator("http_server_config", "basic_auth_users", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        # `basic_auth_users:` with nothing under it is YAML null; it means "none", as in Go.
        if value is None:
            return {} if info.field_name == "basic_auth_users" else HttpServerConfig()
        return value


def parse_web_config(
    data: Any, source: str = "<web config>", base_dir: str | os.PathLike[str] = "."
) -> WebConfig:
    """Validate already-parsed YAML; every problem raises ConfigError lines prefixed with `source`."""
    if data is None:
        raise ConfigError(
            f"{source}: the web config is empty; leave out --web.config.file to serve plain HTTP without auth"
        )
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: the top level must be a mapping (key: value)")
    try:
        return WebConfig.model_validate(data, context={"base_dir": str(base_dir)})
    except ValidationError as exc:
        raise _to_config_error(source, exc) from None


def _parse_text(raw: bytes, source: str, base_dir: str) -> WebConfig:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: web config file is not valid UTF-8") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    return parse_web_config(data, source=source, base_dir=base_dir)


def _read(path: str, source: str, field: str | None) -> bytes:
    where = f"{source}: {field}: " if field else f"{source}: "
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        what = "cannot read web config file" if field is None else f"cannot read {path}"
        raise ConfigError(f"{where}{what}: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{where}{path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def load_web_config(path: str) -> WebConfig:
    """Read and validate the web config file at `path` (without loading the files it names)."""
    return _parse_text(_read(path, path, None), path, os.path.dirname(os.path.abspath(path)))


# --- runtime state -------------------------------------------------------------------------------------


class TokenBucket:
    """exporter-toolkit's rate_limit: `burst` requests at once, refilled one per `interval` seconds."""

    def __init__(self, interval: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock()
        self._lock = threading.Lock()

    def allow(self) -> bool:
        with self._lock:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._updated) / self.interval)
            self._updated = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            return False


@dataclass(frozen=True)
class WebState:
    """One loaded generation of the web config, ready to serve with."""

    config: WebConfig
    ssl_context: ssl.SSLContext | None
    users: Mapping[str, bytes]
    headers: tuple[tuple[str, str], ...]
    allowed_sans: tuple[str, ...] | None
    rate_limiter: TokenBucket | None
    digest: bytes
    notes: tuple[tuple[int, str], ...]

    @property
    def tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def shape(self) -> tuple[object, ...]:
        """What a reload may not change: turning TLS, client certificates or basic auth off (or on) needs a
        restart, so a truncated file can never open the server up."""
        tls = self.config.tls_server_config
        return (
            tls is not None,
            tls.client_auth if tls else None,
            tls is not None and tls.client_allowed_sans is not None,
            bool(self.users),
        )

    def client_san_allowed(self, peer: Mapping[str, Any] | None) -> bool:
        """Whether a verified client certificate (ssl getpeercert() dict) has an allowed SAN."""
        if self.allowed_sans is None:
            return True
        if not peer:
            return False
        for kind, value in peer.get("subjectAltName", ()):
            if kind == "IP Address":
                value = _normal_ip(value)
            if value in self.allowed_sans:
                return True
        return False


def _normal_ip(text: str) -> str:
    # Python spells IPv6 SANs in full upper case (0:0:0:0:0:0:0:1); Go compares the short form.
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        return text


class _EncryptedKeyError(Exception):
    pass


def _refuse_key_password() -> bytes:
    # Without a callback OpenSSL would prompt on the terminal for an encrypted key and block start-up.
    raise _EncryptedKeyError


def _ssl_context(tls: TlsServerConfig, files: Mapping[str, bytes], source: str) -> ssl.SSLContext:
    prefix = f"{source}: tls_server_config"
    assert tls.cert_file is not None and tls.key_file is not None  # checked by the model
    errors = []
    if b"-----BEGIN CERTIFICATE-----" not in files["cert_file"]:
        errors.append(f"{prefix}.cert_file: no PEM certificate in {tls.cert_file}")
    if b"PRIVATE KEY-----" not in files["key_file"]:
        errors.append(f"{prefix}.key_file: no PEM private key in {tls.key_file}")
    ca = files.get("client_ca_file")
    if ca is not None and b"-----BEGIN CERTIFICATE-----" not in ca:
        errors.append(f"{prefix}.client_ca_file: no PEM certificate in {tls.client_ca_file}")
    if errors:
        raise ConfigError(errors)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.minimum_version = TLS_VERSIONS[tls.min_version]
        context.maximum_version = TLS_VERSIONS[tls.max_version]
    except ValueError as exc:
        raise ConfigError(f"{prefix}.min_version: not supported by this OpenSSL: {exc}") from None
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=_refuse_key_password)
    except _EncryptedKeyError:
        raise ConfigError(
            f"{prefix}.key_file: the key is encrypted; give an unencrypted key readable only by the exporter"
        ) from None
    except ssl.SSLError as exc:
        reason = exc.reason or exc.strerror or type(exc).__name__
        if reason == "KEY_VALUES_MISMATCH":
            raise ConfigError(f"{prefix}.key_file: is not the key of the certificate in cert_file") from None
        raise ConfigError(f"{prefix}.cert_file: cannot load the certificate and key: {reason}") from None
    except OSError as exc:  # removed between the read above and this load (mid-rotation)
        raise ConfigError(f"{prefix}.cert_file: cannot load: {exc.strerror or exc}") from None
    if ca is not None:
        try:
            context.load_verify_locations(cadata=ca.decode("ascii", errors="replace"))
        except (ssl.SSLError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            raise ConfigError(f"{prefix}.client_ca_file: cannot load the CA certificates: {reason}") from None
    # RequestClientCert: Python cannot ask for a certificate without verifying it, and nothing here would
    # use an unverified one, so it is served as NoClientCert. RequireAnyClientCert: a certificate is
    # required and, being Python, verified against client_ca_file (stricter than Go; warned at load).
    context.verify_mode = {
        "NoClientCert": ssl.CERT_NONE,
        "RequestClientCert": ssl.CERT_NONE,
        "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
        "RequireAnyClientCert": ssl.CERT_REQUIRED,
        "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
    }[tls.client_auth]
    openssl_names = [GO_CIPHER_SUITES[name] for name in tls.cipher_suites if name in GO_CIPHER_SUITES]
    if openssl_names:
        try:
            context.set_ciphers(":".join(openssl_names))
        except ssl.SSLError:
            raise ConfigError(
                f"{prefix}.cipher_suites: this OpenSSL supports none of the listed suites"
            ) from None
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    # Client-initiated renegotiation only costs the server CPU; nothing here needs it.
    context.options |= ssl.OP_NO_RENEGOTIATION
    return context


def _notes(config: WebConfig, key_mode: int | None) -> list[tuple[int, str]]:
    """Start-up remarks on settings Python serves differently from exporter-toolkit, or risky ones."""
    notes: list[tuple[int, str]] = []
    tls = config.tls_server_config
    if tls is None and config.basic_auth_users:
        notes.append((logging.WARNING, "basic auth without TLS sends passwords readable on the network"))
    if tls is not None:
        if tls.client_auth == "RequestClientCert":
            notes.append(
                (
                    logging.WARNING,
                    "client_auth_type RequestClientCert is served as NoClientCert: Python's ssl cannot ask "
                    "for a certificate without verifying it; use RequireAndVerifyClientCert to authenticate",
                )
            )
        if tls.client_auth == "RequireAnyClientCert":
            notes.append(
                (
                    logging.WARNING,
                    "client_auth_type RequireAnyClientCert: client certificates are also verified against "
                    "client_ca_file (Python's ssl cannot require one without verifying it)",
                )
            )
        if tls.curve_preferences:
            notes.append(
                (
                    logging.WARNING,
                    "tls_server_config.curve_preferences is ignored: Python's ssl cannot set the key "
                    "exchange groups; OpenSSL's defaults apply",
                )
            )
        if any(name in GO_TLS13_SUITES for name in tls.cipher_suites):
            notes.append(
                (
                    logging.INFO,
                    "TLS 1.3 cipher suites are not configurable (as in Go); those entries are ignored",
                )
            )
        if TLS_VERSIONS[tls.min_version] < ssl.TLSVersion.TLSv1_2:
            notes.append((logging.WARNING, f"min_version {tls.min_version} allows deprecated TLS versions"))
        if key_mode is not None and key_mode & stat.S_IROTH:
            notes.append((logging.WARNING, f"the TLS key file {tls.key_file} is readable by every user"))
    if "http2" in config.http_server_config.model_fields_set and config.http_server_config.http2:
        notes.append((logging.INFO, "http_server_config.http2 is ignored: the exporter serves HTTP/1.1"))
    return notes


def _key_mode(path: str | None) -> int | None:
    if path is None:
        return None
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


class _Inputs:
    """Everything a generation is built from, read once, with a digest to tell whether anything changed."""

    def __init__(self, config_bytes: bytes, config: WebConfig, files: dict[str, bytes]) -> None:
        self.config_bytes = config_bytes
        self.config = config
        self.files = files
        digest = hashlib.sha256(config_bytes)
        for name in sorted(files):
            digest.update(b"\x00" + name.encode() + b"\x00" + hashlib.sha256(files[name]).digest())
        self.digest = digest.digest()


def _read_inputs(path: str, previous: _Inputs | None) -> _Inputs:
    raw = _read(path, path, None)
    if previous is not None and raw == previous.config_bytes:
        config = previous.config  # unchanged text: skip YAML and validation
    else:
        config = _parse_text(raw, path, os.path.dirname(os.path.abspath(path)))
    files: dict[str, bytes] = {}
    errors: list[str] = []
    tls = config.tls_server_config
    if tls is not None:
        for field in ("cert_file", "key_file", "client_ca_file"):
            file_path = getattr(tls, field)
            if file_path is None:
                continue
            try:
                files[field] = _read(file_path, path, f"tls_server_config.{field}")
            except ConfigError as exc:
                errors.extend(exc.lines)
    if errors:
        raise ConfigError(errors)
    return _Inputs(raw, config, files)


def _build(path: str, inputs: _Inputs, previous: WebState | None) -> WebState:
    config = inputs.config
    tls = config.tls_server_config
    context = _ssl_context(tls, inputs.files, path) if tls is not None else None
    limit = config.rate_limit
    limiter = None
    if limit is not None and limit.interval > 0:
        old = previous.rate_limiter if previous is not None else None
        # Same settings: keep the bucket, so a reload does not hand out a fresh burst.
        same = old is not None and (old.interval, old.burst) == (limit.interval, limit.burst)
        limiter = old if same else TokenBucket(limit.interval, limit.burst)
    headers = tuple((name, value) for name, value in config.http_server_config.headers.items() if value)
    sans = None
    if tls is not None and tls.client_allowed_sans is not None:
        sans = tuple(_normal_ip(san) for san in tls.client_allowed_sans)
    return WebState(
        config=config,
        ssl_context=context,
        users={user: hashed.encode() for user, hashed in config.basic_auth_users.items()},
        headers=headers,
        allowed_sans=sans,
        rate_limiter=limiter,
        digest=inputs.digest,
        notes=tuple(_notes(config, _key_mode(tls.key_file if tls else None))),
    )


class WebConfigSource:
    """The web config file, loaded at start and re-read while serving.

    `current()` is cheap: at most once per `reload_interval` seconds it re-reads the file and the files it
    names, and builds a new generation (a new SSLContext for TLS) only when their content changed. Content,
    not mtime, decides: a rotation within the file system's timestamp granularity, or a Kubernetes secret
    swapped through a symlink, is still seen.
    """

    def __init__(
        self,
        path: str,
        *,
        reload_interval: float = RELOAD_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Load `path` now; a problem raises ConfigError (the CLI exits 2)."""
        self.path = path
        self._interval = reload_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._inputs = _read_inputs(path, None)
        self._state = _build(path, self._inputs, None)
        self._shape = self._state.shape
        self._checked_at = clock()
        self._failed_digest: bytes | None = None
        self._last_error: str | None = None
        for level, message in self._state.notes:
            log.log(level, message, extra={"file": path})

    @property
    def state(self) -> WebState:
        """The generation in use, without checking the files."""
        return self._state

    def current(self) -> WebState:
        """The generation to serve the next connection or request with, reloading it if it is due."""
        if self._clock() - self._checked_at < self._interval:
            return self._state
        with self._lock:
            now = self._clock()
            if now - self._checked_at >= self._interval:
                self._checked_at = now
                self._refresh()
            return self._state

    def _refresh(self) -> None:
        try:
            inputs = _read_inputs(self.path, self._inputs)
        except ConfigError as exc:
            self._failed(exc.lines)
            return
        if inputs.digest == self._state.digest:
            self._inputs = inputs
            self._last_error = None
            return
        if inputs.digest == self._failed_digest:
            return  # the same broken content as last time; already logged
        try:
            state = _build(self.path, inputs, self._state)
            if state.shape != self._shape:
                raise ConfigError(
                    f"{self.path}: turning TLS, client certificate auth or basic auth on or off needs a "
                    "restart; the change was not applied"
                )
        except ConfigError as exc:
            self._failed_digest = inputs.digest
            self._failed(exc.lines)
            return
        old_notes = set(self._state.notes)
        self._inputs, self._state = inputs, state
        self._failed_digest = self._last_error = None
        log.info(
            "web config reloaded", extra={"file": self.path, "tls": state.tls, "users": len(state.users)}
        )
        for level, message in state.notes:
            if (level, message) not in old_notes:
                log.log(level, message, extra={"file": self.path})

    def _failed(self, lines: list[str]) -> None:
        message = "; ".join(lines)
        if message != self._last_error:
            # Lines name files and fields, never a password or hash (see parse_web_config).
            log.error(
                "web config reload failed; serving with the last good web config",
                extra={"file": self.path, "err": message},
            )
            self._last_error = message


# --- basic auth ----------------------------------------------------------------------------------------


class BasicAuthChecker:
    """Checks `Authorization: Basic` against bcrypt hashes, caching recent successes.

    bcrypt is slow on purpose (~70 ms at cost 10), too slow to pay on every scrape; a success is
    remembered for `cache_seconds` under an HMAC of (user, hash, password) with a key made at start, so
    the cache never holds a password and a changed hash invalidates its entries. Failures are not cached
    and run one at a time, so guessing costs the guesser full bcrypt time without starving the CPU.
    """

    def __init__(
        self,
        *,
        cache_seconds: float = 60.0,
        cache_size: int = 256,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._key = secrets.token_bytes(32)
        self._cache: OrderedDict[bytes, float] = OrderedDict()
        self._cache_seconds = cache_seconds
        self._cache_size = cache_size
        self._clock = clock
        self._lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()
        self._dummy: dict[bytes, bytes] = {}

    @staticmethod
    def parse(header: str | None) -> tuple[str, str] | None:
        """(user, password) from an Authorization header value, or None if it is not valid Basic auth."""
        if not header:
            return None
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "basic" or not token or len(token) > 4096:
            return None
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        return (user, password) if sep else None

    def check(self, users: Mapping[str, bytes], header: str | None) -> bool:
        credentials = self.parse(header)
        if credentials is None:
            return False
        user, password = credentials
        hashed = users.get(user)
        # An unknown user is checked against a throwaway hash of the same cost, so the answer takes as
        # long as for a known user and timing does not tell which user names exist.
        target = hashed if hashed is not None else self._dummy_hash(users)
        key = hmac.digest(self._key, b"\x00".join((user.encode(), target, password.encode())), "sha256")
        if hashed is not None and self._cached(key):
            return True
        with self._bcrypt_lock:
            try:
                ok = bcrypt.checkpw(password.encode(), target)
            except ValueError:  # longer than bcrypt's 72 bytes, or a hash bcrypt cannot read
                ok = False
        if ok and hashed is not None:
            self._remember(key)
            return True
        return False

    def _cached(self, key: bytes) -> bool:
        with self._lock:
            expires = self._cache.get(key)
            if expires is None:
                return False
            if expires < self._clock():
                del self._cache[key]
                return False
            return True

    def _remember(self, key: bytes) -> None:
        with self._lock:
            self._cache[key] = self._clock() + self._cache_seconds
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _dummy_hash(self, users: Mapping[str, bytes]) -> bytes:
        costs = [int(hashed[4:6]) for hashed in users.values()]
        cost = f"{max(costs) if costs else 10:02d}".encode()
        with self._lock:
            dummy = self._dummy.get(cost)
        if dummy is None:
            dummy = bcrypt.hashpw(secrets.token_bytes(16).hex().encode(), bcrypt.gensalt(int(cost)))
            with self._lock:
                self._dummy[cost] = dummy
        return dummy
