"""A threaded TCP server speaking TDS 7.4, standing in for SQL Server in the tests.

The server only does the protocol and the faults; every decision (accept the login? what does this
batch return?) is delegated to a ``Handler``.  One daemon thread accepts connections and one daemon
thread serves each connection; ``stop()`` closes the listening socket and every client socket and
joins all of them, so a test leaves no thread behind.

What the FreeTDS ODBC driver (1.3.17) and pyodbc send by themselves
------------------------------------------------------------------
Measured with ``DRIVER={FreeTDS};...;TDS_Version=7.4`` and ``pyodbc.connect(..., autocommit=True)``:

* PRELOGIN then LOGIN7 (never counted as batches).  FreeTDS sends no SQL of its own while
  connecting: with ``autocommit=True`` the first batch ``on_batch`` sees is the application's.
* With ``autocommit=False`` pyodbc/FreeTDS first sends the batch ``SET IMPLICIT_TRANSACTIONS ON``;
  ``commit()``/``rollback()`` then arrive as TRANSACTION MANAGER requests (answered here, they do not
  reach the handler) and switching autocommit back on sends ``SET IMPLICIT_TRANSACTIONS OFF``.
* ``cursor.execute(sql)`` without parameters is one SQL_BATCH holding exactly ``sql``: no
  ``sp_prepare``, no ``SET TEXTSIZE``, no ``SELECT @@spid``, no type-info query.
* ``cursor.execute(sql, params)`` is an RPC (``sp_executesql`` or similar); the stand-in answers
  every RPC with error 2812 "Could not find stored procedure" without asking the handler.
* On a query timeout FreeTDS sends an ATTENTION and waits for its acknowledgement (DONE with the
  DONE_ATTN bit), which the server sends by itself, except while a ``Hang`` fault is active.

So a handler must answer ``SET ...`` statements (``[]`` is right: just a DONE) when the client runs
without autocommit, and otherwise only the statements the code under test sends.

Round trips and bytes
---------------------
``Session.batches`` counts client requests after login of any kind: SQL batches, RPCs and
transaction-manager requests (not ATTENTIONs, which cancel a request rather than make one).  It is
incremented before ``on_batch`` runs, so the handler sees 1 for the first batch.
``Session.bytes_in``/``bytes_out`` count every byte read/written on the socket, PRELOGIN and LOGIN7
included.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
import time
from collections import deque
from types import TracebackType
from typing import Any, Protocol

from tests.standin import tds
from tests.standin.tds import (
    Delay,
    DropMidResult,
    Garbage,
    Hang,
    LoginInfo,
    Message,
    PacketType,
    Reply,
    SqlError,
)

log = logging.getLogger(__name__)

BatchAnswer = Reply | Hang | Delay | DropMidResult | Garbage

FIRST_SPID = 51  # SQL Server hands out user session ids from 51 on
JOIN_TIMEOUT = 5.0
_RECV_SIZE = 65536


class Handler(Protocol):
    def on_connect(self) -> Hang | None:
        """``Hang`` accepts the TCP connection but never answers PRELOGIN/LOGIN7."""
        ...

    def on_login(self, login: LoginInfo) -> SqlError | Hang | None:
        """``None`` accepts the login; a ``SqlError`` rejects it (see ``tds.login_failed_error``)."""
        ...

    def on_batch(self, sql: str, session: Session) -> BatchAnswer: ...


_NOT_LOGGED_IN = LoginInfo(user="", password="", database="", app_name="", hostname="", tds_version=0)


class Session:
    """One client connection.  ``login`` holds an all-empty ``LoginInfo`` until LOGIN7 arrives (it
    is always the real one inside ``on_batch``).  Handlers may keep their own state in ``state``."""

    def __init__(self, spid: int) -> None:
        self.spid = spid
        self.login: LoginInfo = _NOT_LOGGED_IN
        self.logged_in = False
        self.batches = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.closed = False
        self.state: dict[str, Any] = {}

    def __repr__(self) -> str:
        return (
            f"Session(spid={self.spid}, user={self.login.user!r}, batches={self.batches}, "
            f"bytes_in={self.bytes_in}, bytes_out={self.bytes_out}, closed={self.closed})"
        )


class _Closed(Exception):
    """The conversation is over: the peer went away, the server stops, or a fault ended it."""


class _Connection:
    """Serves one client socket from its own thread."""

    def __init__(self, sock: socket.socket, session: Session, server: StandInServer) -> None:
        self._sock = sock
        self._session = session
        self._server = server
        self._handler = server.handler
        self._assembler = tds.MessageAssembler()
        self._pending: deque[Message] = deque()
        self._next_transaction = 1

    # ---- lifecycle -------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._converse()
        except (_Closed, OSError):
            pass
        except Exception as exc:
            # A bug in the handler or the stand-in: keep it for the test to assert on.
            log.exception("stand-in connection spid=%s failed", self._session.spid)
            self._server.errors.append(exc)
        finally:
            self._session.closed = True
            self._server._forget(self._sock)
            with contextlib.suppress(OSError):
                self._sock.close()

    def _converse(self) -> None:
        fault = self._handler.on_connect()
        if isinstance(fault, Hang):
            self._hang(fault.seconds)
        message = self._receive()
        if message.type == PacketType.PRELOGIN:
            self._send(tds.encode_prelogin_response())
            message = self._receive()
        if message.type != PacketType.LOGIN7:
            raise tds.ProtocolError(f"expected LOGIN7, got packet type {message.type:#04x}")
        self._login(tds.parse_login7(message.payload))
        while True:
            self._dispatch(self._receive())

    def _login(self, login: LoginInfo) -> None:
        self._session.login = login
        verdict = self._handler.on_login(login)
        if isinstance(verdict, Hang):
            self._hang(verdict.seconds)
        if isinstance(verdict, SqlError):
            # SQL Server closes the connection after a failed login; so do we.
            self._send(tds.encode_login_failure(verdict))
            raise _Closed
        self._send(tds.encode_login_ack(login))
        self._session.logged_in = True

    # ---- requests --------------------------------------------------------------------------------

    def _dispatch(self, message: Message) -> None:
        if message.type == PacketType.ATTENTION:
            # Nothing is running (we answer synchronously), yet the client waits for the ack.
            self._send(tds.encode_attention_ack())
            return
        self._session.batches += 1
        version = self._session.login.tds_version
        if message.type == PacketType.SQL_BATCH:
            self._answer(self._ask_handler(tds.decode_sql_batch(message.payload, version)))
        elif message.type == PacketType.RPC:
            name = tds.decode_rpc_name(message.payload, version)
            self._send(tds.encode_rpc_error(tds.rpc_not_found_error(name)))
        elif message.type == PacketType.TRANSACTION_MANAGER:
            self._answer_transaction(message.payload, version)
        else:
            raise tds.ProtocolError(f"unsupported packet type {message.type:#04x}")

    def _ask_handler(self, sql: str) -> BatchAnswer:
        try:
            return self._handler.on_batch(sql, self._session)
        except Exception as exc:
            # Surface handler bugs to the client as an error instead of a silent disconnect.
            log.exception("stand-in handler failed on %r", sql)
            self._server.errors.append(exc)
            return [SqlError(50000, f"stand-in handler raised {type(exc).__name__}: {exc}")]

    def _answer_transaction(self, payload: bytes, version: int) -> None:
        request, begin_after = tds.decode_transaction_request(payload, version)
        descriptor = self._next_transaction.to_bytes(8, "little")
        if request == tds.TransactionRequest.BEGIN or begin_after:
            self._next_transaction += 1
        self._send(tds.encode_transaction_response(request, begin_after, descriptor))

    def _answer(self, answer: BatchAnswer) -> None:
        if isinstance(answer, Hang):
            self._hang(answer.seconds)
        elif isinstance(answer, Delay):
            self._delay(answer)
        elif isinstance(answer, DropMidResult):
            self._send(tds.encode_partial_result(answer.reply, answer.rows), eom=False)
            raise _Closed
        elif isinstance(answer, Garbage):
            self._send_raw(answer.data)
            raise _Closed
        else:
            self._send(self._encode(answer))

    def _encode(self, reply: Reply) -> bytes:
        try:
            return tds.encode_reply(reply)
        except (TypeError, ValueError) as exc:
            self._server.errors.append(exc)
            return tds.encode_reply([SqlError(50000, f"stand-in cannot encode the reply: {exc}")])

    # ---- faults ----------------------------------------------------------------------------------

    def _hang(self, seconds: float) -> None:
        """Swallow everything until the deadline, then hang up."""
        deadline = time.monotonic() + seconds
        while self._wait_readable(deadline):
            if not self._recv_raw():
                break
        raise _Closed

    def _delay(self, delay: Delay) -> None:
        deadline = time.monotonic() + delay.seconds
        while True:
            message = self._receive_until(deadline)
            if message is None:
                self._send(self._encode(delay.reply))
                return
            if message.type == PacketType.ATTENTION:
                self._send(tds.encode_attention_ack())
                return
            # A well-behaved client does not send a new request before the answer; keep it anyway.
            self._pending.append(message)

    # ---- I/O -------------------------------------------------------------------------------------

    def _receive(self) -> Message:
        message = self._receive_until(None)
        assert message is not None  # without a deadline it returns a message or raises
        return message

    def _receive_until(self, deadline: float | None) -> Message | None:
        """Next client message, or ``None`` once the deadline passes."""
        while not self._pending:
            if not self._wait_readable(deadline):
                return None
            data = self._recv_raw()
            if not data:
                raise _Closed
            self._pending.extend(self._assembler.feed(data))
        return self._pending.popleft()

    def _wait_readable(self, deadline: float | None) -> bool:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([self._sock], [], [], timeout)
        return bool(readable)

    def _recv_raw(self) -> bytes:
        data = self._sock.recv(_RECV_SIZE)
        self._session.bytes_in += len(data)
        return data

    def _send(self, payload: bytes, *, eom: bool = True) -> None:
        packets = tds.encode_packets(PacketType.TABULAR_RESULT, payload, self._session.spid, eom=eom)
        self._send_raw(packets)

    def _send_raw(self, data: bytes) -> None:
        self._sock.sendall(data)
        self._session.bytes_out += len(data)


class StandInServer:
    """Listens on ``host:port`` (port 0 picks a free one; ``start()`` returns the real port)."""

    def __init__(self, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.host = host
        self.port = port
        self.sessions: list[Session] = []
        # Exceptions raised by the handler or by the encoder; tests can assert this stays empty.
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._clients: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._next_spid = FIRST_SPID

    # ---- public ----------------------------------------------------------------------------------

    def start(self) -> int:
        if self._accept_thread is not None:
            raise RuntimeError("stand-in server already started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Tests restart servers quickly; TIME_WAIT from a previous run must not block the bind.
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        self._listener = listener
        self.port = listener.getsockname()[1]
        # accept() cannot be interrupted portably; a socket pair lets stop() wake the selector.
        self._wake_r, self._wake_w = socket.socketpair()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"standin-accept-{self.port}", daemon=True
        )
        self._accept_thread.start()
        return self.port

    def stop(self) -> None:
        """Close the listener and every client socket, and wait for all server threads to end."""
        if self._accept_thread is None or self._stopping.is_set():
            return
        self._stopping.set()
        assert self._wake_w is not None
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._accept_thread.join(JOIN_TIMEOUT)
        with self._lock:
            clients = list(self._clients)
            threads = list(self._threads)
        for sock in clients:
            # shutdown() wakes a thread blocked in select()/recv() on it; close() alone would not.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(JOIN_TIMEOUT)
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def threads(self) -> list[threading.Thread]:
        """Server threads still alive (empty after ``stop()``)."""
        with self._lock:
            candidates = [*self._threads, self._accept_thread]
        return [t for t in candidates if t is not None and t.is_alive()]

    def __enter__(self) -> StandInServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # ---- internals -------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None and self._wake_r is not None
        try:
            while not self._stopping.is_set():
                readable, _, _ = select.select([self._listener, self._wake_r], [], [])
                if self._wake_r in readable:
                    break
                try:
                    sock, _addr = self._listener.accept()
                except OSError:
                    continue
                self._serve(sock)
        finally:
            self._listener.close()

    def _serve(self, sock: socket.socket) -> None:
        # Responses go out in one sendall; Nagle would only delay the last partial segment.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            session = Session(self._next_spid)
            self._next_spid += 1
            self.sessions.append(session)
            self._clients.add(sock)
            # Forget finished threads so a long concurrency test does not keep thousands around.
            self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(
                target=_Connection(sock, session, self).run, name=f"standin-conn-{session.spid}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._clients.discard(sock)
