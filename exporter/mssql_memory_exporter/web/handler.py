"""One request: authentication, routing to /metrics, /probe, /-/healthy and the index page, the
response, the access log."""

from __future__ import annotations

import http.client
import io
import logging
import socket
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from prometheus_client import (
    CONTENT_TYPE_LATEST,
)
from prometheus_client.metrics_core import Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.config import TargetConfig
from mssql_memory_exporter.exposition import render
from mssql_memory_exporter.reload import ReloadRefused
from mssql_memory_exporter.webconfig import AUTH_REALM, WebState

from .pages import PROCESS_METRICS, index_page, merge_families
from .requests import (
    HTML,
    LOGGED_VALUE_MAX,
    MAX_HEADER_BYTES,
    MAX_REQUEST_LINE,
    MAX_URL_LENGTH,
    SCRAPE_TIMEOUT_HEADER,
    TEXT,
    BadRequest,
    Response,
    cut_for_log,
    loggable_query,
    probe_target,
    query_params,
    scrape_timeout,
    text_response,
)

if TYPE_CHECKING:  # the server module builds on this one
    from .server import ExporterHTTPServer

log = logging.getLogger(__name__)

RELOAD_PATH = "/-/reload"


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


class Handler(BaseHTTPRequestHandler):
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
        return cast("ExporterHTTPServer", self.server)

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
            return self._metrics()
        if path == "/probe":
            return self._probe(probe_target(query, self._exporter.config))
        if path == "/-/healthy":
            return text_response(200, "OK")
        if path == "/":
            return Response(200, HTML, index_page(self._exporter.config))
        return text_response(404, "not found; try /metrics or /probe?target=NAME")

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

    def _probe(self, target: TargetConfig) -> Response:
        return self._expose(target)

    def _expose(self, target: TargetConfig | None, own: bool = False) -> Response:
        timeout = scrape_timeout(self.headers.get(SCRAPE_TIMEOUT_HEADER))
        try:
            process: list[Metric] = list(PROCESS_METRICS.collect()) if own else []
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
            return text_response(500, "internal error while collecting metrics; see the exporter log")
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
                "path": cut_for_log(path),
                "query": loggable_query(query),
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
