"""The listening server: the listen queue, the connection loop and worker pool behind it, TLS set-up,
plain HTTP on the TLS port, readiness, response headers, and what it logs for a failing connection."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import socketserver
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mssql_memory_exporter.config import ExporterConfig
from mssql_memory_exporter.webconfig import BasicAuthChecker, WebConfigSource, WebState

from .connections import Connection, ConnectionLoop
from .handler import Handler, drain, head_bytes
from .listeners import ExtraListener
from .requests import (
    CSP_DATA,
    CSP_HTML,
    HEADER_TIMEOUT_SECONDS,
    IDLE_TIMEOUT_SECONDS,
    MAX_WORKERS,
    PLAIN_HTTP_TO_TLS,
    SECURITY_HEADERS,
    SEND_TIMEOUT_SECONDS,
    TEXT,
    OwnMetricsFn,
    ProbeFn,
    worker_limit,
)

log = logging.getLogger(__name__)

# accept() errors that mean "no descriptor or buffer for one more connection": back off (see get_request).
ACCEPT_RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_BACKOFF_MIN = 0.005
ACCEPT_BACKOFF_MAX = 1.0
# drain(): how long the pools must stay idle to count as done (one pass of the connection loop).
DRAIN_SETTLE_SECONDS = 0.05

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


class ExporterHTTPServer(socketserver.TCPServer):
    """The HTTP server with the config, probe function and web config its handlers need, on one or more
    listening sockets (bound by make_server, or passed by systemd). Accepted connections go to a
    ConnectionLoop; their requests are answered on a bounded pool of threads."""

    request_queue_size = listen_backlog()  # the listen() backlog make_server gives each socket
    # The answer goes out in one write, but a client's delayed ACK of an earlier one would hold it ~40 ms
    # with Nagle on (measured by the bench: 48 ms probes instead of 4 ms on a reused connection).
    disable_nagle_algorithm = True
    # Seconds for a request line and headers to arrive (see HEADER_TIMEOUT_SECONDS); tests shorten it.
    header_timeout: float = HEADER_TIMEOUT_SECONDS
    idle_timeout: float = IDLE_TIMEOUT_SECONDS

    def __init__(
        self,
        sockets: list[socket.socket],
        config: ExporterConfig,
        probe: ProbeFn,
        *,
        own_metrics: OwnMetricsFn | None = None,
        web: WebConfigSource | None = None,
    ) -> None:
        self.config = config
        self.probe = probe
        self.own_metrics = own_metrics
        self.web = web
        self.basic_auth = BasicAuthChecker()
        # POST /-/reload calls this (the CLI sets it: reload.ConfigReloader.reload); None answers 404.
        self.reload: Callable[[str], str] | None = None
        # /-/ready: true while serve_forever runs, false before and from the moment shutdown() begins.
        self.ready = False
        # --web.max-requests: the worker pool's size (None: from the number of targets, see worker_limit).
        self.max_requests: int | None = None
        # --web.telemetry-path, --web.disable-exporter-metrics, --web.enable-lifecycle (cli.py).
        self.telemetry_path = "/metrics"
        self.exporter_metrics = True
        self.lifecycle = False
        # False once a stop has begun (drain): answers then close their connection.
        self.keep_alive = True
        self._stopping = threading.Event()
        self._accept_failures = 0
        self._accept_delay = 0.0
        self.connections = ConnectionLoop(self)
        first = sockets[0]
        self.address_family = first.family
        super().__init__(first.getsockname(), socketserver.BaseRequestHandler, bind_and_activate=False)
        self.socket.close()  # the one TCPServer made; the listening socket is given
        self.socket = first
        self.server_address = first.getsockname()
        self.extra = [ExtraListener(sock, self._accept_on, self) for sock in sockets[1:]]
        self._extra_threads: list[threading.Thread] = []

    @property
    def tls(self) -> bool:
        return self.web is not None and self.web.state.tls

    def worker_limit(self) -> int:
        """Requests answered at once (--web.max-requests; by default from the number of targets)."""
        if self.max_requests is not None:
            return self.max_requests or MAX_WORKERS  # 0: no limit of the operator's, only the hard cap
        return worker_limit(len(self.config.targets))

    def web_state(self) -> WebState | None:
        """The web config generation for this connection or request (re-read when due)."""
        return self.web.current() if self.web is not None else None

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        for number, listener in enumerate(self.extra, 1):
            thread = threading.Thread(
                target=listener.serve_forever,
                args=(poll_interval,),
                name=f"http-listen-{number}",
                daemon=True,
            )
            thread.start()
            self._extra_threads.append(thread)
        self.ready = True
        try:
            super().serve_forever(poll_interval)
        finally:
            self.ready = False

    def shutdown(self) -> None:
        self.ready = False  # before the wait: requests still being answered see 503 on /-/ready
        self._stopping.set()  # ends an accept back-off at once
        for listener, _ in zip(self.extra, self._extra_threads, strict=False):
            listener.shutdown()
        super().shutdown()

    def drain(self, timeout: float) -> bool:
        """After shutdown(): answers the requests already accepted, for at most `timeout` seconds (a
        probe stuck on a silent server is abandoned when it runs out). Connections the kernel accepted
        and this server had not yet taken are taken now; every answer from here closes its connection.
        True if nothing was left unanswered."""
        self.keep_alive = False
        deadline = time.monotonic() + timeout
        self._take_queued_connections()
        pools = (self.connections.pool, self.connections.health)
        while True:
            # A request whose head is buffered reaches a pool within one pass of the connection loop:
            # idle twice in a row, a settle apart, means nothing more is on its way.
            idle = all(pool.wait_idle(max(0.0, deadline - time.monotonic())) for pool in pools)
            if idle:
                time.sleep(DRAIN_SETTLE_SECONDS)
                if all(pool.wait_idle(0) for pool in pools):
                    return True
            if time.monotonic() >= deadline:
                busy = sum(pool.counts()[0] for pool in pools)
                log.warning("stopping with requests unanswered", extra={"requests": busy})
                return False

    def _take_queued_connections(self) -> None:
        for listening in self.sockets:
            try:
                listening.setblocking(False)
                while True:
                    try:
                        sock, address = self._accept_on(listening)
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError:
                        break  # out of descriptors, or a TLS set-up failure: not worth waiting for
                    self.process_request(sock, address)
            except OSError:
                continue  # the listening socket is gone

    def server_close(self) -> None:
        for listener in self.extra:
            listener.server_close()
        super().server_close()
        self.connections.close()

    def get_request(self) -> tuple[socket.socket, Any]:
        return self._accept_on(self.socket)

    def _accept_on(self, listening: socket.socket) -> tuple[socket.socket, Any]:
        try:
            sock, address = listening.accept()
        except OSError as exc:
            if exc.errno in ACCEPT_RESOURCE_ERRORS:
                self._accept_backoff(exc)
            raise  # TCPServer drops the attempt and selects again
        if self._accept_failures:
            log.info("accepting connections again", extra={"failed_accepts": self._accept_failures})
            self._accept_failures, self._accept_delay = 0, 0.0
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

    def _accept_backoff(self, exc: OSError) -> None:
        """accept() failed for want of a descriptor (or memory): the connection stays in the listen queue,
        so the socket stays readable and retrying at once spins a CPU (26,000 tries in 8 s at 128 files).
        Wait 5 ms, doubling to 1 s, as Go's server does, and say so once per episode; connections already
        accepted are served meanwhile, and freeing descriptors ends the episode at the next try."""
        if not self._accept_failures:
            log.warning(
                "cannot accept connections; retrying with back-off (raise the open files limit)",
                extra={"err": exc.strerror or str(exc), "connections": self.connections.connections},
            )
        self._accept_failures += 1
        self._accept_delay = min(ACCEPT_BACKOFF_MAX, max(ACCEPT_BACKOFF_MIN, 2 * self._accept_delay))
        self._stopping.wait(self._accept_delay)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections.add(request, client_address)

    def answer(self, conn: Connection) -> None:
        """Answers the request h11 parsed on `conn` (on a worker), then hands a kept-alive connection back
        to the loop or closes it."""
        keep = False
        try:
            conn.sock.settimeout(SEND_TIMEOUT_SECONDS)
            if self.disable_nagle_algorithm:
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
            keep = Handler(conn, self).run() and not conn.eof
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
            socket.socket.sendall(sock, head_bytes(head) + body)
            drain(sock)
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

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError | ssl.SSLError):
            log.debug("client went away", extra={"remote": client_address[0], "err": str(exc)})
        else:
            log.error("unhandled error while serving a request", exc_info=True)

    @property
    def address_text(self) -> str:
        """Every address served, comma-separated (the first is `server_address`)."""
        return ",".join(_address_text(sock.getsockname()) for sock in self.sockets)

    @property
    def sockets(self) -> list[socket.socket]:
        return [self.socket, *(listener.socket for listener in self.extra)]


def _address_text(address: tuple[Any, ...]) -> str:
    host, port = address[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
