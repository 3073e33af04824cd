"""One request: authentication, routing to /metrics, /probe, /-/healthy, /-/ready and the index page, the
response, the access log."""

from __future__ import annotations

import email.parser
import gzip
import io
import logging
import socket
import socketserver
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from prometheus_client.metrics_core import Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.config import ExporterConfig, ReloadRefused, TargetConfig
from mssql_memory_exporter.metrics.exposition import CONTENT_TYPE, render
from mssql_memory_exporter.webconfig import AUTH_REALM, BasicAuthChecker, WebState

from .connections import Connection, ConnectionLoop
from .pages import PROCESS_METRICS, http_worker_families, index_page, merge_families
from .requests import (
    GZIP_LEVEL,
    GZIP_MIN_BYTES,
    HTML,
    LOGGED_VALUE_MAX,
    MAX_REQUEST_LINE,
    MAX_URL_LENGTH,
    MIN_TIMEOUT_SECONDS,
    SCRAPE_TIMEOUT_HEADER,
    TEXT,
    TIMEOUT_OFFSET_SECONDS,
    BadRequest,
    OwnMetricsFn,
    ProbeFn,
    Response,
    accepts_gzip,
    cut_for_log,
    header_section,
    loggable_query,
    probe_request,
    query_params,
    request_line_problem,
    scrape_timeout,
    text_response,
)

log = logging.getLogger(__name__)

QUEUE_WAIT_IGNORED_SECONDS = 0.05
RELOAD_PATH = "/-/reload"


class Served(Protocol):
    """What a handler reads of the server it answers for (server.py): the config and probe, the web config
    and its headers, readiness, the reload hook and the worker pool's counts."""

    @property
    def config(self) -> ExporterConfig: ...

    @property
    def probe(self) -> ProbeFn: ...

    @property
    def own_metrics(self) -> OwnMetricsFn | None: ...

    @property
    def reload(self) -> Callable[[str], str] | None: ...

    @property
    def ready(self) -> bool: ...

    @property
    def basic_auth(self) -> BasicAuthChecker: ...

    @property
    def connections(self) -> ConnectionLoop: ...

    def web_state(self) -> WebState | None: ...

    def response_headers(self, *, html_page: bool) -> list[tuple[str, str]]: ...


class _SocketWriter(io.BufferedIOBase):
    """The handler's wfile: each write goes straight to the socket (headers are gathered by the stdlib
    first, so an answer is two sends)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class Handler(BaseHTTPRequestHandler):
    """Answers ONE request whose head the connection loop has read (connections.py): `request` is the
    Connection, its buffer the head (and any bytes of a pipelined next request). `close_connection` and
    `consumed` tell the server what to do with the connection afterwards."""

    # Keep-alive: Prometheus reuses connections between scrapes.
    protocol_version = "HTTP/1.1"
    # A request line without a version is HTTP/0.9 to the stdlib, whose answers then carry no status line
    # at all (errors included); such lines are refused with a status line instead (request_line_problem).
    default_request_version = "HTTP/1.0"
    # Headers and body go out in two writes; with Nagle on, a reused connection waited ~40 ms for the
    # client's delayed ACK before the body left (measured by the bench: 48 ms probes instead of 4 ms).
    disable_nagle_algorithm = True
    server_version = f"mssql-memory-exporter/{__version__}"
    # Per response: whether end_headers() sends the HTML page's CSP.
    _html_page = False
    # Bytes of the connection's buffer this request used (its head).
    consumed = 0

    def __init__(self, conn: Connection, client_address: Any, server: socketserver.BaseServer) -> None:
        # The request is the connection's socket, as for any socketserver handler; its head is already
        # in `conn.buffer` (read by the connection loop), which setup() hands to the stdlib as rfile.
        self.conn = conn
        super().__init__(conn.sock, client_address, server)

    @property
    def _exporter(self) -> Served:
        return cast(Served, self.server)

    def version_string(self) -> str:
        return self.server_version  # without the Python version the default adds

    def setup(self) -> None:
        conn = self.conn
        self.connection = conn.sock
        if self.disable_nagle_algorithm:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self.rfile = io.BytesIO(bytes(conn.buffer))
        self.wfile = _SocketWriter(conn.sock)

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def finish(self) -> None:
        self.consumed = self.rfile.tell()
        self.rfile.close()

    def handle_one_request(self) -> None:
        # The stdlib's loop body for a head already in memory, with tighter limits on the request line and
        # the header section, and every method sent to _handle (which answers 405 for the ones the
        # exporter does not serve).
        self._html_page = False
        self.raw_requestline = self.rfile.readline(MAX_REQUEST_LINE + 1)
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self._refuse(HTTPStatus.REQUEST_URI_TOO_LONG, f"URL longer than {MAX_URL_LENGTH} bytes")
            return
        if not self.raw_requestline:
            return
        problem = request_line_problem(self.raw_requestline)
        if problem is not None:
            self._refuse(*problem)
            return
        head = cast(io.BytesIO, self.rfile)
        section_start = head.tell()
        section_end, too_large = header_section(head.getvalue(), section_start)
        if too_large is not None:
            self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, too_large)
            return
        # The stdlib parses the request line (its errors, 400 and 505, are answered by send_error below);
        # the headers are parsed here, from the section already checked, because the stdlib counts the
        # empty line that ends them against its limit of 100 (so 100 header lines got 431).
        self.rfile = io.BytesIO(b"\r\n")
        try:
            parsed = self.parse_request()
        finally:
            self.rfile = head
        head.seek(section_end)
        if not parsed:
            return
        section = head.getvalue()[section_start:section_end].decode("iso-8859-1")
        self.headers = email.parser.Parser(_class=self.MessageClass).parsestr(section)
        connection = self.headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        # An `Expect: 100-continue` needs nothing: no body is ever read (see handle_expect_100).
        self._handle()

    def _refuse(self, status: int, message: str) -> None:
        """An error answer before the request line is parsed (so with the default version's status line)."""
        self.requestline = self.raw_requestline[:LOGGED_VALUE_MAX].decode("latin-1").rstrip("\r\n")
        self.request_version, self.command = self.default_request_version, ""
        self.send_error(status, message)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The stdlib's, except that the status line keeps the standard reason phrase (the stdlib puts the
        message there) and the body is `<code> <message>` as plain text."""
        status = HTTPStatus(code)
        text = message or status.phrase
        self.log_error("code %d, message %s", code, text)
        self.send_response(code)
        self.send_header("Connection", "close")
        body = f"{code} {text}\n".encode("utf-8", "replace")
        self.send_header("Content-Type", TEXT)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_expect_100(self) -> bool:
        # No request body is ever read, so never invite the client to send one; the final answer follows.
        return True

    def end_headers(self) -> None:
        for name, value in self._exporter.response_headers(html_page=self._html_page):
            self.send_header(name, value)
        super().end_headers()

    def _handle(self) -> None:
        started = time.monotonic()
        response = self._compressed(self._respond())
        self._html_page = response.content_type == HTML
        self._send(response, send_body=self.command != "HEAD")
        self._access_log(response, started)

    def _respond(self) -> Response:
        """Checks in order of cost: size, rate, credentials, method, body; then the resource."""
        if len(self.path) > MAX_URL_LENGTH:
            return text_response(414, f"URL longer than {MAX_URL_LENGTH} bytes")
        state = self._exporter.web_state()
        if state is not None and state.rate_limiter is not None and not state.rate_limiter.allow():
            return text_response(429, "too many requests")
        # Every path, /-/healthy included, as exporter-toolkit does: nothing is served unauthenticated.
        if state is not None and state.users and not self._authenticated(state):
            log.debug("basic auth failed", extra={"remote": self.client_address[0]})
            return text_response(401, "unauthorized", (("WWW-Authenticate", f'Basic realm="{AUTH_REALM}"'),))
        if urlsplit(self.path.partition("?")[0]).path == RELOAD_PATH:
            return self._reload()
        if self.command not in ("GET", "HEAD"):
            return text_response(405, "method not allowed; use GET or HEAD", (("Allow", "GET, HEAD"),))
        body = self._body_problem()
        if body is not None:
            return body
        path, _, query = self.path.partition("?")
        path = urlsplit(path).path
        try:
            return self._route(path, query)
        except BadRequest as exc:
            return text_response(400, str(exc))

    def _authenticated(self, state: WebState) -> bool:
        headers = self.headers.get_all("Authorization") or []
        # Two Authorization headers: which one a proxy checked is unknowable, so neither counts.
        return len(headers) == 1 and self._exporter.basic_auth.check(state.users, headers[0])

    def _body_problem(self) -> Response | None:
        # GET and HEAD carry no body here; one would be left unread (and parsed as the next request).
        if "Transfer-Encoding" in self.headers:
            return text_response(413, "request bodies are not accepted")
        length = self.headers.get_all("Content-Length") or []
        if len(length) > 1 or (length and not length[0].strip().isdigit()):
            return text_response(400, "malformed Content-Length")
        if length and int(length[0]) > 0:
            return text_response(413, "request bodies are not accepted")
        return None

    def _route(self, path: str, query: str) -> Response:
        if path == "/metrics":
            query_params(query, frozenset())
            return self._unscraped() if self.command == "HEAD" else self._metrics()
        if path == "/probe":
            target, collect = probe_request(query, self._exporter.config)  # HEAD checks the query too
            return self._unscraped() if self.command == "HEAD" else self._probe(target, collect)
        if path == "/-/healthy":
            return text_response(200, "OK")
        if path == "/-/ready":
            # Liveness is /-/healthy; this says whether requests are being accepted: false until the
            # server serves (config loaded, listening) and again once it begins to stop.
            if self._exporter.ready:
                return text_response(200, "OK")
            return text_response(503, "not ready: starting or stopping")
        if path == "/":
            return Response(200, HTML, index_page(self._exporter.config))
        return text_response(404, "not found; try /metrics or /probe?target=NAME")

    @staticmethod
    def _unscraped() -> Response:
        """HEAD /probe or /metrics: a monitoring check or a curious proxy must not cost a SQL batch."""
        return Response(200, CONTENT_TYPE, b"", unmeasured=True)

    def _compressed(self, response: Response) -> Response:
        """gzip for a client that accepts it (Prometheus sends `Accept-Encoding: gzip`); a probe of a
        typical target shrinks from ~35 kB to ~7.5 kB. Only the expositions: the rest is a few bytes."""
        if response.content_type != CONTENT_TYPE:
            return response
        headers = (*response.headers, ("Vary", "Accept-Encoding"))
        wanted = accepts_gzip(self.headers.get("Accept-Encoding"))
        if not wanted or (len(response.body) < GZIP_MIN_BYTES and not response.unmeasured):
            return response._replace(headers=headers)
        body = gzip.compress(response.body, compresslevel=GZIP_LEVEL, mtime=0) if response.body else b""
        return response._replace(body=body, headers=(*headers, ("Content-Encoding", "gzip")))

    def _metrics(self) -> Response:
        config = self._exporter.config  # read once: a reload may replace it meanwhile
        name = config.default_target
        target = config.targets[name] if name is not None else None
        return self._expose(target, own=True)

    def _reload(self) -> Response:
        """POST /-/reload: reload the config file now (reload.py); a refused config answers 500 with
        the start-up error lines (field paths, never secrets) and the running config keeps serving."""
        if self.command != "POST":
            return text_response(405, "method not allowed; use POST", (("Allow", "POST"),))
        body = self._body_problem()
        if body is not None:
            return body
        reload = self._exporter.reload
        if reload is None:
            return text_response(404, "reload is not available")
        try:
            summary = reload("POST /-/reload")
        except ReloadRefused as exc:
            return text_response(
                500, "config reload refused; the running config keeps serving:\n" + "\n".join(exc.lines)
            )
        return text_response(200, f"config reloaded: {summary}")

    def _probe(self, target: TargetConfig, collect: frozenset[str] | None = None) -> Response:
        return self._expose(target, collect=collect)

    def _expose(
        self, target: TargetConfig | None, own: bool = False, collect: frozenset[str] | None = None
    ) -> Response:
        # Prometheus' clock started when it sent the request: time spent waiting for a free thread (a
        # burst larger than the pool) is taken off the probe's. A request that waited as long as its
        # scraper allows is not scraped: the scraper has given up, and the work would only delay the
        # requests behind it. Waits under 50 ms are noise inside TIMEOUT_OFFSET_SECONDS.
        timeout = scrape_timeout(self.headers.get(SCRAPE_TIMEOUT_HEADER))
        waited = time.monotonic() - self.conn.queued_at
        if waited > QUEUE_WAIT_IGNORED_SECONDS:
            if target is not None and waited >= timeout + TIMEOUT_OFFSET_SECONDS:
                late = f"not scraped: this request waited {waited:.1f} s for a free thread, past its timeout"
                return text_response(503, late, (("Retry-After", "1"),))
            timeout = max(MIN_TIMEOUT_SECONDS, timeout - waited)
        try:
            process: list[Metric] = list(PROCESS_METRICS.collect()) if own else []
            groups: list[list[Metric]] = []
            if own:
                groups.append(http_worker_families(*self._exporter.connections.pool.counts()))
            if own and self._exporter.own_metrics is not None:
                groups.append(self._exporter.own_metrics())
            if target is not None:
                # Only a narrowed probe passes collect: probe functions without it keep working.
                probe = self._exporter.probe
                groups.append(probe(target, timeout) if collect is None else probe(target, timeout, collect))
            body = render([*process, *merge_families(*groups)])
        except Exception:
            # The probe is meant to turn SQL failures into mssql_up 0; reaching here is a bug, and
            # one target's bug must not take the server down.
            log.exception("probe failed", extra={"target": target.name if target else ""})
            return text_response(500, "internal error while collecting metrics; see the exporter log")
        return Response(200, CONTENT_TYPE, body)

    def _send(self, response: Response, *, send_body: bool) -> None:
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        if not response.unmeasured:
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

    def _access_log(self, response: Response, started: float) -> None:
        path, _, query = self.path.partition("?")
        encoded = ("Content-Encoding", "gzip") in response.headers
        log.debug(
            "request",
            extra={
                "method": self.command,
                "path": cut_for_log(path),
                "query": loggable_query(query),
                "status": response.status,
                "bytes": len(response.body),
                "encoding": "gzip" if encoded else "identity",
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
