"""One request: authentication, routing to /metrics, /probe, /-/healthy, /-/ready and the index page, the
response, the access log."""

from __future__ import annotations

import gzip
import logging
import socket
import time
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Protocol
from urllib.parse import urlsplit

import h11
from prometheus_client.metrics_core import Metric

from mssql_memory_exporter import __version__
from mssql_memory_exporter.config import ExporterConfig, ReloadRefused, TargetConfig
from mssql_memory_exporter.metrics.exposition import CONTENT_TYPE, render
from mssql_memory_exporter.webconfig import AUTH_REALM, BasicAuthChecker, WebState

from .connections import Connection, ConnectionLoop
from .pages import PROCESS_METRICS, http_worker_families, index_page, merge_families
from .protocol import Headers, Refusal, request_refusal
from .requests import (
    DRAIN_BYTES,
    DRAIN_SECONDS,
    GZIP_LEVEL,
    GZIP_MIN_BYTES,
    HTML,
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
    loggable_query,
    probe_request,
    query_params,
    scrape_timeout,
    text_response,
)

log = logging.getLogger(__name__)

QUEUE_WAIT_IGNORED_SECONDS = 0.05
RELOAD_PATH = "/-/reload"
SERVER_NAME = f"mssql-memory-exporter/{__version__}"


class Served(Protocol):
    """What a handler reads of the server it answers for (server.py): the config and probe, the web config
    and its headers, readiness and whether to keep connections, the reload hook and whether it is on, the
    telemetry path and whether the exporter's own metrics go there, and the worker pool's counts."""

    @property
    def config(self) -> ExporterConfig: ...

    @property
    def probe(self) -> ProbeFn: ...

    @property
    def own_metrics(self) -> OwnMetricsFn | None: ...

    @property
    def reload(self) -> Callable[[str], str] | None: ...

    @property
    def lifecycle(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def keep_alive(self) -> bool: ...

    @property
    def telemetry_path(self) -> str: ...

    @property
    def exporter_metrics(self) -> bool: ...

    @property
    def basic_auth(self) -> BasicAuthChecker: ...

    @property
    def connections(self) -> ConnectionLoop: ...

    def web_state(self) -> WebState | None: ...

    def response_headers(self, *, html_page: bool) -> list[tuple[str, str]]: ...


class Handler:
    """Answers ONE request the connection loop has read (connections.py): `conn.request` is what h11
    parsed, or `conn.refusal` says why it was refused. `run()` writes the answer through h11 and says
    whether the connection can serve another request."""

    def __init__(self, conn: Connection, server: Served) -> None:
        self.conn = conn
        self._exporter = server
        self.client_address = conn.address
        request = conn.request
        self.command = request.method.decode("ascii") if request is not None else ""
        # The target as sent, ISO-8859-1 as HTTP has it (h11 allows only visible ASCII there).
        self.path = request.target.decode("latin-1") if request is not None else ""
        self.headers = Headers(list(request.headers.raw_items()) if request is not None else [])

    def run(self) -> bool:
        """Answers; True if the connection may carry another request."""
        request = self.conn.request
        refusal = self.conn.refusal if request is None else request_refusal(request)
        if refusal is not None:
            self._refuse(refusal)
            return False
        started = time.monotonic()
        response = self._compressed(self._respond())
        self._send(response)
        self._access_log(response, started)
        http = self.conn.http
        if http.our_state is h11.DONE and http.their_state is h11.DONE:
            http.start_next_cycle()
            return True
        return False

    def _refuse(self, refusal: Refusal) -> None:
        """An error answer to a request h11 (or a limit) refused, then the connection is closed: what
        follows a refused head is never read as a request. Written without h11, which has no request
        to answer when the request line itself was refused."""
        status = HTTPStatus(refusal.status)
        body = f"{status.value} {refusal.message}\n".encode("utf-8", "replace")
        log.debug(
            "request refused",
            extra={"status": status.value, "err": refusal.message, "remote": self.client_address[0]},
        )
        head = [
            f"HTTP/1.1 {status.value} {status.phrase}",
            *(f"{name}: {value}" for name, value in self._common_headers(html_page=False)),
            f"Content-Type: {TEXT}",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        send = head_bytes(head) + (body if self.command != "HEAD" else b"")
        self.conn.sock.sendall(send)
        drain(self.conn.sock)

    def _common_headers(self, *, html_page: bool) -> list[tuple[str, str]]:
        return [
            ("Server", SERVER_NAME),
            ("Date", formatdate(usegmt=True)),
            *self._exporter.response_headers(html_page=html_page),
        ]

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
        return len(headers) == 1 and self._exporter.basic_auth.check(
            state.users, headers[0], client=str(self.client_address[0])
        )

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
        if path == self._exporter.telemetry_path:
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
            return Response(200, HTML, index_page(self._exporter.config, self._exporter.telemetry_path))
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
        if not self._exporter.lifecycle:
            # Prometheus' answer when its --web.enable-lifecycle is off; SIGHUP reloads either way.
            return text_response(
                403,
                "Lifecycle API is not enabled; start the exporter with --web.enable-lifecycle, "
                "or send it SIGHUP",
            )
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
            # --web.disable-exporter-metrics leaves out the process and runtime families and the HTTP
            # threads (what exporter-toolkit's flag leaves out: process_*, go_*, promhttp_*).
            exporter_metrics = own and self._exporter.exporter_metrics
            process: list[Metric] = list(PROCESS_METRICS.collect()) if exporter_metrics else []
            groups: list[list[Metric]] = []
            if exporter_metrics:
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

    def _send(self, response: Response) -> None:
        headers = self._common_headers(html_page=response.content_type == HTML)
        headers.append(("Content-Type", response.content_type))
        if not response.unmeasured:
            headers.append(("Content-Length", str(len(response.body))))
        headers.extend(response.headers)
        if (
            self._has_unread_body()
            or self.command not in ("GET", "HEAD")
            or not self._exporter.keep_alive
            or self.conn.eof
        ):
            headers.append(("Connection", "close"))
        http = self.conn.http
        data = http.send(h11.Response(status_code=response.status, headers=headers, reason=_phrase(response)))
        if self.command != "HEAD" and response.body:
            data += http.send(h11.Data(data=response.body)) or b""
        data += http.send(h11.EndOfMessage()) or b""
        self.conn.sock.sendall(data or b"")

    def _has_unread_body(self) -> bool:
        # A body is never read: its bytes would otherwise be parsed as the next request.
        return self.conn.http.their_state is not h11.DONE

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


def _phrase(response: Response) -> bytes:
    return HTTPStatus(response.status).phrase.encode("ascii")


def head_bytes(lines: list[str]) -> bytes:
    """A response head (status line and header lines) as sent, for answers written without h11."""
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def drain(sock: socket.socket) -> None:
    """After an answer that closes the connection: stop sending, then read what the client still sends,
    bounded in bytes and time, so closing with unread bytes does not reset the connection (a reset can
    destroy the answer before the client reads it)."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_WR)
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
    except OSError:
        return
