"""RPC requests for prepared statements: sp_prepexec, sp_execute and sp_unprepare (MS-TDS 2.2.6.6).

What FreeTDS 1.3.17 sends for ``cursor.execute(sql, *params)`` (measured against this stand-in): the
first execute of a statement on a cursor is ``sp_prepexec`` by procedure id 13 with ``@handle`` (INTN,
output, NULL), the parameter declarations and the statement (NVARCHAR; NVARCHAR(MAX) as PLP chunks when
longer than 4,000 characters) and the values; a later execute of the same statement on the same cursor
is ``sp_execute`` (id 12) with the handle and the values only; closing the cursor sends ``sp_unprepare``
(id 15) with the handle.

SQL Server answers an RPC with the statement's own results, each closed by DONEINPROC, then
RETURNSTATUS (the procedure's return code), then one RETURNVALUE per output parameter (here the new
handle of sp_prepexec), then DONEPROC.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .tds import (
    TDS72,
    TDS74,
    DoneStatus,
    ProtocolError,
    Reply,
    SqlError,
    Token,
    _b_varchar,
    _skip_all_headers,
    encode_done,
    encode_reply,
)

SP_EXECUTE = 12
SP_PREPEXEC = 13
SP_UNPREPARE = 15
_INTN = 0x26
_PLP_NULL = 0xFFFFFFFFFFFFFFFF
_STATUS_BY_REF = 0x01  # the parameter is an output parameter
FIRST_HANDLE = 1  # SQL Server numbers prepared handles of a session from 1 on


@dataclass
class Param:
    name: str
    output: bool
    value: object


@dataclass
class Rpc:
    proc_id: int | None  # None when the client named the procedure
    name: str
    params: list[Param]


def decode_rpc(payload: bytes, tds_version: int = TDS74) -> Rpc:
    pos = _skip_all_headers(payload, tds_version)
    chars = struct.unpack_from("<H", payload, pos)[0]
    pos += 2
    proc_id: int | None = None
    name = ""
    if chars == 0xFFFF:
        proc_id = struct.unpack_from("<H", payload, pos)[0]
        pos += 2
    else:
        name = payload[pos : pos + 2 * chars].decode("utf-16-le")
        pos += 2 * chars
    pos += 2  # option flags
    params: list[Param] = []
    while pos < len(payload):
        if payload[pos] in (0x80, 0xFF):  # batch separator: one RPC per message is all we take
            break
        name_chars = payload[pos]
        pname = payload[pos + 1 : pos + 1 + 2 * name_chars].decode("utf-16-le")
        pos += 1 + 2 * name_chars
        status = payload[pos]
        pos += 1
        value, pos = _decode_value(payload, pos, tds_version)
        params.append(Param(pname, bool(status & _STATUS_BY_REF), value))
    return Rpc(proc_id, name, params)


def _decode_value(data: bytes, pos: int, tds_version: int) -> tuple[object, int]:
    kind = data[pos]
    pos += 1
    if kind in (0x26, 0x68, 0x6D, 0x6F, 0x6E):  # INTN, BITN, FLTN, DATETIMN, MONEYN: byte lengths
        pos += 1  # maximum length
        size = data[pos]
        pos += 1
        raw = data[pos : pos + size]
        pos += size
        if size == 0:
            return None, pos
        if kind == 0x26:
            return int.from_bytes(raw, "little", signed=True), pos
        if kind == 0x68:
            return bool(raw[0]), pos
        if kind == 0x6D:
            return struct.unpack("<d" if size == 8 else "<f", raw)[0], pos
        return raw, pos
    if kind in (0x30, 0x34, 0x38, 0x7F):  # INT1, INT2, INT4, INT8: fixed length
        size = {0x30: 1, 0x34: 2, 0x38: 4, 0x7F: 8}[kind]
        return int.from_bytes(data[pos : pos + size], "little", signed=kind != 0x30), pos + size
    if kind in (0xE7, 0xEF, 0xA7, 0xAF):  # NVARCHAR, NCHAR, BIGVARCHAR, BIGCHAR
        max_len = struct.unpack_from("<H", data, pos)[0]
        pos += 2 + 5  # collation
        wide = kind in (0xE7, 0xEF)
        if max_len == 0xFFFF and tds_version >= TDS72:
            raw, pos = _plp(data, pos)
        else:
            size = struct.unpack_from("<H", data, pos)[0]
            pos += 2
            if size == 0xFFFF:
                return None, pos
            raw = data[pos : pos + size]
            pos += size
        if raw is None:
            return None, pos
        return raw.decode("utf-16-le" if wide else "latin-1"), pos
    if kind in (0x63, 0x23):  # NTEXT, TEXT
        pos += 4 + 5  # maximum length, collation
        size = struct.unpack_from("<i", data, pos)[0]
        pos += 4
        if size < 0:
            return None, pos
        raw = data[pos : pos + size]
        return raw.decode("utf-16-le" if kind == 0x63 else "latin-1"), pos + size
    raise ProtocolError(f"RPC parameter of type {kind:#04x} is not decoded by the stand-in")


def _plp(data: bytes, pos: int) -> tuple[bytes | None, int]:
    total = struct.unpack_from("<Q", data, pos)[0]
    pos += 8
    if total == _PLP_NULL:
        return None, pos
    chunks = []
    while True:
        size = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if size == 0:
            return b"".join(chunks), pos
        chunks.append(data[pos : pos + size])
        pos += size


_PARAM_NAME = re.compile(r"@P(\d+)\b", re.IGNORECASE)


def bind(statement: str, values: list[object]) -> str:
    """The statement with its @P1.. markers replaced by literals: what the handler interprets."""

    def literal(match: re.Match[str]) -> str:
        index = int(match.group(1)) - 1
        if not 0 <= index < len(values):
            raise ProtocolError(f"statement uses @P{index + 1} but only {len(values)} values came")
        value = values[index]
        if value is None:
            return "NULL"
        if isinstance(value, bool | int | float):
            return str(int(value) if isinstance(value, bool) else value)
        return "N'" + str(value).replace("'", "''") + "'"

    return _PARAM_NAME.sub(literal, statement)


def encode_rpc_reply(reply: Reply, *, handle: int | None = None, status: int = 0) -> bytes:
    """The statement's results (each closed by DONEINPROC with DONE_MORE), RETURNSTATUS, the
    handle as RETURNVALUE when there is one, DONEPROC."""
    parts = [encode_reply(reply, in_proc=True), bytes([Token.RETURNSTATUS]) + struct.pack("<i", status)]
    if handle is not None:
        parts.append(_return_value_int(0, "@handle", handle))
    failed = any(isinstance(item, SqlError) and item.severity > 10 for item in reply)
    parts.append(encode_done(DoneStatus.ERROR if failed else DoneStatus.FINAL, token=Token.DONEPROC))
    return b"".join(parts)


def _return_value_int(ordinal: int, name: str, value: int) -> bytes:
    return (
        bytes([Token.RETURNVALUE])
        + struct.pack("<H", ordinal)
        + _b_varchar(name)
        + bytes([_STATUS_BY_REF])
        + struct.pack("<IH", 0, 0x0001)  # user type, flags (nullable)
        + bytes([_INTN, 4, 4])
        + struct.pack("<i", value)
    )


# ---- the same, called from a T-SQL batch (what the exporter sends: prepared.py) -----------------

_PREPARE_BATCH = re.compile(
    r"^SET NOCOUNT ON;\s*(?P<drops>(?:EXEC sys\.sp_unprepare \d+;\s*)*)DECLARE @handle int;\s*"
    r"BEGIN TRY\s*EXEC sys\.sp_prepexec @handle OUTPUT, NULL, N'(?P<text>(?:[^']|'')*)';\s*END TRY\s*"
    r"BEGIN CATCH\s*SELECT N'(?P<refused>\w+)' AS section, ERROR_NUMBER\(\) AS error_number, "
    r"ERROR_MESSAGE\(\) AS error_message;\s*END CATCH;\s*"
    r"SELECT N'(?P<tag>\w+)' AS section, @handle AS handle;\s*$",
    re.DOTALL,
)
_EXECUTE_BATCH = re.compile(r"^\s*EXEC sys\.sp_execute (\d+);\s*$")
_HANDLE_NUMBER = re.compile(r"\d+")


@dataclass
class PrepareCall:
    statement: str
    unprepare: list[int]
    handle_tag: str
    refused_tag: str


def parse_prepare_batch(sql: str) -> PrepareCall | None:
    """The exporter's `sp_prepexec` wrapper, or None when `sql` is not one."""
    match = _PREPARE_BATCH.match(sql)
    if match is None:
        return None
    return PrepareCall(
        statement=match.group("text").replace("''", "'"),
        unprepare=[int(n) for n in _HANDLE_NUMBER.findall(match.group("drops"))],
        handle_tag=match.group("tag"),
        refused_tag=match.group("refused"),
    )


def parse_execute_batch(sql: str) -> int | None:
    match = _EXECUTE_BATCH.match(sql)
    return int(match.group(1)) if match else None
