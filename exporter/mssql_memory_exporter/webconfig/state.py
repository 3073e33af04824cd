"""The live web configuration: the TLS context and settings built from the file, re-read while serving."""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import ssl
import stat
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mssql_memory_exporter.config.errors import ConfigError

from .models import (
    GO_CIPHER_SUITES,
    GO_TLS13_SUITES,
    RELOAD_INTERVAL_SECONDS,
    TLS_VERSIONS,
    TlsServerConfig,
    WebConfig,
    parse_text,
    read_bounded,
)

log = logging.getLogger(__name__)


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
    raw = read_bounded(path, path, None)
    if previous is not None and raw == previous.config_bytes:
        config = previous.config  # unchanged text: skip YAML and validation
    else:
        config = parse_text(raw, path, os.path.dirname(os.path.abspath(path)))
    files: dict[str, bytes] = {}
    errors: list[str] = []
    tls = config.tls_server_config
    if tls is not None:
        for field in ("cert_file", "key_file", "client_ca_file"):
            file_path = getattr(tls, field)
            if file_path is None:
                continue
            try:
                files[field] = read_bounded(file_path, path, f"tls_server_config.{field}")
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
