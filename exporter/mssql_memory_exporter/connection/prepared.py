"""The scrape batch prepared once per connection and executed by handle afterwards.

Why T-SQL and not ODBC's SQLPrepare: pyodbc binds parameters again on every execute and FreeTDS
1.3.17 marks a statement for re-preparing on every bind, so through pyodbc each execute is
sp_unprepare + sp_prepexec with the full text again (measured against the stand-in, which logs the
RPCs). Calling sp_prepexec and sp_execute from a plain batch keeps the handle in our hands: the first
scrape of a connection sends the batch text once, inside sp_prepexec, and reads the handle back in a
tagged result set; later scrapes send `EXEC sys.sp_execute <handle>` (a few dozen bytes). Still one
round trip per scrape.

Microsoft documents sp_prepexec with a parameterised statement, not with a batch holding TRY/CATCH and
sp_executesql. A prepare SQL Server refuses comes back as a tagged error row (TRY/CATCH around it), and
the connection then sends the plain batch for the rest of its life (connection.py).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from ..collectors.base import sql_literal
from .batch import ResultSet

HANDLE_TAG = "prepared_handle"
REFUSED_TAG = "prepare_refused"
# Handles kept per connection: alternating collect[] sets each keep theirs; beyond this the least
# recently used one is unprepared on the server, in the same round trip as the next prepare.
MAX_HANDLES = 8


def prepare_batch(sql: str, evicted: Iterable[int] = ()) -> str:
    drops = "".join(f"EXEC sys.sp_unprepare {int(h)};\n" for h in evicted)
    return (
        "SET NOCOUNT ON;\n"
        f"{drops}"
        "DECLARE @handle int;\n"
        "BEGIN TRY\n"
        f"    EXEC sys.sp_prepexec @handle OUTPUT, NULL, {sql_literal(sql)};\n"
        "END TRY\n"
        "BEGIN CATCH\n"
        f"    SELECT {sql_literal(REFUSED_TAG)} AS section, ERROR_NUMBER() AS error_number,"
        " ERROR_MESSAGE() AS error_message;\n"
        "END CATCH;\n"
        f"SELECT {sql_literal(HANDLE_TAG)} AS section, @handle AS handle;\n"
    )


def execute_batch(handle: int) -> str:
    return f"EXEC sys.sp_execute {int(handle)};"


class PrepareRefused(Exception):
    """SQL Server would not prepare the batch; the message is SQL Server's (no secrets)."""


def split_prepared(result_sets: list[ResultSet]) -> tuple[int, list[ResultSet]]:
    """(handle, the batch's own result sets) from the answer of prepare_batch, or PrepareRefused."""
    own: list[ResultSet] = []
    handle: int | None = None
    refusal = ""
    for rs in result_sets:
        tag = rs.rows[0][0] if rs.rows and rs.columns and rs.columns[0] == "section" else None
        if tag == HANDLE_TAG:
            value = rs.rows[0][1]
            handle = value if isinstance(value, int) else None
        elif tag == REFUSED_TAG:
            refusal = f"{rs.rows[0][1]}: {rs.rows[0][2]}"
        else:
            own.append(rs)
    if handle is None or refusal:
        raise PrepareRefused(refusal or "no handle came back")
    return handle, own


class Handles:
    """The prepared handles of one connection, least recently used first."""

    def __init__(self, limit: int = MAX_HANDLES) -> None:
        self._limit = limit
        self._by_sql: OrderedDict[str, int] = OrderedDict()

    def get(self, sql: str) -> int | None:
        handle = self._by_sql.get(sql)
        if handle is not None:
            self._by_sql.move_to_end(sql)
        return handle

    def to_evict(self) -> list[int]:
        """Handles to unprepare so that one more fits (not yet forgotten: see evicted())."""
        extra = len(self._by_sql) + 1 - self._limit
        return list(self._by_sql.values())[: max(0, extra)]

    def add(self, sql: str, handle: int, evicted: Iterable[int]) -> None:
        gone = set(evicted)
        for key in [k for k, h in self._by_sql.items() if h in gone]:
            del self._by_sql[key]
        self._by_sql[sql] = handle

    def __len__(self) -> int:
        return len(self._by_sql)

    def clear(self) -> None:
        self._by_sql.clear()
