"""HTTP layer: /metrics, /probe?target=NAME, /-/healthy, /-/ready and an index page.

Modules: `requests` (limits, timeouts, the query; no sockets), `protocol` (HTTP/1.1 framing by h11 and
the refusals of what it or a limit refuses), `server` (listening, TLS set-up, readiness, accept back-off),
`connections` (one thread and a selector for every connection not being answered: TLS handshakes,
request heads by their deadline, idle keep-alive connections), `pool` (the bounded threads that answer,
and the health lane's), `handler` (one request: auth, routing, response, gzip, access log), `pages`
(what is answered).

The web layer never talks SQL. It validates the request, works out the scrape timeout Prometheus
allows, and hands the configured target to an injected probe function; whatever families that returns
are exposed from a registry built for this request only, so concurrent scrapes never share state.

With `--web.config.file` (the webconfig package) it also serves TLS, checks client certificates and
basic auth on every path, and adds the configured response headers. Requests are bounded before anything
else runs: request line, URL and header sizes, the time the request line and headers may take to arrive,
and no request bodies. A plain-HTTP request to the TLS port is answered with a 400 that says so.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence

from mssql_memory_exporter.config import ExporterConfig
from mssql_memory_exporter.webconfig import WebConfigSource

from .listeners import SystemdSocketError, bound_socket, resolve, systemd_sockets
from .requests import (
    DEFAULT_TIMEOUT_SECONDS,
    HEADER_TIMEOUT_SECONDS,
    MAX_HEADER_BYTES,
    MAX_HEADER_LINES,
    MAX_REQUEST_LINE,
    MAX_TIMEOUT_SECONDS,
    MAX_URL_LENGTH,
    MIN_TIMEOUT_SECONDS,
    SCRAPE_TIMEOUT_HEADER,
    TIMEOUT_OFFSET_SECONDS,
    BadRequest,
    OwnMetricsFn,
    ProbeFn,
    parse_listen_address,
    probe_target,
    scrape_timeout,
)
from .server import ExporterHTTPServer

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "HEADER_TIMEOUT_SECONDS",
    "MAX_HEADER_BYTES",
    "MAX_HEADER_LINES",
    "MAX_REQUEST_LINE",
    "MAX_TIMEOUT_SECONDS",
    "MAX_URL_LENGTH",
    "MIN_TIMEOUT_SECONDS",
    "SCRAPE_TIMEOUT_HEADER",
    "TIMEOUT_OFFSET_SECONDS",
    "BadRequest",
    "ExporterHTTPServer",
    "ProbeFn",
    "SystemdSocketError",
    "make_server",
    "parse_listen_address",
    "probe_target",
    "scrape_timeout",
    "systemd_sockets",
]


def make_server(
    config: ExporterConfig,
    probe: ProbeFn,
    listen: str | Sequence[str] = (),
    own_metrics: OwnMetricsFn | None = None,
    *,
    web: WebConfigSource | None = None,
    sockets: Sequence[socket.socket] = (),
) -> ExporterHTTPServer:
    """Bind (but do not start) the HTTP server on every address of `listen`, or serve the listening
    `sockets` given (systemd's); call `serve_forever()` on the result. `own_metrics` adds families to
    /metrics (the host collector); `web` is the loaded --web.config.file (TLS, basic auth, headers).
    Raises ValueError for a malformed address and OSError when binding fails (nothing stays bound)."""
    addresses = [listen] if isinstance(listen, str) else list(listen)
    binds = [resolve(address) for address in addresses]
    bound: list[socket.socket] = []
    try:
        for bind in binds:
            bound.append(bound_socket(bind, ExporterHTTPServer.request_queue_size))
        every = [*sockets, *bound]
        if not every:
            raise ValueError("nothing to listen on: give a listen address or sockets")
        return ExporterHTTPServer(every, config, probe, own_metrics=own_metrics, web=web)
    except BaseException:
        for sock in bound:
            sock.close()
        raise
