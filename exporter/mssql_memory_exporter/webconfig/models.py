"""The web-config.yml models (exporter-toolkit's keys), their checks, and loading a file into them."""

from __future__ import annotations

import logging
import os
import re
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

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

from mssql_memory_exporter.config.errors import ConfigError, error_at, to_config_error
from mssql_memory_exporter.config.yaml_loading import UniqueKeyLoader, yaml_error

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
                raise error_at(
                    (index,),
                    f"unknown cipher suite {name[:80]!r}; use Go's names such as "
                    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                )
        return names

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.cert_file is None:
            raise error_at(("cert_file",), "is required: the PEM certificate the exporter serves HTTPS with")
        if self.key_file is None:
            raise error_at(("key_file",), "is required: the PEM private key of cert_file")
        kind = self.client_auth
        if self.client_ca_file is not None and kind == "NoClientCert":
            # As exporter-toolkit: a CA without a policy usually means the policy was forgotten.
            raise error_at(
                ("client_auth_type",),
                "client_ca_file is set but client_auth_type is NoClientCert; "
                "set client_auth_type: RequireAndVerifyClientCert",
            )
        if kind in ("RequireAnyClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert") and (
            self.client_ca_file is None
        ):
            # Go would fall back to the system roots; accepting any public CA's certificate as a client
            # credential is almost never meant, so the CA must be named.
            raise error_at(
                ("client_ca_file",),
                f"is required when client_auth_type is {self.client_auth_type}: client certificates are "
                "verified against this CA",
            )
        if self.client_allowed_sans is not None and kind not in (
            "RequireAnyClientCert",
            "RequireAndVerifyClientCert",
        ):
            raise error_at(
                ("client_allowed_sans",),
                "needs client_auth_type RequireAndVerifyClientCert (or RequireAnyClientCert): "
                "otherwise a client may send no certificate to match",
            )
        if TLS_VERSIONS[self.min_version] > TLS_VERSIONS[self.max_version]:
            raise error_at(("min_version",), f"{self.min_version} is above max_version {self.max_version}")
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
                raise error_at(("headers", name), "is not a valid HTTP header name")
            if lowered in RESERVED_HEADERS:
                raise error_at(("headers", name), "is set by the exporter itself and cannot be configured")
            if lowered in seen:
                raise error_at(("headers", name), f"is given twice (also as {seen[lowered]})")
            seen[lowered] = name
            if not _HEADER_VALUE.fullmatch(value):
                raise error_at(("headers", name), "value must be printable ASCII on one line")
            allowed = TOOLKIT_HEADER_VALUES.get(lowered)
            if allowed is not None and value and value.lower() not in allowed:
                raise error_at(("headers", name), f"must be one of {', '.join(sorted(allowed))}")
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
            raise error_at(
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
        raise to_config_error(source, exc) from None


def parse_text(raw: bytes, source: str, base_dir: str) -> WebConfig:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: web config file is not valid UTF-8") from None
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        raise yaml_error(source, exc) from None
    return parse_web_config(data, source=source, base_dir=base_dir)


def read_bounded(path: str, source: str, field: str | None) -> bytes:
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
    return parse_text(read_bounded(path, path, None), path, os.path.dirname(os.path.abspath(path)))
