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

Modules: `models` (the file's keys, their checks, loading), `state` (the live TLS context and settings,
re-read while serving), `basic_auth` (bcrypt users with a cache).
"""

from __future__ import annotations

from .basic_auth import BasicAuthChecker
from .models import (
    AUTH_REALM,
    RELOAD_INTERVAL_SECONDS,
    WebConfig,
    load_web_config,
    parse_go_duration,
    parse_web_config,
)
from .state import TokenBucket, WebConfigSource, WebState

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
