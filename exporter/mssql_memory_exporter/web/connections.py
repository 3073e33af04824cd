"""Accepted connections until a request head has arrived whole: one thread and a selector for them all.

A connection costs a thread only while its request is answered (pool.py). Before that, one loop reads
what every connection sends without blocking: the TLS handshake, the request line and headers (by a
deadline, so a client trickling bytes cannot hold anything but a file descriptor), and the silence of a
kept-alive connection between scrapes. Each connection's bytes go to its h11 state machine
(protocol.py); a request h11 has parsed, or the refusal of one it could not, is handed to a worker
(health and readiness to a lane of their own); after the answer a kept-alive connection comes back here.

Deadlines (the same as when each connection had its own thread):
- plain HTTP: the request line and headers within `header_timeout` of the accept;
- TLS: the first byte within `header_timeout`, the handshake within TLS_HANDSHAKE_TIMEOUT_SECONDS of
  it, then the head within `header_timeout`;
- kept alive: the next request may take `idle_timeout` to begin, and its head `header_timeout` from
  its first byte.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

import h11

from mssql_memory_exporter.webconfig import WebState

from .pool import BoundedPool
from .protocol import Refusal, buffered, early_refusal, new_connection, refusal_for
from .requests import TLS_HANDSHAKE_RECORD, TLS_HANDSHAKE_TIMEOUT_SECONDS

log = logging.getLogger(__name__)

RECEIVE_BYTES = 65536
# The paths answered on the health lane, and its threads: each answer takes microseconds (or one bcrypt
# check with basic auth), so a few threads serve any rate an orchestrator sends.
HEALTH_PATHS = frozenset({b"/-/healthy", b"/-/ready"})
HEALTH_WORKERS = 4


class Phase(Enum):
    TLS_FIRST_BYTE = "waiting for the TLS handshake to begin"
    HANDSHAKE = "TLS handshake"
    HEAD = "request line and headers"
    IDLE = "idle keep-alive connection"


@dataclass(eq=False)
class Connection:
    sock: socket.socket
    address: Any
    phase: Phase
    deadline: float
    # The connection's HTTP state (h11): the bytes received and not yet parsed, keep-alive, pipelining.
    http: h11.Connection = field(default_factory=new_connection)
    # What a worker answers: a request h11 parsed, or a refusal of one it (or a limit) refused.
    request: h11.Request | None = None
    refusal: Refusal | None = None
    eof: bool = False  # the client closed its side; answer what arrived, then close
    queued_at: float = 0.0  # when the request was handed to the pool: its wait counts against its timeout
    events: int = selectors.EVENT_READ


class LoopOwner(Protocol):
    """What the loop needs of the server that owns it (server.py): its deadlines, its worker limit and web
    config, and what to do with a connection once its head has arrived or it is given up."""

    @property
    def header_timeout(self) -> float: ...

    @property
    def idle_timeout(self) -> float: ...

    def worker_limit(self) -> int: ...

    def web_state(self) -> WebState | None: ...

    def shutdown_request(self, request: socket.socket) -> None: ...

    def answer(self, conn: Connection) -> None: ...

    def refuse_plain_http(self, conn: Connection) -> None: ...


class ConnectionLoop:
    """Owns every connection that is not being answered; `add` takes new ones, `park` kept-alive ones."""

    def __init__(self, server: LoopOwner) -> None:
        self._server = server
        self.pool = BoundedPool(server.worker_limit, "http")
        # Liveness and readiness have threads of their own, so a pool full of probes stuck on a silent
        # server (each waits its scrape timeout) never makes Kubernetes' 1 s liveness probe fail.
        self.health = BoundedPool(lambda: HEALTH_WORKERS, "http-health")
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._incoming: list[Connection] = []
        self._closed = False
        self._thread: threading.Thread | None = None
        self._owned: set[Connection] = set()
        self._deadlines: list[tuple[float, int, Connection]] = []
        self._order = itertools.count()

    def add(self, sock: socket.socket, address: Any) -> None:
        """A connection just accepted (called on the accepting thread)."""
        now = time.monotonic()
        if isinstance(sock, ssl.SSLSocket):
            conn = Connection(sock, address, Phase.TLS_FIRST_BYTE, now + self._server.header_timeout)
        else:
            conn = Connection(sock, address, Phase.HEAD, now + self._server.header_timeout)
        self._hand_over(conn)

    def park(self, conn: Connection) -> None:
        """A kept-alive connection whose answer went out (called on a worker). Bytes of a pipelined next
        request may already be in its buffer."""
        now = time.monotonic()
        conn.request = conn.refusal = None
        if buffered(conn.http):
            conn.phase, conn.deadline = Phase.HEAD, now + self._server.header_timeout
        else:
            conn.phase, conn.deadline = Phase.IDLE, now + self._server.idle_timeout
        self._hand_over(conn)

    def close(self) -> None:
        """Closes every connection waiting here and stops the loop; answers under way finish."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self.pool.close()
        self.health.close()
        if thread is None:
            self._release()
            return
        self._wake()
        if thread is not threading.current_thread():
            thread.join(timeout=5)

    @property
    def connections(self) -> int:
        """Connections waiting here (not being answered)."""
        with self._lock:
            return len(self._owned) + len(self._incoming)

    def _hand_over(self, conn: Connection) -> None:
        with self._lock:
            if self._closed:
                self._server.shutdown_request(conn.sock)
                return
            self._incoming.append(conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-connections", daemon=True)
                self._thread.start()
        self._wake()

    def _wake(self) -> None:
        # Full: the loop is woken already; closed: it has stopped.
        with contextlib.suppress(OSError):
            self._wake_write.send(b"\0")

    def _run(self) -> None:
        try:
            while True:
                now = time.monotonic()
                timeout = min(1.0, max(0.0, self._deadlines[0][0] - now)) if self._deadlines else 1.0
                for key, _ in self._selector.select(timeout):
                    if key.data is None:
                        self._drain_wake()
                    else:
                        self._advance(key.data)
                with self._lock:
                    incoming, self._incoming = self._incoming, []
                    closed = self._closed
                if closed:
                    for conn in incoming:
                        self._server.shutdown_request(conn.sock)
                    return
                for conn in incoming:
                    self._take(conn)
                self._expire()
        except Exception:
            # Not expected (each connection's own errors are caught in _advance); with the loop gone no
            # request would be answered, so refuse new connections at once rather than hold them.
            log.exception("the HTTP connection loop failed; new connections are closed")
            with self._lock:
                self._closed = True
        finally:
            self._release()

    def _release(self) -> None:
        with self._lock:
            leftover, self._incoming = self._incoming, []
        for conn in [*self._owned, *leftover]:
            self._server.shutdown_request(conn.sock)
        self._owned.clear()
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    def _drain_wake(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _take(self, conn: Connection) -> None:
        conn.sock.setblocking(False)
        conn.events = selectors.EVENT_READ
        try:
            self._selector.register(conn.sock, conn.events, conn)
        except (ValueError, OSError):  # closed meanwhile
            self._server.shutdown_request(conn.sock)
            return
        self._owned.add(conn)
        heapq.heappush(self._deadlines, (conn.deadline, next(self._order), conn))
        # Bytes may already be waiting where select cannot see them: in the TLS layer, or in the buffer
        # (a pipelined request); an idle socket just answers "nothing yet".
        self._advance(conn)

    def _advance(self, conn: Connection) -> None:
        started = conn.phase, conn.deadline
        try:
            if conn.phase is Phase.TLS_FIRST_BYTE:
                self._first_byte(conn)
            if conn.phase is Phase.HANDSHAKE:
                self._handshake(conn)
            if conn.phase in (Phase.HEAD, Phase.IDLE):
                self._read(conn)
        except Exception:
            log.exception("unexpected error on a connection", extra={"remote": _remote(conn)})
            self._close(conn)
            return
        if conn in self._owned and (conn.phase, conn.deadline) != started:
            heapq.heappush(self._deadlines, (conn.deadline, next(self._order), conn))

    def _first_byte(self, conn: Connection) -> None:
        """Plain HTTP sent to the TLS port gets a 400 saying so (as Go exporters answer) instead of a
        failed handshake. The SSLSocket's own recv refuses flags, so the plain socket's reads the
        not-yet-encrypted stream."""
        try:
            first = socket.socket.recv(conn.sock, 1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError as exc:
            log.debug("no TLS handshake", extra={"remote": _remote(conn), "err": str(exc)})
            self._close(conn)
            return
        if not first:
            self._close(conn)
        elif first[0] == TLS_HANDSHAKE_RECORD or not first.isalpha():
            # TLS, or something the handshake will refuse (and log)
            conn.phase, conn.deadline = Phase.HANDSHAKE, time.monotonic() + TLS_HANDSHAKE_TIMEOUT_SECONDS
        else:
            log.debug("plain HTTP request on the TLS port", extra={"remote": _remote(conn)})
            self._hand_to_worker(conn, self._server.refuse_plain_http)

    def _handshake(self, conn: Connection) -> None:
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        except (OSError, ValueError) as exc:
            # Port scanners, plain-HTTP clients, wrong or missing client certificates: not our error.
            log.debug("TLS handshake failed", extra={"remote": _remote(conn), "err": str(exc)})
            self._close(conn)
            return
        state = self._server.web_state()
        if state is not None and not state.client_san_allowed(sock.getpeercert()):
            log.debug("client certificate has no allowed SAN", extra={"remote": _remote(conn)})
            self._close(conn)
            return
        self._want(conn, selectors.EVENT_READ)
        conn.phase, conn.deadline = Phase.HEAD, time.monotonic() + self._server.header_timeout

    def _read(self, conn: Connection) -> None:
        # What is already buffered first: a pipelined request, or bytes the TLS layer decrypted.
        if not self._poll(conn):
            return
        while True:
            try:
                chunk = conn.sock.recv(RECEIVE_BYTES)
            except (BlockingIOError, ssl.SSLWantReadError):
                self._want(conn, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:  # the TLS layer has to write first (a key update)
                self._want(conn, selectors.EVENT_WRITE)
                return
            except OSError as exc:
                log.debug("client went away", extra={"remote": _remote(conn), "err": str(exc)})
                self._close(conn)
                return
            if not chunk:
                conn.eof = True
            elif conn.phase is Phase.IDLE:
                # The next request's deadline starts with its first byte.
                conn.phase, conn.deadline = Phase.HEAD, time.monotonic() + self._server.header_timeout
            conn.http.receive_data(chunk)  # b"" tells h11 the client closed its side
            if not self._poll(conn) or conn.eof:
                return

    def _poll(self, conn: Connection) -> bool:
        """Asks h11 for the next request on `conn`: hands it (or its refusal) to a worker, or closes a
        connection that ended between requests. True while more bytes are needed."""
        refusal = early_refusal(conn.http)
        if refusal is None:
            try:
                event = conn.http.next_event()
            except h11.RemoteProtocolError as exc:
                refusal = refusal_for(exc, conn.http)
        if refusal is not None:
            conn.refusal = refusal
            self._hand_to_worker(conn, self._server.answer)
            return False
        if event is h11.NEED_DATA:
            return True
        if isinstance(event, h11.Request):
            conn.request = event
            # A request without a body ends with its head: take that end now, so the connection is
            # ready for the next request once answered. A body is never read (the answer refuses it).
            with contextlib.suppress(h11.RemoteProtocolError):
                conn.http.next_event()
            self._hand_to_worker(conn, self._server.answer, lane=self._lane_for(event))
            return False
        self._close(conn)  # ConnectionClosed between requests
        return False

    def _lane_for(self, request: h11.Request) -> BoundedPool | None:
        path = request.target.partition(b"?")[0]
        return self.health if path in HEALTH_PATHS and request.method in (b"GET", b"HEAD") else None

    def _want(self, conn: Connection, events: int) -> None:
        if conn.events != events:
            conn.events = events
            self._selector.modify(conn.sock, events, conn)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, _, conn = heapq.heappop(self._deadlines)
            if conn not in self._owned or conn.deadline != deadline:
                continue  # answered, closed or given a later deadline since
            if conn.phase is Phase.IDLE:
                log.debug("idle keep-alive connection closed", extra={"remote": _remote(conn)})
            else:
                waiting = conn.phase.value
                log.debug("request timed out", extra={"remote": _remote(conn), "waiting_for": waiting})
            self._close(conn)

    def _forget(self, conn: Connection) -> None:
        self._owned.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)

    def _close(self, conn: Connection) -> None:
        self._forget(conn)
        self._server.shutdown_request(conn.sock)

    def _hand_to_worker(
        self, conn: Connection, job: Callable[[Connection], None], lane: BoundedPool | None = None
    ) -> None:
        self._forget(conn)
        conn.queued_at = time.monotonic()
        (lane or self.pool).submit(lambda: job(conn))


def _remote(conn: Connection) -> str:
    return str(conn.address[0]) if conn.address else ""
