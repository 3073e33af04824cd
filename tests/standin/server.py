"""A threaded TCP server speaking TDS 7.4, standing in for SQL Server in the tests.

The server only does the protocol and the faults; every decision (accept the login? what does this
batch return?) is delegated to a ``Handler``.  One daemon thread accepts connections and one daemon
thread serves each connection; ``stop()`` closes the listening socket and every client socket and
joins all of them, so a test leaves no thread behind.

What the FreeTDS ODBC driver (1.3.17) and pyodbc (5.x) send by themselves
-------------------------------------------------------------------------
Measured (``TDSDUMP``) with the connection string the tests use (``TDS_Version=7.4``):

* PRELOGIN then LOGIN7, never counted as batches.  FreeTDS itself sends no SQL while logging in:
  no ``SET TEXTSIZE``, no ``SELECT @@spid``, no ``SET`` options.
* Right after login, pyodbc asks the driver for type information (SQLGetTypeInfo), which FreeTDS
  turns into four SQL batches: ``sp_datatype_info_100 12,3``, ``sp_datatype_info_100 -9,3``,
  ``sp_datatype_info_100 -3,3`` and ``sp_datatype_info_100 93,3`` (varchar, nvarchar, varbinary,
  datetime).  pyodbc caches the answers per connection string for the life of the process, so
  only the FIRST connection with a given connection string sends them.  pyodbc reads column 3
  (the maximum size) of the first row and falls back to defaults on an empty answer, so ``[]`` is
  acceptable; ``driver_reply()`` below gives SQL Server's real values.  Beware: the login timeout
  does not cover these four queries and no query timeout is set yet, so a server that stalls on
  them stalls ``pyodbc.connect()`` for as long as it stalls (measured: ``connect(timeout=2)``
  returned after 4 s against a 4 s ``Hang``, with a dead connection).
* ``autocommit=False`` is not a ``SET IMPLICIT_TRANSACTIONS`` batch: FreeTDS sends a
  TRANSACTION MANAGER "begin" request, ``commit()``/``rollback()`` are TM commit/rollback requests
  that also begin the next transaction, and turning autocommit back on is a TM rollback.  These
  are answered here (ENVCHANGE begin/commit/rollback + DONE) and never reach the handler.
* ``cursor.execute(sql)`` without parameters is exactly one SQL_BATCH holding exactly ``sql``
  (SQLExecDirect: no ``sp_prepare``, no ``sp_executesql``).
* ``cursor.execute(sql, *params)`` is an RPC ``sp_prepexec`` (by procedure id), the same SQL again on
  the same cursor ``sp_execute`` by handle, and closing that cursor ``sp_unprepare`` (rpc.py). The
  stand-in answers these three as SQL Server does, handing the statement with its parameters bound
  to ``on_batch``; a handler may refuse a prepare with ``on_prepare(sql, session) -> SqlError | None``.
  ``Session.prepared`` holds the live handles. Any other RPC is error 2812 "Could not find stored
  procedure".
* On a query timeout FreeTDS sends an ATTENTION and waits one more timeout period for its
  acknowledgement (DONE with DONE_ATTN), which the server sends by itself, except while a ``Hang``
  fault is active.

So a handler has to answer the application's own statements and the ``sp_datatype_info_100``
batches (``driver_reply(sql)`` does the latter; call it first and fall through when it returns
``None``).

Round trips and bytes
---------------------
``Session.batches`` counts client requests after login of any kind: SQL batches (the driver's
``sp_datatype_info_100`` ones included), RPCs and transaction-manager requests; not ATTENTIONs,
which cancel a request rather than make one.  It is incremented before ``on_batch`` runs, so the
handler sees 1 for the first batch.
``Session.bytes_in``/``bytes_out`` count every byte read/written on the socket, PRELOGIN and LOGIN7
included.

Faults as FreeTDS 1.3.17 + pyodbc see them (measured on 127.0.0.1)
------------------------------------------------------------------
* ``on_connect`` or ``on_login`` returns ``Hang``: ``pyodbc.connect(timeout=2)`` raises HYT00
  "Timeout expired" after 2.0 s.
* ``on_batch`` returns ``Hang`` with ``cnxn.timeout = 1``: OperationalError HYT00 after 2.0 s
  (1 s until FreeTDS sends ATTENTION, 1 s more waiting for the ack that never comes); FreeTDS then
  closes the socket and the connection is dead (next execute: 08S01 "Communication link failure").
* ``Delay`` shorter than the query timeout: a normal answer, late.  Longer: HYT00 after the
  timeout (1.0 s for 1 s), the server acknowledges the ATTENTION and the connection stays usable.
* ``DropMidResult``: pyodbc.Error "Unexpected EOF from the server (20017)" (SQLSTATE 01000) from
  ``execute()`` or ``fetchall()``, at once.
* ``Garbage``: pyodbc.Error at once ("Unexpected EOF" or 08S01 "Bad token from the server").
* ``Truncated`` (half a packet, then close): pyodbc.Error "Unexpected EOF from the server (20017)"
  (SQLSTATE 01000) from ``execute()``, at once.  With ``stall_seconds``: HYT00 after the query
  timeout plus one more for the ATTENTION nobody acknowledges, as with ``Hang``; the connection is
  dead afterwards.
* A client asking for encryption (``Encryption=require``) fails at once with 08001 unless the server
  was given a TLS context.

TLS (``StandInServer(..., tls=tls_context(cert, key))``)
-------------------------------------------------------
As in TDS 7.x: the PRELOGIN answer agrees to encrypt, the TLS handshake records travel inside PRELOGIN
packets, and from then on TLS records go bare on the socket.  FreeTDS 1.3 sends ENCRYPTION=ON for
``Encryption=require`` (the whole session is encrypted), OFF for ``request`` (only LOGIN7 is; both
sides drop TLS right after it) and NOT_SUP for ``off``.  SQL Server speaks TLS 1.2 at most before
TDS 8; so does ``tls_context()`` (measured: FreeTDS 1.3 over TLS 1.3 sends its Finished outside the
PRELOGIN wrapping and the login times out).  FreeTDS checks the certificate only when a CA file is
configured for the connection (freetds.conf ``ca file``, reached through ``Servername=``); without
one it accepts any certificate.  A failed check is 08001 "Unable to connect to data source" on the
client and ``Session.tls_error`` here.

TDS 8.0 (``StandInServer(..., strict=strict_tls_context(cert, key))``)
----------------------------------------------------------------------
As SQL Server 2022 with strict encryption: TLS (1.2 or 1.3) on the bare socket before any TDS packet,
ALPN ``tds/8.0`` offered (``Session.alpn`` holds what the client agreed), then PRELOGIN, LOGIN7 and
everything else inside TLS.  Microsoft's Driver 18 with ``Encrypt=strict`` logs in (tests/test_strict.py);
a TDS 7.x PRELOGIN on such a port is closed, as is a TLS ClientHello on a TDS 7.x port (both noted in
``Session.tls_error``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import re
import select
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol

from tests.standin import fedauth, rpc, sspi, tds
from tests.standin.tds import (
    Column,
    Delay,
    DropMidResult,
    Garbage,
    Hang,
    LoginInfo,
    Message,
    PacketType,
    Reply,
    ResultSet,
    SqlError,
    Truncated,
)

log = logging.getLogger(__name__)

BatchAnswer = Reply | Hang | Delay | DropMidResult | Garbage | Truncated

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


# ---- answers for what the driver sends on its own ------------------------------------------------

# sp_datatype_info_100 columns as SQL Server names them (FreeTDS renames 3, 11 and 12 for ODBC 3).
_TYPE_INFO_COLUMNS = [
    Column("TYPE_NAME", "nvarchar"),
    Column("DATA_TYPE", "int"),
    Column("PRECISION", "int"),
    Column("LITERAL_PREFIX", "nvarchar"),
    Column("LITERAL_SUFFIX", "nvarchar"),
    Column("CREATE_PARAMS", "nvarchar"),
    Column("NULLABLE", "int"),
    Column("CASE_SENSITIVE", "int"),
    Column("SEARCHABLE", "int"),
    Column("UNSIGNED_ATTRIBUTE", "int"),
    Column("MONEY", "int"),
    Column("AUTO_INCREMENT", "int"),
    Column("LOCAL_TYPE_NAME", "nvarchar"),
    Column("MINIMUM_SCALE", "int"),
    Column("MAXIMUM_SCALE", "int"),
    Column("SQL_DATA_TYPE", "int"),
    Column("SQL_DATETIME_SUB", "int"),
    Column("NUM_PREC_RADIX", "int"),
    Column("INTERVAL_PRECISION", "int"),
    Column("USERTYPE", "int"),
]
# First row SQL Server 2019 returns for each ODBC type code pyodbc asks about.
_TYPE_INFO_ROWS: dict[int, tuple] = {
    12: ("varchar", 12, 8000, "'", "'", "max length", 1, 0, 3, None, 0, None, "varchar",
         None, None, 12, None, None, None, 2),
    -9: ("nvarchar", -9, 4000, "N'", "'", "max length", 1, 0, 3, None, 0, None, "nvarchar",
         None, None, -9, None, None, None, 0),
    -3: ("varbinary", -3, 8000, "0x", None, "max length", 1, 0, 2, None, 0, None, "varbinary",
         None, None, -3, None, None, None, 4),
    93: ("datetime", 93, 23, "'", "'", None, 1, 0, 3, None, 0, None, "datetime",
         3, 3, 9, 3, None, None, 12),
}  # fmt: skip
_TYPE_INFO_CALL = re.compile(r"^\s*(?:exec\s+)?(?:sys\.)?sp_datatype_info(?:_\d+)?\s+(-?\d+)", re.IGNORECASE)


def _handle_result(tag: str, handle: int | None) -> ResultSet:
    return ResultSet([Column("section", "nvarchar"), Column("handle", "int")], [(tag, handle)])


def _with_trailing(answer: BatchAnswer, extra: ResultSet) -> BatchAnswer:
    """`answer` with one more result set at its end (faults keep their shape)."""
    if isinstance(answer, list):
        return [*answer, extra]
    reply = getattr(answer, "reply", None)
    if isinstance(reply, list):
        return dataclasses.replace(answer, reply=[*reply, extra])  # type: ignore[type-var]
    return answer


def driver_reply(sql: str) -> Reply | None:
    """The answer to a batch the driver sends by itself, or ``None`` if ``sql`` is not one."""
    match = _TYPE_INFO_CALL.match(sql)
    if match is None:
        return None
    row = _TYPE_INFO_ROWS.get(int(match.group(1)))
    return [ResultSet(_TYPE_INFO_COLUMNS, [row] if row else [])]


def _type_info_rpc(call: rpc.Rpc) -> Reply | None:
    """The answer to sp_datatype_info[_100] called as an RPC, or None when `call` is not that."""
    name = call.name.replace("[", "").replace("]", "").lower().removeprefix("sys.")
    if not re.fullmatch(r"sp_datatype_info(?:_\d+)?", name) or not call.params:
        return None
    code = call.params[0].value
    return driver_reply(f"sp_datatype_info_100 {code}") if isinstance(code, int) else None


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
        self.tls = "none"  # "none", "login" (LOGIN7 only, Encryption=request), "full" or "strict" (TDS 8)
        self.alpn: str | None = None  # the ALPN protocol a strict (TDS 8.0) client agreed on
        self.tls_error: str | None = None  # why a handshake failed (the client rejected the certificate)
        self.state: dict[str, Any] = {}
        # Prepared statements (rpc.py): live handles and their text, and how many came and went.
        self.prepared: dict[int, str] = {}
        self.next_handle = rpc.FIRST_HANDLE
        self.prepares = 0
        self.unprepares = 0
        # Every request after login by kind, in order ("batch", "attention", "transaction", or the RPC's
        # procedure: "sp_prepexec", ...): what a driver sends by itself is read from here.
        self.requests: list[str] = []
        self.unknown_rpcs: list[str] = []  # procedures answered 2812 "Could not find stored procedure"

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
        # poll() rather than select(): a long test session can push descriptors past FD_SETSIZE.
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        self._tls: ssl.SSLObject | None = None  # set once the handshake is done, while TLS is on
        self._tls_in = ssl.MemoryBIO()
        self._tls_out = ssl.MemoryBIO()
        self._encoder: Callable[[Reply], bytes] = tds.encode_reply  # an RPC's answer while one runs

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
        if self._server.strict is not None:
            self._strict_handshake(self._server.strict)
        message = self._receive()
        if message.type == TLS_HANDSHAKE_RECORD and self._server.strict is None:
            # A TDS 8.0 client's ClientHello on a TDS 7.x port: SQL Server before 2022 reads it as a bad
            # packet and closes the connection; so does the stand-in (the client's problem, not its own).
            self._session.tls_error = "TLS ClientHello (TDS 8.0) on a TDS 7.x port"
            raise _Closed
        if message.type == PacketType.PRELOGIN:
            self._prelogin(message.payload)
            message = self._receive()
        if message.type != PacketType.LOGIN7:
            raise tds.ProtocolError(f"expected LOGIN7, got packet type {message.type:#04x}")
        if self._session.tls == "login":
            self._tls = None  # only LOGIN7 travels encrypted
        login = tds.parse_login7(message.payload)
        self._login(login, fedauth.access_token(message.payload))
        while True:
            self._dispatch(self._receive())

    def _strict_handshake(self, context: ssl.SSLContext) -> None:
        """TDS 8.0: TLS on the bare socket before any TDS packet, with ALPN tds/8.0 (Microsoft's TDS 8.0
        documentation); PRELOGIN and everything after travel inside it."""
        tls = context.wrap_bio(self._tls_in, self._tls_out, server_side=True)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as exc:
                self._session.tls_error = str(exc)
                self._flush_raw_tls()
                raise _Closed from None
            self._flush_raw_tls()
            data = self._recv_socket()
            if not data:
                raise _Closed
            if not self._session.tls_error and data[:1] == bytes([PacketType.PRELOGIN]):
                # A TDS 7.x client: its PRELOGIN is not a TLS record. SQL Server with strict encryption
                # forced closes such a connection; so does the stand-in.
                self._session.tls_error = "TDS 7.x PRELOGIN on a strict (TDS 8.0) port"
                raise _Closed
            self._tls_in.write(data)
        self._flush_raw_tls()
        self._tls = tls
        self._session.tls = "strict"
        self._session.alpn = tls.selected_alpn_protocol()

    def _flush_raw_tls(self) -> None:
        data = self._tls_out.read()
        if data:
            self._session.bytes_out += len(data)
            self._sock.sendall(data)

    def _prelogin(self, payload: bytes) -> None:
        if self._session.tls == "strict":
            # Inside TDS 8.0's TLS the PRELOGIN encryption option means nothing; answer as a server that
            # needs no more encryption than it has.
            self._send(tds.encode_prelogin_response(tds.ENCRYPT_NOT_SUP))
            return
        context = self._server.tls
        wanted = tds.client_encryption(payload)
        if context is None or wanted == tds.ENCRYPT_NOT_SUP:
            self._send(tds.encode_prelogin_response(tds.ENCRYPT_NOT_SUP))
            return
        full = wanted in (tds.ENCRYPT_ON, tds.ENCRYPT_REQ)
        self._send(tds.encode_prelogin_response(tds.ENCRYPT_ON if full else tds.ENCRYPT_OFF))
        self._handshake(context)
        self._session.tls = "full" if full else "login"

    def _handshake(self, context: ssl.SSLContext) -> None:
        """TLS handshake with its records carried in PRELOGIN packets."""
        tls = context.wrap_bio(self._tls_in, self._tls_out, server_side=True)
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass  # the client's next flight is needed
            except ssl.SSLError as exc:
                self._session.tls_error = str(exc)
                self._flush_handshake()  # the alert, if any
                raise _Closed from None
            self._flush_handshake()
            message = self._receive()
            if message.type != PacketType.PRELOGIN:
                raise tds.ProtocolError(f"expected a TLS handshake packet, got {message.type:#04x}")
            self._tls_in.write(message.payload)
        self._flush_handshake()
        self._tls = tls

    def _flush_handshake(self) -> None:
        data = self._tls_out.read()
        if data:
            self._send_raw(tds.encode_packets(PacketType.PRELOGIN, data, 0))

    def _login(self, login: LoginInfo, token: str | None = None) -> None:
        self._session.login = login
        if token is not None:
            self._token_login(login, token)
            return
        sspi_answer = b""
        if login.sspi:
            refusal, sspi_answer = self._integrated_login(login)
            if refusal is not None:
                self._send(tds.encode_login_failure(refusal))
                raise _Closed
        verdict = self._handler.on_login(login)
        if isinstance(verdict, Hang):
            self._hang(verdict.seconds)
        if isinstance(verdict, SqlError):
            # SQL Server closes the connection after a failed login; so do we.
            self._send(tds.encode_login_failure(verdict))
            raise _Closed
        # Kerberos's AP-REP (mutual authentication) travels in a message of its own, before the login
        # answer: Microsoft's Driver 18 reads the SSPI token as the end of the server's turn and
        # never saw a login answer sent in the same message (its login timed out; FreeTDS takes both).
        if sspi_answer:
            self._send(tds.encode_sspi(sspi_answer))
        self._send(tds.encode_login_ack(login))
        self._session.logged_in = True

    def _token_login(self, login: LoginInfo, token: str) -> None:
        """An Entra ID access token (fedauth.py): checked, then acknowledged with FEATUREEXTACK before the
        login's final DONE, as MS-TDS orders a login answer with feature extensions."""
        entra = self._server.entra
        if entra is None:
            refusal, user = fedauth.refused(), fedauth.TOKEN_PRINCIPAL
        else:
            refusal, user = entra.verdict(token)
        login.user = user
        if refusal is not None:
            self._send(tds.encode_login_failure(refusal))
            raise _Closed
        login.integrated = True
        answer = tds.encode_login_ack(login)
        done = len(tds.encode_done(tds.DoneStatus.FINAL))
        self._send(answer[:-done] + fedauth.encode_feature_ack() + answer[-done:])
        self._session.logged_in = True

    def _integrated_login(self, login: LoginInfo) -> tuple[SqlError | None, bytes]:
        """The SSPI exchange of a Windows login (sspi.py): (refusal or None, last token to send)."""
        windows = self._server.windows
        if windows is None:
            return sspi.UNTRUSTED_DOMAIN, b""
        mechanism = "ntlm" if login.sspi.startswith(sspi.NTLM_SIGNATURE) else "kerberos"
        try:
            exchange = windows.start(login.sspi)
            answer = exchange.step(login.sspi)
            while not exchange.complete:
                self._send(tds.encode_sspi(answer))  # NTLM's CHALLENGE, alone in its message
                message = self._receive()
                if message.type != PacketType.SSPI:
                    raise tds.ProtocolError(f"expected an SSPI packet, got type {message.type:#04x}")
                answer = exchange.step(message.payload)
        except sspi.SspiRefused as exc:
            return windows.verdict(mechanism, None, str(exc)), b""
        login.user = exchange.user or ""
        login.integrated = True
        return windows.verdict(mechanism, exchange.user), answer

    # ---- requests --------------------------------------------------------------------------------

    def _dispatch(self, message: Message) -> None:
        requests = self._session.requests
        if message.type == PacketType.ATTENTION:
            requests.append("attention")
            # Nothing is running (we answer synchronously), yet the client waits for the ack.
            self._send(tds.encode_attention_ack())
            return
        self._session.batches += 1
        version = self._session.login.tds_version
        if message.type == PacketType.SQL_BATCH:
            requests.append("batch")
            self._answer_batch(tds.decode_sql_batch(message.payload, version))
        elif message.type == PacketType.RPC:
            call = rpc.decode_rpc(message.payload, version)
            requests.append(call.name or tds._RPC_PROC_IDS.get(call.proc_id or 0, f"#{call.proc_id}"))
            self._answer_rpc(call)
        elif message.type == PacketType.TRANSACTION_MANAGER:
            requests.append("transaction")
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

    def _answer_batch(self, sql: str) -> None:
        """A batch; the exporter's T-SQL sp_prepexec / sp_execute batches (rpc.py) keep a handle in
        the session as SQL Server does, and the handler answers the prepared text itself."""
        session = self._session
        handle = rpc.parse_execute_batch(sql)
        if handle is not None:
            statement = session.prepared.get(handle)
            if statement is None:
                self._answer([SqlError(8179, f"Could not find prepared statement with handle {handle}.")])
            else:
                self._answer(self._ask_handler(statement))
            return
        call = rpc.parse_prepare_batch(sql)
        if call is None:
            self._answer(self._ask_handler(sql))
            return
        for gone in call.unprepare:
            if session.prepared.pop(gone, None) is None:
                self._answer([SqlError(8179, f"Could not find prepared statement with handle {gone}.")])
                return
            session.unprepares += 1
        refuse = getattr(self._handler, "on_prepare", None)
        refusal = refuse(call.statement, session) if refuse is not None else None
        if refusal is not None:
            error_columns = ["section", "error_number", "error_message"]
            refused = ResultSet(
                [Column(name, "int" if name == "error_number" else "nvarchar") for name in error_columns],
                [(call.refused_tag, refusal.number, refusal.message)],
            )
            self._answer([refused, _handle_result(call.handle_tag, None)])
            return
        new = session.next_handle
        session.next_handle += 1
        session.prepared[new] = call.statement
        session.prepares += 1
        handle_rs = _handle_result(call.handle_tag, new)
        self._answer(_with_trailing(self._ask_handler(call.statement), handle_rs))

    def _answer_rpc(self, call: rpc.Rpc) -> None:
        """Prepared statements (rpc.py) as SQL Server runs them; any other RPC is error 2812. The
        statement text reaches the handler with its parameters bound, so a plain batch and a prepared
        one are answered (and checked) alike."""
        session = self._session
        values = [p.value for p in call.params]
        if call.proc_id == rpc.SP_PREPEXEC and len(values) >= 3:
            refuse = getattr(self._handler, "on_prepare", None)
            statement = str(values[2])
            refusal = refuse(statement, session) if refuse is not None else None
            if refusal is not None:
                self._send(rpc.encode_rpc_reply([refusal], status=refusal.number))
                return
            handle = session.next_handle
            session.next_handle += 1
            session.prepared[handle] = statement
            session.prepares += 1
            self._run_prepared(statement, values[3:], handle)
        elif call.proc_id == rpc.SP_EXECUTE and values:
            statement = session.prepared.get(values[0])  # type: ignore[arg-type]
            if statement is None:
                error = SqlError(8179, f"Could not find prepared statement with handle {values[0]}.")
                self._send(rpc.encode_rpc_reply([error], status=8179))
                return
            self._run_prepared(statement, values[1:], None)
        elif (type_info := _type_info_rpc(call)) is not None:
            # Microsoft's Driver 18 asks for type information as an RPC by name ([sys].sp_datatype_info_100
            # with the type code), where FreeTDS sends a batch; SQL Server answers both alike.
            self._send(rpc.encode_rpc_reply(type_info))
        elif call.proc_id == rpc.SP_UNPREPARE and values:
            session.prepared.pop(values[0], None)  # type: ignore[arg-type]
            session.unprepares += 1
            self._send(rpc.encode_rpc_reply([]))
        else:
            name = call.name or tds._RPC_PROC_IDS.get(call.proc_id or 0, f"#{call.proc_id}")
            session.unknown_rpcs.append(name)
            self._send(tds.encode_rpc_error(tds.rpc_not_found_error(name)))

    def _run_prepared(self, statement: str, values: list[object], handle: int | None) -> None:
        self._encoder = functools.partial(rpc.encode_rpc_reply, handle=handle)
        try:
            self._answer(self._ask_handler(rpc.bind(statement, values)))
        finally:
            self._encoder = tds.encode_reply

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
        elif isinstance(answer, Truncated):
            packets = tds.encode_packets(
                tds.PacketType.TABULAR_RESULT, self._encode(answer.reply), self._session.spid
            )
            self._send_raw(answer.cut(packets))
            if answer.stall_seconds > 0:
                self._hang(answer.stall_seconds)
            raise _Closed
        else:
            self._send(self._encode(answer))

    def _encode(self, reply: Reply) -> bytes:
        try:
            return self._encoder(reply)
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
                self._session.requests.append("attention")
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
        """True when recv() will not block: data, end of stream or a socket shut down by stop()."""
        if self._tls is not None and (self._tls.pending() or self._tls_in.pending):
            return True
        timeout_ms = None if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
        return bool(self._poller.poll(timeout_ms))

    def _recv_raw(self) -> bytes:
        """Plain TDS bytes from the client (decrypted while TLS is on); b"" at end of stream."""
        while self._tls is not None:
            try:
                return self._tls.read(_RECV_SIZE)
            except ssl.SSLWantReadError:
                data = self._recv_socket()
                if not data:
                    return b""
                self._tls_in.write(data)
            except ssl.SSLError:
                return b""  # a broken or closed TLS stream ends the conversation like EOF
        return self._recv_socket()

    def _recv_socket(self) -> bytes:
        data = self._sock.recv(_RECV_SIZE)
        self._session.bytes_in += len(data)
        return data

    def _send(self, payload: bytes, *, eom: bool = True) -> None:
        packets = tds.encode_packets(PacketType.TABULAR_RESULT, payload, self._session.spid, eom=eom)
        self._send_raw(packets)

    def _send_raw(self, data: bytes) -> None:
        if self._tls is not None:
            self._tls.write(data)
            data = self._tls_out.read()
        # Counted first: once sendall() returns the client may already be checking the counter.
        self._session.bytes_out += len(data)
        self._sock.sendall(data)


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server-side TLS context as SQL Server offers before TDS 8: TLS 1.2."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


TDS8_ALPN = "tds/8.0"
TLS_HANDSHAKE_RECORD = 0x16  # the first byte of a TLS handshake record (a ClientHello)


def strict_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server-side context for TDS 8.0 (strict): TLS 1.2 or 1.3, offering ALPN tds/8.0."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols([TDS8_ALPN])
    context.load_cert_chain(cert_file, key_file)
    return context


class StandInServer:
    """Listens on ``host:port`` (port 0 picks a free one; ``start()`` returns the real port)."""

    def __init__(
        self,
        handler: Handler,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: ssl.SSLContext | None = None,
        windows: sspi.WindowsLogins | None = None,
        strict: ssl.SSLContext | None = None,
        entra: fedauth.EntraLogins | None = None,
    ) -> None:
        self.handler = handler
        self.windows = windows  # integrated logins (Kerberos, NTLM); None refuses them with 18452
        self.tls = tls  # offer TLS (see tls_context()); None answers every client ENCRYPT_NOT_SUP
        # TDS 8.0 only (strict_tls_context()): TLS first on every connection, nothing else spoken.
        self.strict = strict
        self.entra = entra  # Entra ID access tokens (fedauth.py); None refuses them with 18456
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
        try:
            listener.bind((self.host, self.port))
            listener.listen(64)
        except OSError:
            listener.close()  # a port in use must not leak the socket into the caller's error path
            raise
        self._listener = listener
        self.port = listener.getsockname()[1]
        # accept() cannot be interrupted portably; a socket pair lets stop() wake the selector.
        self._wake_r, self._wake_w = socket.socketpair()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"standin-{self.port}-accept", daemon=True
        )
        self._accept_thread.start()
        # A handler playing an instance lets the instance's restart drop this server's sessions.
        droppers = getattr(getattr(self.handler, "instance", None), "session_droppers", None)
        if isinstance(droppers, list):
            droppers.append(self.drop_sessions)
        return self.port

    def forget_prepared(self) -> None:
        """Forget every session's prepared handles and keep the sessions, as SQL Server may (issue 36):
        the next sp_execute of a handle answers error 8179 on a connection that is still good."""
        with self._lock:
            sessions = list(self.sessions)
        for session in sessions:
            session.prepared.clear()

    def drop_sessions(self) -> None:
        """Close every client connection at once and keep listening, as a restarting SQL Server does:
        the clients only find out when they next use their socket."""
        with self._lock:
            clients = list(self._clients)
            threads = list(self._threads)
        self._shut_down(clients, threads)

    def stop(self) -> None:
        """Close the listener and every client socket, and wait for all server threads to end."""
        if self._accept_thread is None or self._stopping.is_set():
            return
        self._stopping.set()
        assert self._wake_w is not None
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._accept_thread.join(JOIN_TIMEOUT)
        droppers = getattr(getattr(self.handler, "instance", None), "session_droppers", None)
        if isinstance(droppers, list) and self.drop_sessions in droppers:
            droppers.remove(self.drop_sessions)
        with self._lock:
            clients = list(self._clients)
            threads = list(self._threads)
        self._shut_down(clients, threads)
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()

    def _shut_down(self, clients: list[socket.socket], threads: list[threading.Thread]) -> None:
        for sock in clients:
            # shutdown() wakes a thread blocked in poll()/recv() on it; close() alone would not.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                # Only a handler that blocks by itself (not through Hang/Delay) can cause this.
                log.warning("stand-in thread %s still running after stop()", thread.name)

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
        poller = select.poll()
        poller.register(self._listener, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        wake_fd = self._wake_r.fileno()
        try:
            while not self._stopping.is_set():
                if any(fd == wake_fd for fd, _event in poller.poll()):
                    break
                try:
                    sock, _addr = self._listener.accept()
                except OSError:
                    continue  # the client gave up between poll() and accept()
                self._serve(sock)
        finally:
            self._listener.close()

    def _serve(self, sock: socket.socket) -> None:
        # Responses go out in one sendall; Nagle would only delay the last partial segment.
        with contextlib.suppress(OSError):  # a client already gone must not kill the acceptor
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            session = Session(self._next_spid)
            self._next_spid += 1
            self.sessions.append(session)
            self._clients.add(sock)
            # Forget finished threads so a long concurrency test does not keep thousands around.
            self._threads = [t for t in self._threads if t.is_alive()]
            thread = threading.Thread(
                target=_Connection(sock, session, self).run,
                name=f"standin-{self.port}-conn-{session.spid}",
                daemon=True,
            )
            self._threads.append(thread)
        thread.start()

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._clients.discard(sock)
