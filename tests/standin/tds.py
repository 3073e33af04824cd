"""TDS 7.4 wire protocol for the SQL Server stand-in used by the tests.

This module is pure: it turns bytes into requests and answers into bytes and never touches a
socket (``server.py`` does the I/O).  It covers what the FreeTDS ODBC driver (Debian's ``tdsodbc``
1.3.17, used through pyodbc) needs to log in, run plain SQL batches and read their results:

* packet framing: 8-byte header (type, status, big-endian length, spid, packet id, window), at most
  ``PACKET_SIZE`` bytes per packet, the last packet of a message carries the EOM status bit;
* PRELOGIN: ``ENCRYPT_NOT_SUP`` unless the server was given a TLS context (``server.py`` then does
  the TLS handshake inside PRELOGIN packets, as TDS 7.x does); a client that insists on TLS against a
  server without one gives up by itself;
* LOGIN7: user, password (de-obfuscated), database, application, host name, TDS version;
* the login answer (ENVCHANGE database/language/collation/packet size, INFO, LOGINACK, DONE) or a
  login failure (ERROR 18456 + DONE with the error bit);
* SQL_BATCH text (ALL_HEADERS skipped), RPC procedure names, transaction-manager requests;
* result token streams: COLMETADATA, ROW, ERROR/INFO and DONE with DONE_MORE / DONE_COUNT /
  DONE_ERROR set the way SQL Server sets them, so several result sets and errors can share one batch.

Column types are the nullable ones SQL Server itself uses in result sets: ``nvarchar`` (NVARCHARTYPE,
up to 4000 characters), ``bigint``/``int`` (INTNTYPE), ``float`` (FLTNTYPE), ``datetime``
(DATETIMNTYPE) and ``bit`` (BITNTYPE).  Values are checked strictly (an ``int`` for an ``nvarchar``
column is a bug in the handler and raises ``TypeError``/``ValueError`` instead of being coerced).

A ``SqlError`` with severity 10 or less is sent as an INFO token (a message, not an error), exactly
like SQL Server does for ``PRINT`` or ``RAISERROR(..., 10, ...)``; from severity 11 on it is an
ERROR token followed by a DONE with DONE_ERROR.  Severity is not acted upon otherwise: a severity-20
error does not close the connection.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

# --------------------------------------------------------------------------------------------------
# Public data model (handlers build these; the names are part of the stand-in's interface)
# --------------------------------------------------------------------------------------------------

COLUMN_TYPES = ("nvarchar", "bigint", "int", "float", "datetime", "bit")
NVARCHAR_MAX_CHARS = 4000


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # "nvarchar" | "bigint" | "int" | "float" | "datetime" | "bit"

    def __post_init__(self) -> None:
        # Fail where the handler builds the column, not deep inside the encoder.
        if self.type not in COLUMN_TYPES:
            raise ValueError(f"unsupported column type {self.type!r}; use one of {COLUMN_TYPES}")


@dataclass
class ResultSet:
    columns: list[Column]
    rows: list[tuple] = field(default_factory=list)  # python values, None for NULL


@dataclass
class SqlError:
    number: int
    message: str
    severity: int = 16
    state: int = 1
    line: int = 1


Reply = list[ResultSet | SqlError]


@dataclass
class Hang:
    """Never answer: read and ignore everything (ATTENTION included) until the server stops or
    ``seconds`` pass, then close the socket."""

    seconds: float = 3600.0


@dataclass
class Delay:
    """Answer ``reply`` after ``seconds``; an ATTENTION arriving meanwhile cancels it and is
    acknowledged instead, as SQL Server does when a client gives up on a slow query."""

    seconds: float
    reply: Reply


@dataclass
class DropMidResult:
    """Send COLMETADATA and the first ``rows`` rows of the first result set, without DONE and
    without the end-of-message bit, then close the socket."""

    reply: Reply
    rows: int = 1


@dataclass
class Truncated:
    """Send the real answer's packets cut short: only the first ``keep`` bytes (by default half of the
    first packet, so its header promises bytes that never come), then close the socket, or with
    ``stall_seconds`` keep it open and silent that long (ATTENTION unanswered) before closing."""

    reply: Reply
    keep: int | None = None
    stall_seconds: float = 0.0

    def cut(self, packets: bytes) -> bytes:
        if self.keep is not None:
            return packets[: self.keep]
        first_packet = HEADER.unpack_from(packets)[2]
        return packets[: HEADER.size + (first_packet - HEADER.size) // 2]


@dataclass
class Garbage:
    """Send ``data`` verbatim (no framing added) as the response, then close the socket."""

    data: bytes


@dataclass
class LoginInfo:
    user: str
    password: str
    database: str
    app_name: str
    hostname: str
    tds_version: int  # as the client sent it, e.g. 0x74000004 for TDS 7.4
    # The first SSPI token of an integrated (Windows) login: Kerberos or NTLM, empty for a SQL login.
    sspi: bytes = b""
    # Set by the server once the SSPI exchange authenticated `user` (a Windows login: no password).
    integrated: bool = False


# --------------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------------

PACKET_SIZE = 4096
HEADER = struct.Struct(">BBHHBB")
STATUS_EOM = 0x01

TDS74 = 0x74000004
# The first TDS version whose requests start with ALL_HEADERS.
TDS72 = 0x72090002

SERVER_NAME = "STANDIN"
PRODUCT_NAME = "Microsoft SQL Server"
PRODUCT_VERSION = (15, 0, 2000)  # SQL Server 2019 RTM: the driver only looks at the major version

# SQL_Latin1_General_CP1_CI_AS: LCID 0x0409, flags 0xD0 (ignore case/kana/width), sort id 52.
COLLATION = bytes([0x09, 0x04, 0xD0, 0x00, 0x34])


class PacketType(IntEnum):
    SQL_BATCH = 0x01
    RPC = 0x03
    TABULAR_RESULT = 0x04
    ATTENTION = 0x06
    TRANSACTION_MANAGER = 0x0E
    LOGIN7 = 0x10
    SSPI = 0x11  # a client's further SSPI token of an integrated login (NTLM's AUTHENTICATE message)
    PRELOGIN = 0x12


class Token(IntEnum):
    COLMETADATA = 0x81
    ERROR = 0xAA
    INFO = 0xAB
    LOGINACK = 0xAD
    ROW = 0xD1
    ENVCHANGE = 0xE3
    SSPI = 0xED
    DONE = 0xFD
    DONEPROC = 0xFE
    DONEINPROC = 0xFF
    RETURNSTATUS = 0x79
    RETURNVALUE = 0xAC


class DoneStatus:
    FINAL = 0x0000
    MORE = 0x0001
    ERROR = 0x0002
    COUNT = 0x0010
    ATTN = 0x0020


CURCMD_SELECT = 0xC1


class EnvChange(IntEnum):
    DATABASE = 1
    LANGUAGE = 2
    PACKET_SIZE = 4
    SQL_COLLATION = 7
    BEGIN_TRAN = 8
    COMMIT_TRAN = 9
    ROLLBACK_TRAN = 10


class TransactionRequest(IntEnum):
    BEGIN = 5
    COMMIT = 7
    ROLLBACK = 8
    SAVE = 9


class PreloginOption(IntEnum):
    VERSION = 0x00
    ENCRYPTION = 0x01
    INSTOPT = 0x02
    THREADID = 0x03
    MARS = 0x04
    TERMINATOR = 0xFF


ENCRYPT_OFF = 0x00  # from a client: "encrypt the login only"; from a server: "agreed, login only"
ENCRYPT_ON = 0x01
ENCRYPT_NOT_SUP = 0x02
ENCRYPT_REQ = 0x03

# Procedure ids a client may send instead of a name in an RPC (MS-TDS 2.2.6.6).
_RPC_PROC_IDS = {
    1: "sp_cursor",
    2: "sp_cursoropen",
    3: "sp_cursorprepare",
    4: "sp_cursorexecute",
    5: "sp_cursorprepexec",
    6: "sp_cursorunprepare",
    7: "sp_cursorfetch",
    8: "sp_cursoroption",
    9: "sp_cursorclose",
    10: "sp_executesql",
    11: "sp_prepare",
    12: "sp_execute",
    13: "sp_prepexec",
    14: "sp_prepexecrpc",
    15: "sp_unprepare",
}


class ProtocolError(Exception):
    """The client sent something this stand-in cannot make sense of."""


# --------------------------------------------------------------------------------------------------
# Packet framing
# --------------------------------------------------------------------------------------------------


@dataclass
class Message:
    type: int
    payload: bytes


class MessageAssembler:
    """Turns a byte stream into complete client messages.

    TCP gives no packet boundaries and a client message may span several TDS packets, so bytes
    are buffered until a packet whose status has the EOM bit completes a message.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._parts: list[bytes] = []
        self._type: int | None = None

    def feed(self, data: bytes) -> list[Message]:
        self._buffer += data
        messages: list[Message] = []
        while len(self._buffer) >= HEADER.size:
            ptype, status, length, _spid, _packet_id, _window = HEADER.unpack_from(self._buffer)
            if length < HEADER.size:
                raise ProtocolError(f"packet length {length} shorter than its header")
            if len(self._buffer) < length:
                break
            body = bytes(self._buffer[HEADER.size : length])
            del self._buffer[:length]
            message = self._add_packet(ptype, status, body)
            if message is not None:
                messages.append(message)
        return messages

    def _add_packet(self, ptype: int, status: int, body: bytes) -> Message | None:
        # An ATTENTION may arrive while nothing else is pending; it is always a single packet.
        if self._type is None:
            self._type = ptype
        self._parts.append(body)
        if not status & STATUS_EOM:
            return None
        message = Message(self._type, b"".join(self._parts))
        self._type, self._parts = None, []
        return message


def encode_packets(
    ptype: int, payload: bytes, spid: int, *, packet_size: int = PACKET_SIZE, eom: bool = True
) -> bytes:
    """Split a message into packets; ``eom=False`` leaves the message unfinished on purpose."""
    room = packet_size - HEADER.size
    chunks = [payload[i : i + room] for i in range(0, len(payload), room)] or [b""]
    packets = []
    for index, chunk in enumerate(chunks):
        last = index == len(chunks) - 1
        status = STATUS_EOM if (last and eom) else 0
        packet_id = (index + 1) % 256
        packets.append(HEADER.pack(ptype, status, HEADER.size + len(chunk), spid, packet_id, 0) + chunk)
    return b"".join(packets)


# --------------------------------------------------------------------------------------------------
# Small wire primitives
# --------------------------------------------------------------------------------------------------


def _ucs2(text: str) -> bytes:
    return text.encode("utf-16-le")


def _b_varchar(text: str) -> bytes:
    data = _ucs2(text)
    if len(data) // 2 > 255:
        raise ValueError(f"text too long for a B_VARCHAR: {text[:40]!r}...")
    return bytes([len(data) // 2]) + data


def _us_varchar(text: str) -> bytes:
    data = _ucs2(text)
    return struct.pack("<H", len(data) // 2) + data


def _b_varbyte(data: bytes) -> bytes:
    return bytes([len(data)]) + data


def _with_length(token: int, body: bytes) -> bytes:
    return bytes([token]) + struct.pack("<H", len(body)) + body


# --------------------------------------------------------------------------------------------------
# PRELOGIN
# --------------------------------------------------------------------------------------------------


def parse_prelogin(payload: bytes) -> dict[int, bytes]:
    """Options of a PRELOGIN message, keyed by option token."""
    options: dict[int, bytes] = {}
    pos = 0
    while pos < len(payload) and payload[pos] != PreloginOption.TERMINATOR:
        if pos + 5 > len(payload):
            raise ProtocolError("truncated PRELOGIN option table")
        token, offset, length = struct.unpack_from(">BHH", payload, pos)
        options[token] = payload[offset : offset + length]
        pos += 5
    return options


def client_encryption(payload: bytes) -> int:
    """The ENCRYPTION option of a client's PRELOGIN (a client that sends none cannot encrypt)."""
    value = parse_prelogin(payload).get(PreloginOption.ENCRYPTION, b"")
    return value[0] if value else ENCRYPT_NOT_SUP


def encode_prelogin_response(encryption: int = ENCRYPT_NOT_SUP) -> bytes:
    major, minor, build = PRODUCT_VERSION
    options = [
        (PreloginOption.VERSION, struct.pack(">BBHH", major, minor, build, 0)),
        (PreloginOption.ENCRYPTION, bytes([encryption])),
        (PreloginOption.INSTOPT, b"\x00"),
        (PreloginOption.THREADID, b""),
        (PreloginOption.MARS, b"\x00"),
    ]
    offset = len(options) * 5 + 1
    table, data = bytearray(), bytearray()
    for token, value in options:
        table += struct.pack(">BHH", token, offset + len(data), len(value))
        data += value
    return bytes(table) + bytes([PreloginOption.TERMINATOR]) + bytes(data)


# --------------------------------------------------------------------------------------------------
# LOGIN7
# --------------------------------------------------------------------------------------------------

# Offsets of the (offset, length) pairs in the fixed part of LOGIN7 (MS-TDS 2.2.6.4).
_LOGIN_FIELDS = {
    "hostname": 36,
    "user": 40,
    "password": 44,
    "app_name": 48,
    "database": 68,
}
_LOGIN_FIXED_SIZE = 94
_LOGIN_SSPI = 78  # ibSSPI, cbSSPI (bytes, not characters); cbSSPILong at 90 when cbSSPI is 0xFFFF
_LOGIN_SSPI_LONG = 90


def obfuscate_password(password: str) -> bytes:
    """What a client puts on the wire: each byte nibble-swapped, then XOR 0xA5."""
    return bytes((((b << 4) & 0xF0) | (b >> 4)) ^ 0xA5 for b in _ucs2(password))


def deobfuscate_password(data: bytes) -> str:
    plain = bytes((((b ^ 0xA5) << 4) & 0xF0) | ((b ^ 0xA5) >> 4) for b in data)
    return plain.decode("utf-16-le")


def _login_field(payload: bytes, at: int) -> bytes:
    offset, chars = struct.unpack_from("<HH", payload, at)
    return payload[offset : offset + 2 * chars]


def parse_login7(payload: bytes) -> LoginInfo:
    if len(payload) < _LOGIN_FIXED_SIZE:
        raise ProtocolError(f"LOGIN7 of {len(payload)} bytes is shorter than its fixed part")
    fields = {name: _login_field(payload, at) for name, at in _LOGIN_FIELDS.items()}
    sspi_offset, sspi_length = struct.unpack_from("<HH", payload, _LOGIN_SSPI)
    if sspi_length == 0xFFFF:
        sspi_length = struct.unpack_from("<I", payload, _LOGIN_SSPI_LONG)[0]
    return LoginInfo(
        user=fields["user"].decode("utf-16-le"),
        password=deobfuscate_password(fields["password"]),
        database=fields["database"].decode("utf-16-le"),
        app_name=fields["app_name"].decode("utf-16-le"),
        hostname=fields["hostname"].decode("utf-16-le"),
        tds_version=struct.unpack_from("<I", payload, 4)[0],
        sspi=payload[sspi_offset : sspi_offset + sspi_length],
    )


def negotiated_version(client_version: int) -> int:
    """A server answers with the highest version both sides speak."""
    return min(client_version, TDS74)


def _envchange_text(kind: int, new: str, old: str) -> bytes:
    return _with_length(Token.ENVCHANGE, bytes([kind]) + _b_varchar(new) + _b_varchar(old))


def _envchange_bytes(kind: int, new: bytes, old: bytes) -> bytes:
    return _with_length(Token.ENVCHANGE, bytes([kind]) + _b_varbyte(new) + _b_varbyte(old))


def _loginack(tds_version: int) -> bytes:
    major, minor, build = PRODUCT_VERSION
    body = (
        bytes([1])  # interface: T-SQL
        + struct.pack(">I", tds_version)  # big-endian here, unlike in LOGIN7
        + _b_varchar(PRODUCT_NAME)
        + struct.pack(">BBH", major, minor, build)
    )
    return _with_length(Token.LOGINACK, body)


def encode_login_ack(login: LoginInfo) -> bytes:
    """What SQL Server sends for a successful login, in SQL Server's order."""
    database = login.database or "master"
    return b"".join(
        [
            _envchange_text(EnvChange.DATABASE, database, "master"),
            _message_token(Token.INFO, SqlError(5701, f"Changed database context to '{database}'.", 0, 2)),
            _envchange_text(EnvChange.LANGUAGE, "us_english", ""),
            _message_token(Token.INFO, SqlError(5703, "Changed language setting to us_english.", 0, 1)),
            _envchange_bytes(EnvChange.SQL_COLLATION, COLLATION, b""),
            _loginack(negotiated_version(login.tds_version)),
            _envchange_text(EnvChange.PACKET_SIZE, str(PACKET_SIZE), str(PACKET_SIZE)),
            encode_done(DoneStatus.FINAL),
        ]
    )


def login_failed_error(user: str) -> SqlError:
    return SqlError(18456, f"Login failed for user '{user}'.", severity=14, state=1)


def encode_sspi(token: bytes) -> bytes:
    """The server's SSPI token: Kerberos's AP-REP, NTLM's CHALLENGE (MS-TDS 2.2.7.22)."""
    return _with_length(Token.SSPI, token)


def encode_login_failure(error: SqlError) -> bytes:
    return _message_token(Token.ERROR, error) + encode_done(DoneStatus.ERROR)


# --------------------------------------------------------------------------------------------------
# Client requests after login
# --------------------------------------------------------------------------------------------------


def _skip_all_headers(payload: bytes, tds_version: int) -> int:
    """Offset of the request body: TDS 7.2+ prefixes requests with ALL_HEADERS (its total length,
    4 bytes little-endian, counts itself)."""
    if tds_version < TDS72:
        return 0
    if len(payload) < 4:
        raise ProtocolError("request too short for its ALL_HEADERS block")
    total = struct.unpack_from("<I", payload)[0]
    if not 4 <= total <= len(payload):
        raise ProtocolError(f"ALL_HEADERS length {total} out of range")
    return total


def decode_sql_batch(payload: bytes, tds_version: int = TDS74) -> str:
    return payload[_skip_all_headers(payload, tds_version) :].decode("utf-16-le")


def decode_rpc_name(payload: bytes, tds_version: int = TDS74) -> str:
    pos = _skip_all_headers(payload, tds_version)
    chars = struct.unpack_from("<H", payload, pos)[0]
    if chars == 0xFFFF:
        proc_id = struct.unpack_from("<H", payload, pos + 2)[0]
        return _RPC_PROC_IDS.get(proc_id, f"#{proc_id}")
    return payload[pos + 2 : pos + 2 + 2 * chars].decode("utf-16-le")


def decode_transaction_request(payload: bytes, tds_version: int = TDS74) -> tuple[int, bool]:
    """(request type, whether a new transaction must start right after a commit/rollback)."""
    pos = _skip_all_headers(payload, tds_version)
    request = struct.unpack_from("<H", payload, pos)[0]
    begin_after = False
    if request in (TransactionRequest.COMMIT, TransactionRequest.ROLLBACK):
        # The transaction name's length prefix counts bytes here, not characters.
        name_bytes = payload[pos + 2]
        flags_at = pos + 3 + name_bytes
        begin_after = flags_at < len(payload) and bool(payload[flags_at] & 0x01)
    return request, begin_after


def encode_transaction_response(request: int, begin_after: bool, descriptor: bytes) -> bytes:
    """Acknowledge a transaction-manager request.  The driver keeps the descriptor from the begin
    ENVCHANGE and sends it back in later ALL_HEADERS, so every begin must announce one."""
    tokens = []
    if request == TransactionRequest.BEGIN:
        tokens.append(_envchange_bytes(EnvChange.BEGIN_TRAN, descriptor, b""))
    elif request in (TransactionRequest.COMMIT, TransactionRequest.ROLLBACK):
        kind = EnvChange.COMMIT_TRAN if request == TransactionRequest.COMMIT else EnvChange.ROLLBACK_TRAN
        tokens.append(_envchange_bytes(kind, b"", descriptor))
        if begin_after:
            tokens.append(_envchange_bytes(EnvChange.BEGIN_TRAN, descriptor, b""))
    tokens.append(encode_done(DoneStatus.FINAL))
    return b"".join(tokens)


def rpc_not_found_error(name: str) -> SqlError:
    return SqlError(2812, f"Could not find stored procedure '{name}'.", severity=16, state=62)


def encode_rpc_error(error: SqlError) -> bytes:
    return _message_token(Token.ERROR, error) + encode_done(DoneStatus.ERROR, token=Token.DONEPROC)


# --------------------------------------------------------------------------------------------------
# Result token streams
# --------------------------------------------------------------------------------------------------


def encode_done(status: int, curcmd: int = 0, rowcount: int = 0, *, token: int = Token.DONE) -> bytes:
    return bytes([token]) + struct.pack("<HHQ", status, curcmd, rowcount)


def encode_attention_ack() -> bytes:
    return encode_done(DoneStatus.ATTN)


def _message_token(token: int, error: SqlError) -> bytes:
    body = (
        struct.pack("<iBB", error.number, error.state, error.severity)
        + _us_varchar(error.message)
        + _b_varchar(SERVER_NAME)
        + _b_varchar("")  # procedure name: batches have none
        + struct.pack("<i", error.line)
    )
    return _with_length(token, body)


def encode_message(error: SqlError) -> bytes:
    """ERROR token, or INFO for severity <= 10 (which SQL Server treats as a message, not an error)."""
    return _message_token(Token.ERROR if error.severity > 10 else Token.INFO, error)


_TYPE_INFO = {
    "nvarchar": bytes([0xE7]) + struct.pack("<H", 2 * NVARCHAR_MAX_CHARS) + COLLATION,
    "bigint": bytes([0x26, 8]),
    "int": bytes([0x26, 4]),
    "float": bytes([0x6D, 8]),
    "datetime": bytes([0x6F, 8]),
    "bit": bytes([0x68, 1]),
}
_FLAG_NULLABLE = 0x0001


def encode_colmetadata(columns: list[Column]) -> bytes:
    if not columns:
        raise ValueError("a result set needs at least one column")
    parts = [bytes([Token.COLMETADATA]), struct.pack("<H", len(columns))]
    for column in columns:
        parts += [struct.pack("<IH", 0, _FLAG_NULLABLE), _TYPE_INFO[column.type], _b_varchar(column.name)]
    return b"".join(parts)


def _encode_nvarchar(value: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"nvarchar value must be str, got {type(value).__name__}: {value!r}")
    data = _ucs2(value)
    if len(data) > 2 * NVARCHAR_MAX_CHARS:
        raise ValueError(f"nvarchar value longer than {NVARCHAR_MAX_CHARS} characters")
    return struct.pack("<H", len(data)) + data


def _integer(value: object, bits: int) -> int:
    # bool is an int subclass; letting it through would hide a handler mixing up bit and int.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"integer value must be int, got {type(value).__name__}: {value!r}")
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise ValueError(f"{value} does not fit in a {bits}-bit integer")
    return value


def _encode_bigint(value: object) -> bytes:
    return b"\x08" + struct.pack("<q", _integer(value, 64))


def _encode_int(value: object) -> bytes:
    return b"\x04" + struct.pack("<i", _integer(value, 32))


def _encode_float(value: object) -> bytes:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"float value must be float or int, got {type(value).__name__}: {value!r}")
    return b"\x08" + struct.pack("<d", float(value))


_DATETIME_EPOCH = dt.datetime(1900, 1, 1)
_TICKS_PER_DAY = 300 * 86400


def datetime_to_wire(value: dt.datetime) -> tuple[int, int]:
    """(days since 1900-01-01, 1/300-second ticks since midnight), rounded to the nearest tick as
    SQL Server rounds datetime values."""
    delta = value - _DATETIME_EPOCH
    ticks = round((delta.seconds * 1_000_000 + delta.microseconds) * 300 / 1_000_000)
    days = delta.days
    if ticks == _TICKS_PER_DAY:
        days, ticks = days + 1, 0
    return days, ticks


def _encode_datetime(value: object) -> bytes:
    if not isinstance(value, dt.datetime):
        raise TypeError(f"datetime value must be datetime.datetime, got {type(value).__name__}: {value!r}")
    if value.tzinfo is not None:
        raise ValueError("SQL Server datetime has no time zone; pass a naive datetime")
    days, ticks = datetime_to_wire(value)
    return b"\x08" + struct.pack("<iI", days, ticks)


def _encode_bit(value: object) -> bytes:
    if not isinstance(value, bool) and value not in (0, 1):
        raise TypeError(f"bit value must be bool (or 0/1), got {type(value).__name__}: {value!r}")
    return b"\x01" + bytes([int(bool(value))])


_ENCODERS = {
    "nvarchar": _encode_nvarchar,
    "bigint": _encode_bigint,
    "int": _encode_int,
    "float": _encode_float,
    "datetime": _encode_datetime,
    "bit": _encode_bit,
}
# The NULL marker depends on how the type's length prefix is sized.
_NULLS = {"nvarchar": b"\xff\xff"} | dict.fromkeys(("bigint", "int", "float", "datetime", "bit"), b"\x00")


def encode_row(columns: list[Column], row: tuple) -> bytes:
    if len(row) != len(columns):
        raise ValueError(f"row has {len(row)} values for {len(columns)} columns: {row!r}")
    parts = [bytes([Token.ROW])]
    for column, value in zip(columns, row, strict=True):
        try:
            parts.append(_NULLS[column.type] if value is None else _ENCODERS[column.type](value))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"column {column.name!r}: {exc}") from exc
    return b"".join(parts)


def encode_rows(result: ResultSet, limit: int | None = None) -> Iterator[bytes]:
    rows: Iterable[tuple] = result.rows if limit is None else result.rows[:limit]
    for row in rows:
        yield encode_row(result.columns, row)


def _encode_item(item: ResultSet | SqlError, more: bool, token: int = Token.DONE) -> bytes:
    more_bit = DoneStatus.MORE if more else 0
    if isinstance(item, ResultSet):
        body = encode_colmetadata(item.columns) + b"".join(encode_rows(item))
        return body + encode_done(DoneStatus.COUNT | more_bit, CURCMD_SELECT, len(item.rows), token=token)
    if isinstance(item, SqlError):
        return encode_message(item) + encode_done(DoneStatus.ERROR | more_bit, CURCMD_SELECT, token=token)
    raise TypeError(f"a reply holds ResultSet and SqlError items, got {type(item).__name__}")


def _is_info(item: ResultSet | SqlError) -> bool:
    return isinstance(item, SqlError) and item.severity <= 10


def encode_reply(reply: Reply, *, in_proc: bool = False) -> bytes:
    """The token stream for one batch.

    Each result set and each error is closed by its own DONE, and every DONE but the last carries
    DONE_MORE, which is how the client knows another result follows.  An INFO message (severity
    <= 10) gets no DONE of its own, like PRINT output in SQL Server: it rides along with whatever
    comes next, so ``[info, result]`` still reads as one result set with a message attached.
    ``in_proc``: the answer of a statement run by an RPC (rpc.py), closed by DONEINPROC tokens that all
    carry DONE_MORE, since the procedure's own DONEPROC follows.
    """
    if not isinstance(reply, list):
        raise TypeError(f"a reply is a list, got {type(reply).__name__}")
    parts = []
    closing = [index for index, item in enumerate(reply) if not _is_info(item)]
    for index, item in enumerate(reply):
        if _is_info(item):
            assert isinstance(item, SqlError)
            parts.append(encode_message(item))
        else:
            more = in_proc or index < len(reply) - 1
            parts.append(_encode_item(item, more, Token.DONEINPROC if in_proc else Token.DONE))
    if not in_proc and (not closing or closing[-1] < len(reply) - 1):
        # Nothing closed the stream after the trailing messages (or the reply is empty).
        parts.append(encode_done(DoneStatus.FINAL))
    return b"".join(parts)


def encode_partial_result(reply: Reply, rows: int) -> bytes:
    """The start of the first result set only: metadata and ``rows`` rows, no DONE."""
    first = next((item for item in reply if isinstance(item, ResultSet)), None)
    if first is None:
        raise ValueError("DropMidResult needs a reply with at least one ResultSet")
    return encode_colmetadata(first.columns) + b"".join(encode_rows(first, rows))
