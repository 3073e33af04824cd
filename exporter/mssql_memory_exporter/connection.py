"""One persistent ODBC connection per target, used by one scrape at a time.

The driver's own timeouts are whole seconds and, when a server stops answering mid-stream, are not
always honoured promptly; the scrape therefore runs on a worker thread and the caller stops waiting at
its deadline. A worker still stuck in the driver keeps the target's lock, so a later scrape reports the
target down instead of opening a second connection behind its back.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pyodbc

from .batch import ResultSet

log = logging.getLogger(__name__)

OpenFn = Callable[[int], "pyodbc.Connection"]  # login timeout in whole seconds -> open connection


class ScrapeFailed(Exception):
    """The target could not be read in time; the message is safe to log (no secrets)."""


def _whole_seconds(seconds: float) -> int:
    # 0 means "no timeout" to ODBC, so never round down to it.
    return max(1, math.ceil(seconds))


def fetch_all(cursor: pyodbc.Cursor) -> list[ResultSet]:
    result_sets: list[ResultSet] = []
    while True:
        if cursor.description is not None:
            columns = tuple(col[0] for col in cursor.description)
            result_sets.append(ResultSet(columns, [tuple(row) for row in cursor.fetchall()]))
        if not cursor.nextset():
            return result_sets


class TargetConnection:
    def __init__(self, name: str, open_fn: OpenFn, query_timeout: float) -> None:
        self.name = name
        self._open = open_fn
        self._query_timeout = query_timeout
        self._lock = threading.Lock()
        self._cnxn: pyodbc.Connection | None = None

    def run(self, sql: str, deadline: float) -> list[ResultSet]:
        """Send `sql` once and return every result set, or raise ScrapeFailed by `deadline` (monotonic)."""
        future: Future[list[ResultSet]] = Future()
        worker = threading.Thread(
            target=self._work, args=(sql, deadline, future), name=f"scrape-{self.name}", daemon=True
        )
        worker.start()
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise ScrapeFailed("timed out waiting for SQL Server") from None

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _work(self, sql: str, deadline: float, future: Future[list[ResultSet]]) -> None:
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            future.set_exception(ScrapeFailed("previous scrape of this target is still running"))
            return
        try:
            future.set_result(self._execute(sql, deadline))
        except ScrapeFailed as exc:
            future.set_exception(exc)
        except pyodbc.Error as exc:
            # A failed round trip leaves the session in an unknown state (half-read results, a dropped
            # socket raising the base pyodbc.Error): start the next scrape on a fresh connection.
            self._discard()
            future.set_exception(ScrapeFailed(_describe(exc)))
        except Exception as exc:  # the worker must always settle the future, or the probe would wait
            self._discard()
            log.exception("unexpected error while scraping", extra={"target": self.name})
            future.set_exception(ScrapeFailed(f"unexpected error: {type(exc).__name__}"))
        finally:
            self._lock.release()

    def _execute(self, sql: str, deadline: float) -> list[ResultSet]:
        if self._cnxn is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ScrapeFailed("no time left to log in")
            self._cnxn = self._open(_whole_seconds(remaining))
        remaining = min(self._query_timeout, deadline - time.monotonic())
        if remaining <= 0:
            raise ScrapeFailed("no time left to query")
        self._cnxn.timeout = _whole_seconds(remaining)
        cursor = self._cnxn.cursor()
        try:
            cursor.execute(sql)
            return fetch_all(cursor)
        finally:
            cursor.close()

    def _discard(self) -> None:
        if self._cnxn is not None:
            # Closing a dead connection may fail; it is gone either way.
            with contextlib.suppress(pyodbc.Error):
                self._cnxn.close()
            self._cnxn = None


def _describe(exc: pyodbc.Error) -> str:
    """pyodbc errors carry (sqlstate, driver message); keep both, they never contain the password."""
    parts = [str(arg) for arg in exc.args]
    return " ".join(parts) if parts else type(exc).__name__
