"""The listening server: TLS handshakes and plain HTTP on the TLS port, header deadlines, response
headers, and what it logs for a failing connection."""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import ssl
import sys
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

from mssql_memory_exporter.config import ExporterConfig
from mssql_memory_exporter.webconfig import BasicAuthChecker, WebConfigSource, WebState

from .handler import Handler
from .requests import (
    CSP_DATA,
    CSP_HTML,
    DRAIN_BYTES,
    DRAIN_SECONDS,
    HEADER_TIMEOUT_SECONDS,
    PLAIN_HTTP_TO_TLS,
    SECURITY_HEADERS,
    TEXT,
    TLS_HANDSHAKE_RECORD,
    TLS_HANDSHAKE_TIMEOUT_SECONDS,
    OwnMetricsFn,
    ProbeFn,
)

log = logging.getLogger(__name__)


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
        # POST /-/reload calls this (the CLI sets it: reload.ConfigReloader.reload); None answers 404.
        self.reload: Callable[[str], str] | None = None
        super().__init__(address, Handler)

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
