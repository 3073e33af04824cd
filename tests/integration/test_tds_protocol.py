"""The SQL Server stand-in's protocol layer, exercised through the real FreeTDS ODBC driver and pyodbc
over real TCP, so what passes here is what the exporter will see.

Timing assertions have generous upper bounds (a loaded CI box is slow) but every test is bounded:
query timeouts are 1-2 s and hangs are cut short by the server fixture's ``stop()``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pyodbc
import pytest

from tests.standin import tds
from tests.standin.server import BatchAnswer, Session, StandInServer, driver_reply
from tests.standin.tds import (
    Column,
    Delay,
    DropMidResult,
    Garbage,
    Hang,
    LoginInfo,
    ResultSet,
    SqlError,
    Truncated,
)

pytestmark = pytest.mark.skipif(
    "FreeTDS" not in pyodbc.drivers(), reason="FreeTDS ODBC driver not registered (run scripts/bootstrap.sh)"
)

Answer = BatchAnswer | Callable[[str, Session], BatchAnswer]


class ScriptedHandler:
    """Answers batches from a table (exact SQL text -> answer); unknown SQL gets a syntax error so a
    test that sends something unexpected fails loudly instead of reading an empty result."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.fallback: Answer | None = None
        self.password = "secret"
        self.connect_fault: Hang | None = None
        self.login_fault: SqlError | Hang | None = None
        self.logins: list[LoginInfo] = []
        self.batches: list[str] = []  # application batches only, not the driver's own

    def on_connect(self) -> Hang | None:
        return self.connect_fault

    def on_login(self, login: LoginInfo) -> SqlError | Hang | None:
        self.logins.append(login)
        if self.login_fault is not None:
            return self.login_fault
        if login.password != self.password:
            return tds.login_failed_error(login.user)
        return None

    def on_batch(self, sql: str, session: Session) -> BatchAnswer:
        driver = driver_reply(sql)
        if driver is not None:
            return driver
        self.batches.append(sql)
        answer = self.answers.get(sql, self.fallback)
        if answer is None:
            return [SqlError(102, f"Incorrect syntax near '{sql[:30]}'.", severity=15)]
        return answer(sql, session) if callable(answer) else answer


def connection_string(port: int, **overrides: str) -> str:
    parts = {
        "DRIVER": "{FreeTDS}",
        "SERVER": "127.0.0.1",
        "PORT": str(port),
        "DATABASE": "master",
        "UID": "exporter",
        "PWD": "secret",
        "TDS_Version": "7.4",
        "Encryption": "off",
        "ClientCharset": "UTF-8",
    } | overrides
    return ";".join(f"{key}={value}" for key, value in parts.items())


@pytest.fixture
def handler() -> ScriptedHandler:
    return ScriptedHandler()


@pytest.fixture
def server(handler: ScriptedHandler) -> Iterator[StandInServer]:
    with StandInServer(handler) as srv:
        yield srv
    assert srv.threads() == []


@pytest.fixture
def connect(server: StandInServer) -> Iterator[Callable[..., pyodbc.Connection]]:
    """Opens connections the way the exporter does and closes them before the server stops."""
    opened: list[pyodbc.Connection] = []

    def _connect(
        *, login_timeout: int = 3, query_timeout: int = 2, autocommit: bool = True, **overrides: str
    ) -> pyodbc.Connection:
        cnxn = pyodbc.connect(
            connection_string(server.port, **overrides), timeout=login_timeout, autocommit=autocommit
        )
        cnxn.timeout = query_timeout
        opened.append(cnxn)
        return cnxn

    yield _connect
    for cnxn in opened:
        with contextlib.suppress(pyodbc.Error):
            cnxn.close()


def tuples(rows: list[pyodbc.Row]) -> list[tuple]:
    """pyodbc rows do not compare equal to tuples."""
    return [tuple(row) for row in rows]


def one_column(name: str, type_: str, *values: object) -> ResultSet:
    return ResultSet([Column(name, type_)], [(value,) for value in values])


def session_of(server: StandInServer, cnxn: pyodbc.Connection) -> Session:
    """The server-side session of the connection that just ran ``SELECT 'whoami'``."""
    cnxn.cursor().execute("whoami").fetchall()
    return next(s for s in server.sessions if s.state.get("whoami"))


def _whoami(sql: str, session: Session) -> BatchAnswer:
    session.state["whoami"] = True
    return [one_column("spid", "int", session.spid)]


# --------------------------------------------------------------------------------------------------
# Pure protocol pieces (no driver)
# --------------------------------------------------------------------------------------------------


def test_password_obfuscation_round_trips() -> None:
    wire = tds.obfuscate_password("s3cret-ü")
    assert wire != "s3cret-ü".encode("utf-16-le")
    # The first byte of "s" (0x73): nibbles swapped 0x37, XOR 0xA5 -> 0x92.
    assert wire[0] == 0x92
    assert tds.deobfuscate_password(wire) == "s3cret-ü"


def test_prelogin_answer_refuses_encryption_and_claims_sql_server_2019() -> None:
    options = tds.parse_prelogin(tds.encode_prelogin_response())
    assert options[tds.PreloginOption.ENCRYPTION] == bytes([tds.ENCRYPT_NOT_SUP])
    assert options[tds.PreloginOption.VERSION] == bytes([15, 0, 0x07, 0xD0, 0, 0])
    assert options[tds.PreloginOption.MARS] == b"\x00"


def test_assembler_reassembles_multi_packet_messages_fed_byte_by_byte() -> None:
    payload = bytes(range(256)) * 40  # 10240 bytes: three 4096-byte packets
    stream = tds.encode_packets(tds.PacketType.SQL_BATCH, payload, spid=0)
    assert len(stream) == len(payload) + 3 * tds.HEADER.size
    assembler = tds.MessageAssembler()
    messages = [m for i in range(len(stream)) for m in assembler.feed(stream[i : i + 1])]
    assert [(m.type, m.payload) for m in messages] == [(tds.PacketType.SQL_BATCH, payload)]


def test_packets_are_at_most_4096_bytes_and_only_the_last_has_eom() -> None:
    stream = tds.encode_packets(tds.PacketType.TABULAR_RESULT, b"x" * 9000, spid=51)
    headers = []
    pos = 0
    while pos < len(stream):
        header = tds.HEADER.unpack_from(stream, pos)
        headers.append(header)
        pos += header[2]
    assert [(h[1], h[2], h[3], h[4]) for h in headers] == [
        (0, 4096, 51, 1),
        (0, 4096, 51, 2),
        (1, 9000 - 2 * 4088 + 8, 51, 3),
    ]


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (dt.datetime(1900, 1, 1), (0, 0)),
        (dt.datetime(1900, 1, 2, 0, 0, 1), (1, 300)),
        (dt.datetime(1899, 12, 31, 23, 59, 59, 997000), (-1, 300 * 86400 - 1)),
        (dt.datetime(2000, 1, 1, 23, 59, 59, 999000), (36525, 0)),  # rounds up into the next day
    ],
)
def test_datetime_wire_format(value: dt.datetime, wire: tuple[int, int]) -> None:
    assert tds.datetime_to_wire(value) == wire


def test_reply_stream_sets_done_more_and_count() -> None:
    result = one_column("a", "int", 1, 2)
    error = SqlError(208, "Invalid object name 'x'.")
    result_tokens = tds.encode_colmetadata(result.columns) + b"".join(tds.encode_rows(result))
    select = tds.CURCMD_SELECT
    assert tds.encode_reply([result, error, result]) == b"".join(
        [
            result_tokens,
            tds.encode_done(tds.DoneStatus.COUNT | tds.DoneStatus.MORE, select, 2),
            tds.encode_message(error),
            tds.encode_done(tds.DoneStatus.ERROR | tds.DoneStatus.MORE, select, 0),
            result_tokens,
            tds.encode_done(tds.DoneStatus.COUNT, select, 2),
        ]
    )
    # token, status 0x0011, curcmd 0x00C1, 8-byte row count: all little-endian
    assert tds.encode_done(tds.DoneStatus.COUNT | tds.DoneStatus.MORE, select, 2) == bytes.fromhex(
        "fd 1100 c100 0200000000000000"
    )
    assert tds.encode_reply([]) == tds.encode_done(tds.DoneStatus.FINAL)


@pytest.mark.parametrize(
    ("column", "value", "error"),
    [
        ("nvarchar", 5, TypeError),
        ("nvarchar", "x" * 4001, ValueError),
        ("int", 2**31, ValueError),
        ("bigint", 2**63, ValueError),
        ("int", True, TypeError),
        ("float", "1.0", TypeError),
        ("datetime", dt.date(2024, 1, 1), TypeError),
        ("bit", 2, TypeError),
    ],
)
def test_encoder_rejects_values_that_do_not_fit(column: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="column 'c'"):
        tds.encode_row([Column("c", column)], (value,))


def test_unknown_column_type_is_rejected_where_it_is_declared() -> None:
    with pytest.raises(ValueError, match="decimal"):
        Column("c", "decimal")


# --------------------------------------------------------------------------------------------------
# Login
# --------------------------------------------------------------------------------------------------


def test_login_fields_reach_the_handler(server, handler, connect) -> None:
    connect(APP="standin-protocol-test")
    [login] = handler.logins
    assert login.user == "exporter"
    assert login.password == "secret"
    assert login.database == "master"
    assert login.app_name == "standin-protocol-test"
    assert login.hostname == socket.gethostname()
    assert login.tds_version == 0x74000004
    assert server.sessions[0].login == login


def test_bad_password_fails_fast_with_18456(server, handler) -> None:
    started = time.monotonic()
    with pytest.raises(pyodbc.Error) as caught:
        pyodbc.connect(connection_string(server.port, PWD="wrong"), timeout=3, autocommit=True)
    elapsed = time.monotonic() - started
    assert "18456" in str(caught.value)
    assert "Login failed for user 'exporter'." in str(caught.value)
    assert elapsed < 1.0
    assert handler.logins[0].password == "wrong"


def test_client_demanding_encryption_gives_up(server, handler) -> None:
    started = time.monotonic()
    with pytest.raises(pyodbc.Error):
        pyodbc.connect(connection_string(server.port, Encryption="require"), timeout=3, autocommit=True)
    assert time.monotonic() - started < 1.0
    assert handler.logins == []  # it never got as far as LOGIN7
    assert server.errors == []


def test_connect_hang_hits_the_login_timeout(server, handler) -> None:
    handler.connect_fault = Hang()
    started = time.monotonic()
    with pytest.raises(pyodbc.Error, match=r"HYT00|[Tt]imeout"):
        pyodbc.connect(connection_string(server.port), timeout=2, autocommit=True)
    assert 1.5 < time.monotonic() - started < 4.0


def test_login_hang_hits_the_login_timeout(server, handler) -> None:
    handler.login_fault = Hang()
    started = time.monotonic()
    with pytest.raises(pyodbc.Error, match=r"HYT00|[Tt]imeout"):
        pyodbc.connect(connection_string(server.port), timeout=2, autocommit=True)
    assert 1.5 < time.monotonic() - started < 4.0
    assert [login.user for login in handler.logins] == ["exporter"]


# --------------------------------------------------------------------------------------------------
# What the driver sends, round trips, bytes
# --------------------------------------------------------------------------------------------------


def test_pyodbc_asks_for_type_info_on_the_first_connection_per_connection_string(server, handler) -> None:
    # pyodbc caches type info per connection string for the whole process: make ours unique.
    cs = connection_string(server.port, APP=f"typeinfo-{uuid.uuid4().hex[:8]}")
    for _ in range(2):
        pyodbc.connect(cs, timeout=3, autocommit=True).close()
    first, second = server.sessions
    assert first.batches == 4
    assert second.batches == 0
    assert handler.batches == []  # all four were the driver's, answered by driver_reply()


def test_type_info_reply_is_what_sql_server_says(connect) -> None:
    cursor = connect().cursor()
    rows = cursor.getTypeInfo(pyodbc.SQL_WVARCHAR).fetchall()
    assert [(row.type_name, row.data_type, row.column_size) for row in rows] == [("nvarchar", -9, 4000)]


def test_plain_execute_is_one_sql_batch_holding_exactly_the_text(server, handler, connect) -> None:
    handler.answers["whoami"] = _whoami
    handler.answers["SELECT 42 AS answer"] = [one_column("answer", "int", 42)]
    cnxn = connect()
    session = session_of(server, cnxn)
    before = (session.batches, session.bytes_in, session.bytes_out)
    assert tuples(cnxn.cursor().execute("SELECT 42 AS answer").fetchall()) == [(42,)]
    assert session.batches == before[0] + 1
    assert session.bytes_in > before[1]
    assert session.bytes_out > before[2]
    assert handler.batches[-1] == "SELECT 42 AS answer"


def test_multi_packet_client_batch_is_reassembled(handler, connect) -> None:
    handler.fallback = lambda sql, session: [one_column("length", "int", len(sql))]
    sql = "SELECT 1 -- " + "é" * 9000  # 18 kB of UCS-2: five client packets
    assert tuples(connect().cursor().execute(sql).fetchall()) == [(len(sql),)]
    assert handler.batches == [sql]


def test_parameterised_execute_is_sp_prepexec_answered_with_its_parameters_bound(
    server, handler, connect
) -> None:
    handler.answers["whoami"] = _whoami
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    handler.answers["SELECT 7 AS n"] = [one_column("n", "int", 7)]
    cnxn = connect()
    session = session_of(server, cnxn)
    before = session.batches
    cursor = cnxn.cursor()
    assert tuples(cursor.execute("SELECT ? AS n", 7).fetchall()) == [(7,)]
    assert session.batches == before + 1 and session.prepares == 1 and list(session.prepared) == [1]
    cursor.close()  # FreeTDS unprepares the handle
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert session.prepared == {} and session.unprepares == 1


def test_any_other_rpc_is_refused_with_2812(server, handler, connect) -> None:
    handler.answers["whoami"] = _whoami
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect()
    with pytest.raises(pyodbc.Error, match=r"Could not find stored procedure 'sp_no_such'.*2812"):
        cnxn.cursor().execute("{call sp_no_such}")
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]


def test_transaction_manager_requests_are_answered_and_counted(server, handler, connect) -> None:
    handler.answers["whoami"] = _whoami
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect(autocommit=False)  # FreeTDS: TM begin, not SET IMPLICIT_TRANSACTIONS
    session = session_of(server, cnxn)
    before = session.batches
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    cnxn.commit()
    cnxn.rollback()
    cnxn.autocommit = True
    assert session.batches == before + 4
    assert handler.batches == ["whoami", "SELECT 1"]
    assert server.errors == []


# --------------------------------------------------------------------------------------------------
# Result sets, values, errors
# --------------------------------------------------------------------------------------------------


def test_several_result_sets_in_one_batch(handler, connect) -> None:
    handler.answers["three"] = [
        one_column("a", "int", 1, 2),
        ResultSet([Column("b", "nvarchar"), Column("c", "float")], [("x", 1.5)]),
        one_column("d", "bit"),  # an empty result set still is one
    ]
    cursor = connect().cursor()
    cursor.execute("three")
    assert [d[0] for d in cursor.description] == ["a"]
    assert tuples(cursor.fetchall()) == [(1,), (2,)]
    assert cursor.nextset() is True
    assert [d[0] for d in cursor.description] == ["b", "c"]
    assert tuples(cursor.fetchall()) == [("x", 1.5)]
    assert cursor.nextset() is True
    assert tuples(cursor.fetchall()) == []
    assert cursor.nextset() is False


def test_empty_reply_is_not_a_result_set(handler, connect) -> None:
    handler.answers["SET NOCOUNT ON"] = []
    cursor = connect().cursor()
    cursor.execute("SET NOCOUNT ON")
    assert cursor.description is None


def test_error_only_reply_raises_programming_error_with_number_and_text(handler, connect) -> None:
    handler.answers["SELECT * FROM x"] = [SqlError(208, "Invalid object name 'x'.")]
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cursor = connect().cursor()
    with pytest.raises(pyodbc.ProgrammingError) as caught:
        cursor.execute("SELECT * FROM x")
    assert "Invalid object name 'x'." in str(caught.value)
    assert "(208)" in str(caught.value)
    assert tuples(cursor.execute("SELECT 1").fetchall()) == [(1,)]


def test_error_between_result_sets_is_raised_by_nextset_and_ends_the_batch_for_pyodbc(
    handler, connect
) -> None:
    # The stream carries all three items; pyodbc raises on the error and then frees the statement,
    # so the third result set is never read.  The connection stays usable.
    handler.answers["mixed"] = [
        one_column("a", "int", 1),
        SqlError(208, "Invalid object name 'x'."),
        one_column("b", "int", 3),
    ]
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect()
    cursor = cnxn.cursor()
    cursor.execute("mixed")
    assert tuples(cursor.fetchall()) == [(1,)]
    with pytest.raises(pyodbc.ProgrammingError, match="208"):
        cursor.nextset()
    assert cursor.nextset() is False
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]


def test_error_before_a_result_set_fails_the_execute(handler, connect) -> None:
    handler.answers["error first"] = [SqlError(208, "Invalid object name 'x'."), one_column("b", "int", 3)]
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect()
    with pytest.raises(pyodbc.ProgrammingError, match="208"):
        cnxn.cursor().execute("error first")
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]


def test_info_messages_ride_along_without_breaking_result_sets(handler, connect) -> None:
    handler.answers["chatty"] = [
        SqlError(0, "starting", severity=0),
        one_column("a", "int", 1),
        SqlError(50000, "halfway", severity=10),
        one_column("b", "int", 2),
    ]
    cursor = connect().cursor()
    cursor.execute("chatty")
    assert tuples(cursor.fetchall()) == [(1,)]
    assert any("starting" in text for _state, text in cursor.messages)
    assert cursor.nextset() is True
    assert tuples(cursor.fetchall()) == [(2,)]
    assert any("halfway" in text for _state, text in cursor.messages)
    assert cursor.nextset() is False


PADDED = "SQLServer:Buffer Manager".ljust(128)
VALUE_ROWS = [
    (
        "MSSQL$SQL2019:Buffer Manager",
        2**62,
        2**31 - 1,
        3.141592653589793,
        dt.datetime(2024, 2, 29, 13, 45, 7, 123000),
        True,
    ),
    (PADDED, -(2**63), -(2**31), -1.5e300, dt.datetime(1753, 1, 1), False),
    ("Ünïcødé ✓ 日本語 🙂", 2**63 - 1, 0, 5e-324, dt.datetime(9999, 12, 31, 23, 59, 59, 997000), True),
    ("", 0, 1, 0.1, dt.datetime(1900, 1, 1, 0, 0, 0, 3000), False),
    (None, None, None, None, None, None),
]
VALUE_COLUMNS = [
    Column("object_name", "nvarchar"),
    Column("cntr_value", "bigint"),
    Column("small", "int"),
    Column("ratio", "float"),
    Column("sample_time", "datetime"),
    Column("flag", "bit"),
]


def test_values_round_trip_exactly(handler, connect) -> None:
    handler.answers["values"] = [ResultSet(VALUE_COLUMNS, VALUE_ROWS)]
    cursor = connect().cursor()
    rows = cursor.execute("values").fetchall()
    assert tuples(rows) == VALUE_ROWS
    assert [(d[0], d[1], d[6]) for d in cursor.description] == [
        ("object_name", str, True),
        ("cntr_value", int, True),
        ("small", int, True),
        ("ratio", float, True),
        ("sample_time", dt.datetime, True),
        ("flag", bool, True),
    ]
    assert len(rows[1].object_name) == 128  # trailing blanks are data, not trimmed


def test_large_results_span_many_packets(handler, connect) -> None:
    rows = [(f"instance {i}".ljust(128), i) for i in range(2000)]  # ~0.5 MB
    handler.answers["big"] = [
        ResultSet([Column("name", "nvarchar"), Column("n", "bigint")], rows),
        one_column("longest", "nvarchar", "z" * 4000),
    ]
    cursor = connect().cursor()
    assert tuples(cursor.execute("big").fetchall()) == rows
    assert cursor.nextset() is True
    assert tuples(cursor.fetchall()) == [("z" * 4000,)]


def test_bad_values_from_the_handler_surface_as_an_error(server, handler, connect) -> None:
    handler.answers["oops"] = [one_column("n", "int", "not a number")]
    handler.answers["boom"] = lambda sql, session: 1 / 0
    cursor = connect().cursor()
    with pytest.raises(pyodbc.Error, match="stand-in cannot encode the reply"):
        cursor.execute("oops")
    with pytest.raises(pyodbc.Error, match="stand-in handler raised ZeroDivisionError"):
        cursor.execute("boom")
    assert [type(e) for e in server.errors] == [TypeError, ZeroDivisionError]


# --------------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------------


def test_batch_hang_times_out_and_breaks_the_connection(server, handler, connect) -> None:
    # FreeTDS sends ATTENTION after the query timeout, then waits one more timeout for the ack,
    # which a Hang never sends: ~2 x timeout, then the connection is dead.
    handler.answers["stuck"] = Hang()
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect(query_timeout=1)
    started = time.monotonic()
    with pytest.raises(pyodbc.OperationalError, match="HYT00"):
        cnxn.cursor().execute("stuck")
    assert 1.5 < time.monotonic() - started < 4.0
    with pytest.raises(pyodbc.Error, match="08S01"):
        cnxn.cursor().execute("SELECT 1")
    # The driver closed its socket; the Hang noticed and the server-side session ended.
    deadline = time.monotonic() + 2
    while not server.sessions[-1].closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.sessions[-1].closed


def test_short_delay_answers_normally(handler, connect) -> None:
    handler.answers["slow"] = Delay(0.3, [one_column("a", "int", 7)])
    cursor = connect(query_timeout=2).cursor()
    started = time.monotonic()
    assert tuples(cursor.execute("slow").fetchall()) == [(7,)]
    assert 0.3 <= time.monotonic() - started < 1.5


def test_long_delay_is_cancelled_by_attention_and_the_connection_survives(server, handler, connect) -> None:
    handler.answers["slower"] = Delay(5, [one_column("a", "int", 7)])
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect(query_timeout=1)
    started = time.monotonic()
    with pytest.raises(pyodbc.OperationalError, match="HYT00"):
        cnxn.cursor().execute("slower")
    assert 0.9 < time.monotonic() - started < 2.5
    started = time.monotonic()
    assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert time.monotonic() - started < 0.5  # the delayed answer was dropped, not queued
    assert server.errors == []


@pytest.mark.parametrize("rows", [0, 1, 1500])
def test_drop_mid_result_raises_instead_of_hanging(handler, connect, rows: int) -> None:
    full = [(f"row {i}".ljust(128), i) for i in range(2000)]  # 1500 rows: many unfinished packets
    result = ResultSet([Column("s", "nvarchar"), Column("n", "int")], full)
    handler.answers["drop"] = DropMidResult([result], rows)
    cursor = connect(query_timeout=2).cursor()
    started = time.monotonic()
    with pytest.raises(pyodbc.Error, match=r"EOF|08S01|[Cc]ommunication"):
        cursor.execute("drop")
        cursor.fetchall()
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    "data",
    [
        b"\x01\x02\x03 not tds at all",
        # A well-formed, final packet holding an unknown token.
        tds.HEADER.pack(tds.PacketType.TABULAR_RESULT, 1, 12, 51, 1, 0) + b"\x99\x01\x02\x03",
        # A header promising more bytes than ever come.
        tds.HEADER.pack(tds.PacketType.TABULAR_RESULT, 1, 4000, 51, 1, 0) + b"\x81",
        b"",
    ],
    ids=["raw", "bad-token", "short-packet", "nothing"],
)
def test_garbage_raises_and_the_server_keeps_serving(server, handler, connect, data: bytes) -> None:
    handler.answers["garbage"] = Garbage(data)
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    started = time.monotonic()
    with pytest.raises(pyodbc.Error):
        connect(query_timeout=2).cursor().execute("garbage").fetchall()
    assert time.monotonic() - started < 1.0
    assert tuples(connect().cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert server.errors == []


def test_truncated_answer_cuts_the_first_packet_in_half() -> None:
    reply: tds.Reply = [one_column("n", "int", *range(3000))]  # several packets
    packets = tds.encode_packets(tds.PacketType.TABULAR_RESULT, tds.encode_reply(reply), 51)
    sent = Truncated(reply).cut(packets)
    assert len(packets) > tds.PACKET_SIZE and packets.startswith(sent)
    assert tds.HEADER.unpack_from(sent)[2] == tds.PACKET_SIZE  # the header promises a full packet
    assert len(sent) == tds.HEADER.size + (tds.PACKET_SIZE - tds.HEADER.size) // 2
    assert Truncated(reply, keep=5).cut(packets) == packets[:5]  # even the header can be cut


def test_truncated_then_closed_raises_at_once_and_the_server_keeps_serving(server, handler, connect) -> None:
    handler.answers["cut"] = Truncated([one_column("n", "int", *range(3000))])
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    started = time.monotonic()
    with pytest.raises(pyodbc.Error, match=r"Unexpected EOF|08S01"):
        connect(query_timeout=2).cursor().execute("cut").fetchall()
    assert time.monotonic() - started < 1.0
    assert tuples(connect().cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert server.errors == []


def test_truncated_then_silent_times_out_and_breaks_the_connection(server, handler, connect) -> None:
    handler.answers["cut"] = Truncated([one_column("n", "int", *range(3000))], stall_seconds=30)
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    cnxn = connect(query_timeout=1)
    started = time.monotonic()
    with pytest.raises(pyodbc.OperationalError, match="HYT00"):
        cnxn.cursor().execute("cut").fetchall()
    assert 0.9 < time.monotonic() - started < 4.0
    with pytest.raises(pyodbc.Error):
        cnxn.cursor().execute("SELECT 1")
    assert tuples(connect().cursor().execute("SELECT 1").fetchall()) == [(1,)]


def test_drop_sessions_closes_every_connection_and_keeps_listening(server, handler, connect) -> None:
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    idle = [connect() for _ in range(3)]
    for cnxn in idle:
        assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    server.drop_sessions()
    assert all(session.closed for session in server.sessions)
    assert [t for t in server.threads() if "-conn-" in t.name] == []
    for cnxn in idle:  # each finds out only when it next sends something
        with pytest.raises(pyodbc.Error):
            cnxn.cursor().execute("SELECT 1")
    assert tuples(connect().cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert len(server.sessions) == 4


# --------------------------------------------------------------------------------------------------
# Concurrency and lifecycle
# --------------------------------------------------------------------------------------------------


def _echo(sql: str, session: Session) -> BatchAnswer:
    _, worker, index = sql.split()
    columns = [
        Column("worker", "int"),
        Column("i", "bigint"),
        Column("tag", "nvarchar"),
        Column("spid", "int"),
    ]
    return [ResultSet(columns, [(int(worker), int(index), f"{worker}:{index}", session.spid)])]


def test_twenty_connections_fifty_batches_each(server, handler) -> None:
    handler.fallback = _echo
    workers, batches = 20, 50
    failures: list[BaseException] = []
    results: dict[int, list[tuple]] = {}

    def work(worker: int) -> None:
        try:
            cnxn = pyodbc.connect(connection_string(server.port), timeout=3, autocommit=True)
            cnxn.timeout = 5
            cursor = cnxn.cursor()
            results[worker] = [tuple(cursor.execute(f"ECHO {worker} {i}").fetchone()) for i in range(batches)]
            cnxn.close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert failures == []
    assert sorted(results) == list(range(workers))
    for worker, rows in results.items():
        spids = {row[3] for row in rows}
        assert len(spids) == 1  # one connection per worker, never crossed
        spid = spids.pop()
        assert rows == [(worker, i, f"{worker}:{i}", spid) for i in range(batches)]
    assert len(server.sessions) == workers
    assert sum(s.batches for s in server.sessions) >= workers * batches
    assert server.errors == []


def _standin_threads(port: int) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"standin-{port}-")]


def test_stop_closes_client_sockets_and_leaves_no_threads() -> None:
    handler = ScriptedHandler()
    handler.answers["stuck"] = Hang()
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    server = StandInServer(handler)
    port = server.start()
    assert port == server.port > 0
    idle = pyodbc.connect(connection_string(port), timeout=3, autocommit=True)
    assert tuples(idle.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    busy = pyodbc.connect(connection_string(port), timeout=3, autocommit=True)
    busy.timeout = 8
    outcome: list[object] = []

    def run_stuck() -> None:
        started = time.monotonic()
        try:
            busy.cursor().execute("stuck")
            outcome.append("answered?!")
        except pyodbc.Error as exc:
            outcome.append((time.monotonic() - started, exc))

    waiter = threading.Thread(target=run_stuck)
    waiter.start()
    time.sleep(0.3)  # let the batch reach the Hang
    assert len(_standin_threads(port)) == 3  # acceptor + two connections

    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    assert _standin_threads(port) == []
    assert server.threads() == []

    waiter.join(5)
    [(elapsed, error)] = outcome
    assert elapsed < 2.0  # woken by the closed socket, not by its 8 s timeout
    assert isinstance(error, pyodbc.Error)
    with pytest.raises(pyodbc.Error):
        idle.cursor().execute("SELECT 1")
    with pytest.raises(pyodbc.Error):
        pyodbc.connect(connection_string(port), timeout=2, autocommit=True)
    for cnxn in (idle, busy):
        with contextlib.suppress(pyodbc.Error):
            cnxn.close()
    server.stop()  # idempotent


def test_context_manager_starts_and_stops() -> None:
    handler = ScriptedHandler()
    handler.answers["SELECT 1"] = [one_column("one", "int", 1)]
    with StandInServer(handler) as server:
        port = server.port
        cnxn = pyodbc.connect(connection_string(port), timeout=3, autocommit=True)
        assert tuples(cnxn.cursor().execute("SELECT 1").fetchall()) == [(1,)]
    assert _standin_threads(port) == []
    with contextlib.suppress(pyodbc.Error):
        cnxn.close()
