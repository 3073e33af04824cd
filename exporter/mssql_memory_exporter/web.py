"""HTTP layer: /metrics, /probe?target=NAME, /-/healthy and an index page, on the stdlib server.

The web layer never talks SQL. It validates the request, works out the scrape timeout Prometheus
allows, and hands the configured target to an injected probe function; whatever families that returns
are exposed from a registry built for this request only, so concurrent scrapes never share state.

With `--web.config.file` (webconfig.py) it also serves TLS, checks client certificates and basic auth on
every path, and adds the configured response headers. Requests are bounded before anything else runs:
request line, URL and header sizes, the time the request line and headers may take to arrive, and no
request bodies. A plain-HTTP request to the TLS port is answered with a 400 that says so.
"""

from __future__ import annotations

import contextlib
import html
import http.client
import io
import logging
import math
import socket
import socketserver
import ssl
import sys
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple, cast
from urllib.parse import parse_qs, quote, urlsplit

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.config import TARGET_NAME_MAX, ExporterConfig, TargetConfig
from mssql_memory_exporter.exposition import render
from mssql_memory_exporter.webconfig import AUTH_REALM, BasicAuthChecker, WebConfigSource, WebState

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "HEADER_TIMEOUT_SECONDS",
    "MAX_HEADER_BYTES",
    "MAX_REQUEST_LINE",
    "MAX_TIMEOUT_SECONDS",
    "MAX_URL_LENGTH",
    "MIN_TIMEOUT_SECONDS",
    "SCRAPE_TIMEOUT_HEADER",
    "TIMEOUT_OFFSET_SECONDS",
    "BadRequest",
    "ExporterHTTPServer",
    "ProbeFn",
    "make_server",
    "parse_listen_address",
    "probe_target",
    "scrape_timeout",
]

log = logging.getLogger(__name__)

ProbeFn = Callable[[TargetConfig, float], list[Metric]]
OwnMetricsFn = Callable[[], list[Metric]]

SCRAPE_TIMEOUT_HEADER = "X-Prometheus-Scrape-Timeout-Seconds"
DEFAULT_TIMEOUT_SECONDS = 10.0
# Leaves time to encode and send the answer before Prometheus gives up on the scrape.
TIMEOUT_OFFSET_SECONDS = 0.5
MAX_TIMEOUT_SECONDS = 120.0
MIN_TIMEOUT_SECONDS = 0.5
LOGGED_VALUE_MAX = 128

TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"

# Request limits. The stdlib allows 64 KiB per line and 100 header lines (6.4 MB per request, per
# connection thread); Prometheus sends a short URL and a few hundred bytes of headers. 8 KiB of URL is
# what common proxies allow (nginx, Apache), and leaves room for long target names.
MAX_URL_LENGTH = 8192
MAX_REQUEST_LINE = MAX_URL_LENGTH + 64  # method, spaces and "HTTP/1.1" around the URL
MAX_HEADER_BYTES = 16 * 1024
MAX_QUERY_FIELDS = 16  # /probe needs one; a scanner's hundreds are refused before parsing
# A client that connects and never finishes the TLS handshake holds a thread until this runs out.
TLS_HANDSHAKE_TIMEOUT_SECONDS = 10.0
# The request line and headers must be complete this many seconds after the request began (after the
# connection was set up, for its first request; after the first byte, for the next ones on a kept-alive
# connection). A socket timeout alone restarts with every byte, so a client trickling one byte a second
# held a thread for ever. Prometheus sends its few hundred bytes in one packet.
HEADER_TIMEOUT_SECONDS = 10.0
# Every TLS record a client starts with is a handshake record; plain HTTP starts with a method name.
TLS_HANDSHAKE_RECORD = 0x16
PLAIN_HTTP_TO_TLS = "Client sent an HTTP request to an HTTPS server."
# After that answer, the client's unread request is drained (bounded) before closing: closing with unread
# bytes makes the kernel send a reset, which can destroy the answer before the client reads it.
DRAIN_BYTES = MAX_REQUEST_LINE + MAX_HEADER_BYTES
DRAIN_SECONDS = 1.0

# Sent with every response (errors from the stdlib parser included). Nothing here is meant to be
# embedded, cached by a proxy or run as a script. The index page has no scripts or styles either.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
)
CSP_DATA = "default-src 'none'; frame-ancestors 'none'"
CSP_HTML = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


class BadRequest(Exception):
    """A request the exporter refuses; the message is sent to the client as the 400 body."""


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def _text(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, TEXT, (message + "\n").encode(), headers)


def scrape_timeout(header: str | None) -> float:
    """Seconds the probe may take: Prometheus' scrape timeout minus an offset, within fixed bounds."""
    if header is None:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        offered = float(header)
    except ValueError:
        return DEFAULT_TIMEOUT_SECONDS
    if not math.isfinite(offered) or offered <= 0:
        return DEFAULT_TIMEOUT_SECONDS
    return max(MIN_TIMEOUT_SECONDS, min(offered - TIMEOUT_OFFSET_SECONDS, MAX_TIMEOUT_SECONDS))


def parse_listen_address(listen: str) -> tuple[str, int]:
    """`host:port`, `:port` (all interfaces) or `[v6addr]:port` -> (host, port); host '' means all."""
    host, sep, port_text = listen.rpartition(":")
    if not sep:
        raise ValueError(f"listen address {listen!r} must be host:port or :port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"listen address {listen!r}: put IPv6 addresses in brackets, e.g. [::1]:9399")
    # isdigit() alone also takes other scripts' digits ("٣٣" was port 33) and "²" (which int() refuses).
    if not (port_text.isascii() and port_text.isdigit()) or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"listen address {listen!r}: port must be a number from 0 to 65535")
    return host, int(port_text)


def _query_params(query: str, allowed: frozenset[str]) -> dict[str, list[str]]:
    # Counted as parse_qs counts them (every '&' starts a field), so its own limit never fires first
    # with a message that would call a merely long query malformed.
    if query.count("&") + 1 > MAX_QUERY_FIELDS:
        raise BadRequest(f"too many query parameters (at most {MAX_QUERY_FIELDS})")
    try:
        # strict_parsing rejects fragments like '&&' or 'target' without '=' instead of guessing.
        params = parse_qs(
            query, keep_blank_values=True, strict_parsing=bool(query), max_num_fields=MAX_QUERY_FIELDS
        )
    except ValueError:
        raise BadRequest("malformed query string") from None
    unknown = sorted(set(params) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise BadRequest(f"unknown query parameter {unknown[0][:64]!r} (accepted: {accepted})")
    return params


def probe_target(query: str, config: ExporterConfig) -> TargetConfig:
    """The configured target a /probe query names; anything else is a BadRequest, so the exporter
    can only ever connect to servers listed in its config."""
    values = _query_params(query, frozenset({"target"})).get("target", [])
    if not values:
        raise BadRequest("missing query parameter 'target'; use /probe?target=NAME")
    if len(values) > 1:
        raise BadRequest(f"query parameter 'target' given {len(values)} times; give it once")
    name = values[0]
    if not name:
        raise BadRequest("query parameter 'target' is empty")
    if len(name) > TARGET_NAME_MAX:
        raise BadRequest(f"target name is longer than {TARGET_NAME_MAX} characters")
    target = config.targets.get(name)
    if target is None:
        raise BadRequest(f"unknown target {name!r}; only targets named in the config file can be probed")
    return target


def _loggable_query(query: str) -> str:
    """The query string with each value cut to a loggable length (a scanner can send megabytes)."""
    pairs = [pair.partition("=") for pair in query.split("&")[:MAX_QUERY_FIELDS]]
    return "&".join(_cut(key) + sep + _cut(value) for key, sep, value in pairs)


def _cut(text: str) -> str:
    return text if len(text) <= LOGGED_VALUE_MAX else text[:LOGGED_VALUE_MAX] + "..."


def merge_families(*groups: Iterable[Metric]) -> list[Metric]:
    """One family per name: the host collector and the default target both report
    mssql_exporter_collector_success, and an exposition with a name twice is invalid."""
    merged: dict[str, Metric] = {}
    for group in groups:
        for family in group:
            mine = merged.get(family.name)
            if mine is None:
                merged[family.name] = family
            elif mine.type == family.type:
                combined = Metric(mine.name, mine.documentation, mine.type)
                combined.samples = [*mine.samples, *family.samples]
                merged[family.name] = combined
            else:
                raise ValueError(f"metric {family.name} is both a {mine.type} and a {family.type}")
    return list(merged.values())


def _process_metrics_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


# The process, Python and GC collectors read /proc and the interpreter afresh on every collect(), so one
# registry serves every request; building it per request only repeated their set-up.
_PROCESS_METRICS = _process_metrics_registry()


def _index_page(config: ExporterConfig) -> bytes:
    items = "".join(
        f'<li><a href="/probe?target={html.escape(quote(name, safe=""))}">{html.escape(name)}</a></li>'
        for name in config.targets
    )
    default = (
        f"<p>Default target on /metrics: {html.escape(config.default_target)}</p>"
        if config.default_target
        else "<p>No default target: /metrics has only the exporter's own metrics.</p>"
    )
    page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>SQL Server memory exporter</title></head>'
        f"<body><h1>SQL Server memory exporter {html.escape(__version__)}</h1>"
        f'<p><a href="/metrics">Metrics</a></p>{default}<h2>Targets</h2><ul>{items}</ul></body></html>\n'
    )
    return page.encode()


class _HeadReader:
    """Reads the request line and the header section by a deadline: before each receive the socket's
    timeout is set to the time left, so trickling bytes cannot extend it. Also stands in for the request's
    rfile while the stdlib parses the headers, so the section as a whole is bounded (the stdlib bounds
    only each line and the line count)."""

    def __init__(self, buffered: io.BufferedReader, sock: socket.socket, deadline: float) -> None:
        self._buffered = buffered
        self._sock = sock
        self._deadline = deadline
        self._left = MAX_HEADER_BYTES

    def request_line(self) -> bytes:
        return self._read_line(MAX_REQUEST_LINE + 1)

    def readline(self, size: int = -1) -> bytes:
        limit = self._left + 1 if size < 0 else min(size, self._left + 1)
        line = self._read_line(limit)
        self._left -= len(line)
        if self._left < 0:
            # parse_request answers LineTooLong with 431 Request Header Fields Too Large.
            raise http.client.LineTooLong(f"header section over {MAX_HEADER_BYTES} bytes")
        return line

    def _read_line(self, limit: int) -> bytes:
        line = bytearray()
        while len(line) < limit:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("request line and headers not received in time")
            self._sock.settimeout(left)
            # peek() receives at most once, and only when nothing is buffered; read() then takes only
            # buffered bytes, so no receive ever runs without the deadline's timeout.
            chunk = self._buffered.peek(1)[: limit - len(line)]
            if not chunk:
                break  # the client closed the connection
            end = chunk.find(b"\n")
            line += self._buffered.read(end + 1 if end >= 0 else len(chunk))
            if end >= 0:
                break
        return bytes(line)


class ExporterHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that carries the config, probe function and web config for its handlers."""

    daemon_threads = True
    # Seconds for a request line and headers to arrive (see HEADER_TIMEOUT_SECONDS); tests shorten it.
    header_timeout: float = HEADER_TIMEOUT_SECONDS

    def __init__(
        self,
        address: tuple[Any, ...],
        family: socket.AddressFamily,
        config: ExporterConfig,
        probe: ProbeFn,
        *,
        dual_stack: bool = False,
        own_metrics: OwnMetricsFn | None = None,
        web: WebConfigSource | None = None,
    ) -> None:
        self.address_family = family  # read by TCPServer.__init__ when it creates the socket
        self.dual_stack = dual_stack
        self.config = config
        self.probe = probe
        self.own_metrics = own_metrics
        self.web = web
        self.basic_auth = BasicAuthChecker()
        super().__init__(address, _Handler)

    @property
    def tls(self) -> bool:
        return self.web is not None and self.web.state.tls

    def web_state(self) -> WebState | None:
        """The web config generation for this connection or request (re-read when due)."""
        return self.web.current() if self.web is not None else None

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        state = self.web_state()
        if state is not None and state.ssl_context is not None:
            # Each connection is wrapped with the context current at accept time, so a rotated certificate
            # serves the next connection. The handshake runs later, on the connection's own thread, so a
            # slow client cannot stall accept().
            try:
                sock = state.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                sock.close()
                raise OSError(f"cannot set up TLS: {exc}") from None  # TCPServer drops the connection
        return sock, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            if not self._starts_tls(request, client_address):
                return
            request.settimeout(TLS_HANDSHAKE_TIMEOUT_SECONDS)
            try:
                request.do_handshake()
            except (OSError, ValueError) as exc:
                # Port scanners, plain-HTTP clients, wrong or missing client certificates: not our error.
                log.debug("TLS handshake failed", extra={"remote": client_address[0], "err": str(exc)})
                return
            state = self.web_state()
            if state is not None and not state.client_san_allowed(request.getpeercert()):
                log.debug("client certificate has no allowed SAN", extra={"remote": client_address[0]})
                return
        super().finish_request(request, client_address)

    def _starts_tls(self, sock: ssl.SSLSocket, client_address: Any) -> bool:
        """Peek at the client's first byte before the handshake: plain HTTP gets a 400 saying it reached
        the TLS port (as Go exporters answer) instead of a silent close. False when the connection is
        done with. The SSLSocket's own recv refuses flags, so the plain socket methods read the
        not-yet-encrypted stream."""
        sock.settimeout(self.header_timeout)
        try:
            first = socket.socket.recv(sock, 1, socket.MSG_PEEK)
        except OSError as exc:  # TimeoutError included: a client that never speaks
            log.debug("no TLS handshake", extra={"remote": client_address[0], "err": str(exc) or "timed out"})
            return False
        if not first:
            return False
        if first[0] == TLS_HANDSHAKE_RECORD or not first.isalpha():
            return True  # TLS, or something the handshake will refuse (and log) as before
        log.debug("plain HTTP request on the TLS port", extra={"remote": client_address[0]})
        body = (PLAIN_HTTP_TO_TLS + "\n").encode()
        head = [
            "HTTP/1.0 400 Bad Request",
            f"Content-Type: {TEXT}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in self.response_headers(html_page=False)),
        ]
        with contextlib.suppress(OSError):
            socket.socket.sendall(sock, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            socket.socket.shutdown(sock, socket.SHUT_WR)
            _drain(sock)
        return False

    def response_headers(self, *, html_page: bool) -> list[tuple[str, str]]:
        """Safe defaults, replaced by the web config's headers of the same name."""
        merged = {name.lower(): (name, value) for name, value in SECURITY_HEADERS}
        merged["content-security-policy"] = ("Content-Security-Policy", CSP_HTML if html_page else CSP_DATA)
        state = self.web.state if self.web is not None else None
        if state is not None:
            for name, value in state.headers:
                merged[name.lower()] = (name, value)
        return list(merged.values())

    def server_bind(self) -> None:
        if self.dual_stack:
            # ':9399' means every interface, IPv4 included, as in Go exporters.
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        # HTTPServer.server_bind would do a reverse DNS lookup of the bind address, which can stall
        # start-up for seconds on hosts without working DNS; nothing here uses that name.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError | ssl.SSLError):
            log.debug("client went away", extra={"remote": client_address[0], "err": str(exc)})
        else:
            log.error("unhandled error while serving a request", exc_info=True)

    @property
    def address_text(self) -> str:
        host, port = self.server_address[:2]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def _drain(sock: socket.socket) -> None:
    """Read what the client sent, bounded in bytes and time, so closing does not reset the connection."""
    deadline = time.monotonic() + DRAIN_SECONDS
    received = 0
    while received < DRAIN_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        sock.settimeout(left)
        chunk = socket.socket.recv(sock, 4096)
        if not chunk:
            return
        received += len(chunk)


class _Handler(BaseHTTPRequestHandler):
    # Keep-alive: Prometheus reuses connections between scrapes.
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, a reused connection waited ~40 ms for the
    # client's delayed ACK before the body left (measured by the bench: 48 ms probes instead of 4 ms).
    disable_nagle_algorithm = True
    server_version = f"mssql-memory-exporter/{__version__}"
    # Idle keep-alive connections each hold a thread; close them after this many seconds of silence.
    timeout = 90
    # The stdlib's own error pages (malformed request line, oversized headers) as plain text, not HTML.
    error_content_type = TEXT
    error_message_format = "%(code)d %(message)s\n"
    # Per response: whether end_headers() sends the HTML page's CSP.
    _html_page = False
    # Whether a request was read on this connection: the first one's header deadline starts when the
    # connection does, the next ones' after the idle wait.
    _idle_before_next = False

    @property
    def _exporter(self) -> ExporterHTTPServer:
        return cast(ExporterHTTPServer, self.server)

    def version_string(self) -> str:
        return self.server_version  # without the Python version the default adds

    def setup(self) -> None:
        self._connected_at = time.monotonic()
        super().setup()

    def handle_one_request(self) -> None:
        # The stdlib's loop body, with tighter limits on the request line and the header section, a
        # deadline for both, and every method sent to _handle (which answers 405 for the ones the
        # exporter does not serve).
        self._html_page = False
        try:
            head = self._head_reader()
            if head is None:
                self.close_connection = True
                return
            self.raw_requestline = head.request_line()
            if len(self.raw_requestline) > MAX_REQUEST_LINE:
                self.requestline = self.request_version = self.command = ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG, f"URL longer than {MAX_URL_LENGTH} bytes")
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            raw = self.rfile
            self.rfile = cast(Any, head)
            try:
                parsed = self.parse_request()
            finally:
                self.rfile = raw
                self.connection.settimeout(self.timeout)  # writing the answer: the stdlib's own timeout
            if not parsed:
                return  # parse_request has sent the error
            self._handle()
            self.wfile.flush()
        except TimeoutError as exc:
            self.log_error("Request timed out: %r", exc)
            self.close_connection = True

    def _head_reader(self) -> _HeadReader | None:
        """The reader for this request's line and headers, with its deadline; None when the client
        closed a kept-alive connection instead of sending another request."""
        header_timeout = self._exporter.header_timeout
        if not self._idle_before_next:
            self._idle_before_next = True
            return _HeadReader(self._buffered, self.connection, self._connected_at + header_timeout)
        # Kept alive: the client may stay silent for up to `timeout` between requests (TimeoutError
        # after that), and the next request's deadline starts with its first byte.
        self.connection.settimeout(self.timeout)
        if not self._buffered.peek(1):
            return None
        return _HeadReader(self._buffered, self.connection, time.monotonic() + header_timeout)

    @property
    def _buffered(self) -> io.BufferedReader:
        return cast(io.BufferedReader, self.rfile)  # makefile("rb") with the default buffering

    def handle_expect_100(self) -> bool:
        # No request body is ever read, so never invite the client to send one; the final answer follows.
        return True

    def end_headers(self) -> None:
        for name, value in self._exporter.response_headers(html_page=self._html_page):
            self.send_header(name, value)
        super().end_headers()

    def _handle(self) -> None:
        started = time.monotonic()
        response = self._respond()
        self._html_page = response.content_type == HTML
        self._send(response, send_body=self.command != "HEAD")
        self._access_log(response.status, started)

    def _respond(self) -> Response:
        """Checks in order of cost: size, rate, credentials, method, body; then the resource."""
        if len(self.path) > MAX_URL_LENGTH:
            return _text(414, f"URL longer than {MAX_URL_LENGTH} bytes")
        state = self._exporter.web_state()
        if state is not None and state.rate_limiter is not None and not state.rate_limiter.allow():
            return _text(429, "too many requests")
        # Every path, /-/healthy included, as exporter-toolkit does: nothing is served unauthenticated.
        if state is not None and state.users and not self._authenticated(state):
            log.debug("basic auth failed", extra={"remote": self.client_address[0]})
            return _text(401, "unauthorized", (("WWW-Authenticate", f'Basic realm="{AUTH_REALM}"'),))
        if self.command not in ("GET", "HEAD"):
            return _text(405, "method not allowed; use GET or HEAD", (("Allow", "GET, HEAD"),))
        body = self._body_problem()
        if body is not None:
            return body
        path, _, query = self.path.partition("?")
        path = urlsplit(path).path
        try:
            return self._route(path, query)
        except BadRequest as exc:
            return _text(400, str(exc))

    def _authenticated(self, state: WebState) -> bool:
        headers = self.headers.get_all("Authorization") or []
        # Two Authorization headers: which one a proxy checked is unknowable, so neither counts.
        return len(headers) == 1 and self._exporter.basic_auth.check(state.users, headers[0])

    def _body_problem(self) -> Response | None:
        # GET and HEAD carry no body here; one would be left unread (and parsed as the next request).
        if "Transfer-Encoding" in self.headers:
            return _text(413, "request bodies are not accepted")
        length = self.headers.get_all("Content-Length") or []
        if len(length) > 1 or (length and not length[0].strip().isdigit()):
            return _text(400, "malformed Content-Length")
        if length and int(length[0]) > 0:
            return _text(413, "request bodies are not accepted")
        return None

    def _route(self, path: str, query: str) -> Response:
        if path == "/metrics":
            _query_params(query, frozenset())
            return self._metrics()
        if path == "/probe":
            return self._probe(probe_target(query, self._exporter.config))
        if path == "/-/healthy":
            return _text(200, "OK")
        if path == "/":
            return Response(200, HTML, _index_page(self._exporter.config))
        return _text(404, "not found; try /metrics or /probe?target=NAME")

    def _metrics(self) -> Response:
        name = self._exporter.config.default_target
        target = self._exporter.config.targets[name] if name is not None else None
        return self._expose(target, own=True)

    def _probe(self, target: TargetConfig) -> Response:
        return self._expose(target)

    def _expose(self, target: TargetConfig | None, own: bool = False) -> Response:
        timeout = scrape_timeout(self.headers.get(SCRAPE_TIMEOUT_HEADER))
        try:
            process: list[Metric] = list(_PROCESS_METRICS.collect()) if own else []
            groups: list[list[Metric]] = []
            if own and self._exporter.own_metrics is not None:
                groups.append(self._exporter.own_metrics())
            if target is not None:
                groups.append(self._exporter.probe(target, timeout))
            body = render([*process, *merge_families(*groups)])
        except Exception:
            # The probe is meant to turn SQL failures into mssql_up 0; reaching here is a bug, and
            # one target's bug must not take the server down.
            log.exception("probe failed", extra={"target": target.name if target else ""})
            return _text(500, "internal error while collecting metrics; see the exporter log")
        return Response(200, CONTENT_TYPE_LATEST, body)

    def _send(self, response: Response, *, send_body: bool) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for key, value in response.headers:
            self.send_header(key, value)
        if self._has_unread_body() or self.command not in ("GET", "HEAD"):
            self.close_connection = True
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if send_body:
            self.wfile.write(response.body)

    def _has_unread_body(self) -> bool:
        # A GET with a body is legal but odd; its unread bytes would be parsed as the next request.
        return self.headers.get("Content-Length", "0") != "0" or "Transfer-Encoding" in self.headers

    def _access_log(self, status: int, started: float) -> None:
        path, _, query = self.path.partition("?")
        log.debug(
            "request",
            extra={
                "method": self.command,
                "path": _cut(path),
                "query": _loggable_query(query),
                "status": status,
                "duration_seconds": round(time.monotonic() - started, 6),
                "remote": self.client_address[0],
            },
        )

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Silenced: _access_log writes one line per request with the timing included."""

    def log_message(self, format: str, *args: Any) -> None:
        # The base class prints to stderr; route its messages (malformed requests, timeouts) through
        # logging instead, cut short because they quote the raw request line.
        log.debug((format % args)[: 2 * LOGGED_VALUE_MAX], extra={"remote": self.client_address[0]})


def make_server(
    config: ExporterConfig,
    probe: ProbeFn,
    listen: str,
    own_metrics: OwnMetricsFn | None = None,
    *,
    web: WebConfigSource | None = None,
) -> ExporterHTTPServer:
    """Bind (but do not start) the HTTP server on `listen`; call `serve_forever()` on the result.
    `own_metrics` adds families to /metrics (the host collector); `web` is the loaded --web.config.file
    (TLS, basic auth, headers). Raises ValueError for a malformed address and OSError when binding fails."""
    host, port = parse_listen_address(listen)
    extra: dict[str, Any] = {"own_metrics": own_metrics, "web": web}
    if not host:
        if socket.has_dualstack_ipv6():
            return ExporterHTTPServer(("::", port), socket.AF_INET6, config, probe, dual_stack=True, **extra)
        return ExporterHTTPServer(("0.0.0.0", port), socket.AF_INET, config, probe, **extra)
    resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    # A name such as localhost can resolve to both families; like Go exporters, take IPv4 first.
    family, _, _, _, sockaddr = min(resolved, key=lambda info: info[0] != socket.AF_INET)
    return ExporterHTTPServer(sockaddr, family, config, probe, **extra)
