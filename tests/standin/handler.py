"""The stand-in's brain: logins, faults on demand, strict SQL checks, then the scenario's answers."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from .scenario import Instance
from .tds import Column, Delay, DropMidResult, Garbage, Hang, LoginInfo, Reply, ResultSet, SqlError, Truncated
from .tsql import Interpreter, Unsupported

# What FreeTDS and pyodbc send on their own after login; SQL Server answers these with no result set.
_HOUSEKEEPING = re.compile(r"^\s*(SET\s+[A-Z_]+\s+\S+\s*;?\s*)+$", re.IGNORECASE)
# pyodbc asks for the type info of a few ODBC types on a connection's first statement, to learn their
# maximum sizes; FreeTDS turns SQLGetTypeInfo into this procedure call.
_TYPE_INFO = re.compile(r"^\s*(?:EXEC\s+)?sp_datatype_info_100\s+(-?\d+)\s*,\s*\d+\s*;?\s*$", re.IGNORECASE)
_TYPE_INFO_COLUMNS = [
    ("TYPE_NAME", "nvarchar"),
    ("DATA_TYPE", "int"),
    ("PRECISION", "int"),
    ("LITERAL_PREFIX", "nvarchar"),
    ("LITERAL_SUFFIX", "nvarchar"),
    ("CREATE_PARAMS", "nvarchar"),
    ("NULLABLE", "int"),
    ("CASE_SENSITIVE", "int"),
    ("SEARCHABLE", "int"),
    ("UNSIGNED_ATTRIBUTE", "int"),
    ("MONEY", "int"),
    ("AUTO_INCREMENT", "int"),
    ("LOCAL_TYPE_NAME", "nvarchar"),
    ("MINIMUM_SCALE", "int"),
    ("MAXIMUM_SCALE", "int"),
    ("SQL_DATA_TYPE", "int"),
    ("SQL_DATETIME_SUB", "int"),
    ("NUM_PREC_RADIX", "int"),
    ("INTERVAL_PRECISION", "int"),
    ("USERTYPE", "int"),
]
# ODBC type code -> (SQL Server type name, column size), as SQL Server 2019 reports them.
_TYPES = {12: ("varchar", 8000), -9: ("nvarchar", 4000), -3: ("varbinary", 8000), 93: ("datetime", 23)}


@dataclass
class Faults:
    """Switches a test flips to make the stand-in misbehave. All off is a healthy server."""

    bad_login: bool = False  # every login fails with 18456
    hang_connect: bool = False  # accept TCP, never answer PRELOGIN
    hang_login: bool = False  # answer PRELOGIN, never answer LOGIN7
    hang_batch: bool = False  # log in fine, never answer the batch
    delay_seconds: float = 0.0  # answer the batch only after this long
    drop_mid_result: bool = False  # close the socket after the first rows of the first result set
    garbage: bool = False  # answer the batch with bytes that are not TDS
    truncated: bool = False  # send half of the answer's first packet, then close the socket
    truncated_stall: bool = False  # send half of the answer's first packet, then fall silent
    refuse_prepare: bool = False  # sp_prepexec of the scrape batch fails (8180), as SQL Server may


class ScenarioHandler:
    def __init__(
        self,
        instance: Instance,
        user: str = "exporter",
        password: str = "stand-in-password",
        strict: bool = True,
    ) -> None:
        self.instance = instance
        self.user = user
        self._password = password
        self.strict = strict
        self.faults = Faults()
        self.interpreter = Interpreter(instance)
        self.exporter_batches = 0  # batches that were not driver housekeeping
        self.logins = 0  # successful
        self.login_attempts = 0  # every LOGIN7 received, refused ones included
        self.sql_seen: list[str] = []
        self._lock = threading.Lock()
        # Strict verdicts by batch text: a prepared batch is checked when prepared, not per execute.
        self._checked: dict[tuple[str, str | None, str], SqlError | None] = {}
        if strict:
            _catalog()  # pay for importing sqlfluff now, not inside the first scrape's query timeout

    @property
    def server_version(self) -> str | None:
        """The release (with service pack) the catalog's `since` fields are compared with."""
        from .sqlcheck import release_of

        version = self.instance.scenario.properties.get("ProductVersion")
        return release_of(str(version)) if version else None

    def on_connect(self) -> Hang | None:
        return Hang() if self.faults.hang_connect else None

    def set_password(self, password: str) -> None:
        """The password the next logins must send (tests of awkward passwords and of changes)."""
        self._password = password

    def on_login(self, login: LoginInfo) -> SqlError | Hang | None:
        with self._lock:
            self.login_attempts += 1
        if self.faults.hang_login:
            return Hang()
        # An integrated login was checked by the server's SSPI acceptor (sspi.py) before it got here.
        wrong = login.user != self.user or login.password != self._password
        sql_login_wrong = not login.integrated and wrong
        if self.faults.bad_login or sql_login_wrong:
            return SqlError(18456, f"Login failed for user '{login.user}'.", severity=14)
        with self._lock:
            self.logins += 1
        return None

    def on_batch(
        self, sql: str, session: object
    ) -> Reply | Hang | Delay | DropMidResult | Garbage | Truncated:
        if _HOUSEKEEPING.match(sql):
            return []
        if (type_info := _TYPE_INFO.match(sql)) is not None:
            return [_type_info(int(type_info.group(1)))]
        with self._lock:
            self.exporter_batches += 1
            self.sql_seen.append(sql)
        if self.faults.hang_batch:
            return Hang()
        if self.faults.garbage:
            return Garbage(b"\x04\x01\x00\x30\x00\x00\x01\x00" + b"\xde\xad\xbe\xef" * 10)
        reply = self.answer(sql)
        if self.faults.drop_mid_result:
            return DropMidResult(reply, rows=1)
        if self.faults.truncated:
            return Truncated(reply)
        if self.faults.truncated_stall:
            return Truncated(reply, stall_seconds=3600)
        if self.faults.delay_seconds > 0:
            return Delay(self.faults.delay_seconds, reply)
        return reply

    def on_prepare(self, sql: str, session: object) -> SqlError | None:
        """SQL Server's refusal to prepare `sql` when the fault asks for one (stand-in server hook)."""
        if self.faults.refuse_prepare:
            return SqlError(8180, "Statement(s) could not be prepared.")
        return None

    def check_ahead(self, sql: str) -> None:
        """Check `sql` now (sqlfluff: seconds) so that its first arrival is answered at once."""
        if self.strict:
            self._verdict(sql)

    def _verdict(self, sql: str) -> SqlError | None:
        key = (sql, self.server_version, self.instance.platform)
        if key not in self._checked:
            self._checked[key] = _check(*key)
        return self._checked[key]

    def answer(self, sql: str) -> Reply:
        if self.strict:
            problem = self._verdict(sql)
            if problem is not None:
                return [problem]
        try:
            return self.interpreter.run(sql)
        except Unsupported as exc:
            return [SqlError(102, f"The stand-in cannot interpret this batch: {exc}", severity=15)]


def _check(sql: str, server_version: str | None, platform: str) -> SqlError | None:
    from .sqlcheck import check_batch  # heavy (sqlfluff); loaded on first use

    problem = check_batch(sql, _catalog(), server_version=server_version, platform=platform)
    if problem is None:
        return None
    return SqlError(problem.number, problem.message, severity=problem.severity, line=problem.line)


_CATALOG = None


def _catalog() -> object:
    global _CATALOG
    if _CATALOG is None:
        from .sqlcheck import load_catalog

        _CATALOG = load_catalog()
    return _CATALOG


def _type_info(odbc_type: int) -> ResultSet:
    columns = [Column(name, kind) for name, kind in _TYPE_INFO_COLUMNS]
    known = _TYPES.get(odbc_type)
    if known is None:
        return ResultSet(columns, [])
    name, size = known
    quoted = "'" if odbc_type in (12, -9, 93) else None
    row = (
        name,
        odbc_type,
        size,
        quoted,
        quoted,
        None,
        1,
        0,
        3,
        None,
        0,
        None,
        name,
        None,
        None,
        odbc_type,
        None,
        None,
        None,
        0,
    )
    return ResultSet(columns, [row])
