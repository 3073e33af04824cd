"""The stand-in answering the exporter in process: the exporter's own Scraper and TargetConnection (the
prepared batch, routing, cadences, collectors) over a connection that hands each batch to the stand-in's
handler instead of FreeTDS and a socket.

Collector facts are facts about rows, so their tests use this (`offline_standin`, conftest.py) and run in
milliseconds in the unit tier; what only TDS shows (login, the batch on the wire, faults of the link,
the strict SQL checks that need sqlfluff) keeps the `standin` fixture and the integration tier.

What the wire would do to a value is done here too: every row goes through the stand-in's TDS row
encoder (a value its column type cannot carry fails as it would over TDS), then comes back as pyodbc
returns it (float columns as float, bit as bool, datetime to SQL Server's 1/300 s).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyodbc
import pytest
from mssql_memory_exporter.config import ExporterConfig, TargetConfig
from mssql_memory_exporter.connection.login_backoff import LoginBackoff

from tests.standin import rpc
from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import Session
from tests.standin.tds import Column, ResultSet, SqlError, datetime_to_wire, encode_row

SCRAPER_MODULE = "mssql_memory_exporter.scrape.scraper"
# Ports no real stand-in listens on (a real one's port comes from the kernel, above 1023): the patched
# login looks the handler up by host and port, so two offline stand-ins in one test are two servers.
_PORTS = itertools.count(1)
# Faults only the TDS server can play; a test flipping one needs the `standin` fixture.
_WIRE_FAULTS = (
    "bad_login",
    "hang_connect",
    "hang_login",
    "hang_batch",
    "delay_seconds",
    "drop_mid_result",
    "garbage",
    "truncated",
    "truncated_stall",
)


def _as_pyodbc_returns(column: Column, value: object) -> object:
    if value is None:
        return None
    if column.type == "float":
        return float(value)  # type: ignore[arg-type]
    if column.type == "bit":
        return bool(value)
    if column.type == "datetime":
        assert isinstance(value, dt.datetime)
        days, ticks = datetime_to_wire(value)
        return dt.datetime(1900, 1, 1) + dt.timedelta(days=days, milliseconds=round(ticks * 10 / 3))
    return value


def _through_the_wire(result: ResultSet) -> tuple[tuple[str, ...], list[tuple[object, ...]]]:
    rows = []
    for row in result.rows:
        encode_row(result.columns, row)  # raises as the server would on a value its column cannot carry
        rows.append(tuple(_as_pyodbc_returns(c, v) for c, v in zip(result.columns, row, strict=True)))
    return tuple(c.name for c in result.columns), rows


def _sql_error(error: SqlError) -> pyodbc.Error:
    # pyodbc's shape: (sqlstate, "[state] [vendor][component]text (native) (SQLFunction)").
    message = f"[42000] [FreeTDS][SQL Server]{error.message} ({error.number}) (SQLExecDirectW)"
    return pyodbc.ProgrammingError("42000", message)


class _Cursor:
    """What TargetConnection uses of a pyodbc cursor: execute, description, fetchall, nextset, close."""

    def __init__(self, connection: OfflineConnection) -> None:
        self._connection = connection
        self._items: list[ResultSet | SqlError] = []

    def execute(self, sql: str) -> None:
        self._items = list(self._connection.answer(sql))
        self._skip_to_a_result()

    def _skip_to_a_result(self) -> None:
        if self._items and isinstance(self._items[0], SqlError):
            raise _sql_error(self._items[0])

    @property
    def description(self) -> tuple[tuple[str], ...] | None:
        if not self._items:
            return None
        first = self._items[0]
        assert isinstance(first, ResultSet)
        return tuple((c.name,) for c in first.columns)

    def fetchall(self) -> list[tuple[object, ...]]:
        first = self._items[0]
        assert isinstance(first, ResultSet)
        return _through_the_wire(first)[1]

    def nextset(self) -> bool:
        self._items = self._items[1:]
        self._skip_to_a_result()
        return bool(self._items)

    def close(self) -> None:
        self._items = []


class OfflineConnection:
    """One login's session with the handler, as the stand-in's TDS server keeps it (server.py):
    the exporter's sp_prepexec / sp_execute wrappers (prepared.py) keep a handle per connection."""

    def __init__(self, handler: ScenarioHandler) -> None:
        self.handler = handler
        self.session = Session(spid=51)
        self.timeout = 0

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def close(self) -> None:
        self.session.closed = True

    def answer(self, sql: str) -> list[ResultSet | SqlError]:
        session = self.session
        handle = rpc.parse_execute_batch(sql)
        if handle is not None:
            statement = session.prepared.get(handle)
            if statement is None:
                return [SqlError(8179, f"Could not find prepared statement with handle {handle}.")]
            return self._ask(statement)
        call = rpc.parse_prepare_batch(sql)
        if call is None:
            return self._ask(sql)
        for gone in call.unprepare:
            if session.prepared.pop(gone, None) is None:
                return [SqlError(8179, f"Could not find prepared statement with handle {gone}.")]
            session.unprepares += 1
        handle_columns = [Column("section", "nvarchar"), Column("handle", "int")]
        refusal = self.handler.on_prepare(call.statement, session)
        if refusal is not None:
            error_columns = [Column("section", "nvarchar"), Column("error_number", "int")]
            error_columns.append(Column("error_message", "nvarchar"))
            refused = ResultSet(error_columns, [(call.refused_tag, refusal.number, refusal.message)])
            return [refused, ResultSet(handle_columns, [(call.handle_tag, None)])]
        new = session.next_handle
        session.next_handle += 1
        session.prepared[new] = call.statement
        session.prepares += 1
        return [*self._ask(call.statement), ResultSet(handle_columns, [(call.handle_tag, new)])]

    def _ask(self, sql: str) -> list[ResultSet | SqlError]:
        faults = self.handler.faults
        flipped = [name for name in _WIRE_FAULTS if getattr(faults, name)]
        if flipped:
            raise AssertionError(f"{flipped[0]} is a fault of the wire: use the standin fixture (TDS)")
        reply = self.handler.on_batch(sql, self.session)
        assert isinstance(reply, list), reply
        return reply


@dataclass
class OfflineStandIn:
    """The `standin` fixture's StandIn without a server: same scenario, clock, handler and config."""

    handler: ScenarioHandler
    instance: Instance
    clock: Clock
    port: int
    connections: list[OfflineConnection]

    def target_yaml(self, name: str = "standin", **overrides: object) -> dict[str, object]:
        from tests.conftest import StandIn

        return StandIn.target_yaml(self, name, **overrides)  # type: ignore[arg-type]

    def config(self, **overrides: object) -> ExporterConfig:
        from tests.conftest import make_config

        return make_config({"standin": self.target_yaml(**overrides)})


@pytest.fixture
def offline_standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., OfflineStandIn]]:
    """`offline_standin("memory-pressure")`: a stand-in the exporter's Scrapers made in this test reach
    in process (login patched to an OfflineConnection); no socket, no sqlfluff, no driver."""
    from tests.conftest import TEST_PASSWORD

    by_port: dict[int, OfflineStandIn] = {}

    def start(scenario: str = "healthy-oltp", manual_clock: bool = True) -> OfflineStandIn:
        clock = Clock(manual=manual_clock)
        instance = Instance(Scenario.load(scenario), clock)
        # strict=False: the strict T-SQL checks parse with sqlfluff for seconds; test_standin_strict.py
        # holds them, over TDS.
        handler = ScenarioHandler(instance, user="exporter", password=TEST_PASSWORD, strict=False)
        s = OfflineStandIn(handler, instance, clock, next(_PORTS), [])
        by_port[s.port] = s
        return s

    def login_opener(
        target: TargetConfig, backoff: LoginBackoff, kerberos_keeper: Callable[[], object]
    ) -> Callable[[int], OfflineConnection]:
        """The scraper's login_opener, same signature: the target's port names the offline stand-in."""

        def open_connection(login_timeout: int) -> OfflineConnection:
            s = by_port.get(target.port)
            if s is None or target.host != "127.0.0.1":
                raise pyodbc.OperationalError("08001", f"no offline stand-in at {target.host}:{target.port}")
            connection = OfflineConnection(s.handler)
            s.handler.logins += 1
            s.connections.append(connection)
            return connection

        return open_connection

    monkeypatch.setattr(f"{SCRAPER_MODULE}.login_opener", login_opener)
    yield start
