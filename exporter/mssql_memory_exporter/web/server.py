"""The listening server: the listen queue, the connection loop and worker pool behind it, TLS set-up,
plain HTTP on the TLS port, readiness, response headers, and what it logs for a failing connection."""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import ssl
import sys
import time
from collections.abc import Callable
from http.server import HTTPServer
from pathlib import Path
from typing import Any

from mssql_memory_exporter.config import ExporterConfig
from mssql_memory_exporter.webconfig import BasicAuthChecker, WebConfigSource, WebState

from .connections import Connection, ConnectionLoop
from .handler import Handler
from .requests import (
    CSP_DATA,
    CSP_HTML,
    DRAIN_BYTES,
    DRAIN_SECONDS,
    HEADER_TIMEOUT_SECONDS,
    IDLE_TIMEOUT_SECONDS,
    PLAIN_HTTP_TO_TLS,
    SECURITY_HEADERS,
    SEND_TIMEOUT_SECONDS,
    TEXT,
    OwnMetricsFn,
    ProbeFn,
    worker_limit,
)

log = logging.getLogger(__name__)

SOMAXCONN_FILE = Path("/proc/sys/net/core/somaxconn")


def listen_backlog(path: Path = SOMAXCONN_FILE) -> int:
    """The kernel's limit for a listen queue, as Go's net package takes it: socketserver's default of 5
    dropped the SYNs of a burst (retried by clients after 1, 3, 7 ... s). Linux keeps the value in 16 bits
    before 4.1, hence the cap; elsewhere the platform's SOMAXCONN."""
    try:
        value = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return max(socket.SOMAXCONN, 128)
    return max(1, min(value, 65535))


class ExporterHTTPServer(HTTPServer):
    """The HTTP server with the config, probe function and web config its handlers need. Accepted
    connections go to a ConnectionLoop; their requests are answered on a bounded pool of threads."""

    request_queue_size = listen_backlog()  # read by TCPServer.server_activate for listen()
    # Seconds for a request line and headers to arrive (see HEADER_TIMEOUT_SECONDS); tests shorten it.
    header_timeout: float = HEADER_TIMEOUT_SECONDS
    idle_timeout: float = IDLE_TIMEOUT_SECONDS

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
        # /-/ready: true while serve_forever runs, false before and from the moment shutdown() begins.
        self.ready = False
        self.connections = ConnectionLoop(self)
        try:
            super().__init__(address, Handler)
        except BaseException:
            self.connections.close()
            raise

    @property
    def tls(self) -> bool:
        return self.web is not None and self.web.state.tls

    def worker_limit(self) -> int:
        return worker_limit(len(self.config.targets))

    def web_state(self) -> WebState | None:
        """The web config generation for this connection or request (re-read when due)."""
        return self.web.current() if self.web is not None else None

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.ready = True
        try:
            super().serve_forever(poll_interval)
        finally:
            self.ready = False

    def shutdown(self) -> None:
        self.ready = False  # before the wait: requests still being answered see 503 on /-/ready
        super().shutdown()

    def server_close(self) -> None:
        super().server_close()
        self.connections.close()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        state = self.web_state()
        if state is not None and state.ssl_context is not None:
            # Each connection is wrapped with the context current at accept time, so a rotated certificate
            # serves the next connection. The handshake runs later, in the connection loop, so a slow
            # client cannot stall accept().
            try:
                sock = state.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            except (OSError, ValueError) as exc:
                sock.close()
                raise OSError(f"cannot set up TLS: {exc}") from None  # TCPServer drops the connection
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request, client_address)

    def answer(self, conn: Connection) -> None:
        """Answers the request whose head is in `conn.buffer` (on a worker), then hands a kept-alive
        connection back to the loop or closes it."""
        keep = False
        try:
            conn.sock.settimeout(SEND_TIMEOUT_SECONDS)
            handler = Handler(conn, conn.address, self)
            keep = not handler.close_connection and not conn.eof
            del conn.buffer[: handler.consumed]
        except Exception:
            self.handle_error(conn.sock, conn.address)
        if keep:
            self.connections.park(conn)
        else:
            self.shutdown_request(conn.sock)

    def refuse_plain_http(self, conn: Connection) -> None:
        """A 400 saying the request reached the TLS port (on a worker); then the connection is closed."""
        sock = conn.sock
        body = (PLAIN_HTTP_TO_TLS + "\n").encode()
        head = [
            "HTTP/1.0 400 Bad Request",
            f"Content-Type: {TEXT}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in self.response_headers(html_page=False)),
        ]
        with contextlib.suppress(OSError):
            sock.settimeout(SEND_TIMEOUT_SECONDS)
            socket.socket.sendall(sock, ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            socket.socket.shutdown(sock, socket.SHUT_WR)
            _drain(sock)
        self.shutdown_request(sock)

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
        host, port = str(self.server_address[0]), self.server_address[1]  # a TCP server's: text, port
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


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
