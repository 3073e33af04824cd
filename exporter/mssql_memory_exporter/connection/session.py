"""One persistent ODBC connection per target, used by one scrape at a time.

The driver's own timeouts are whole seconds and, when a server stops answering mid-stream, are not
always honoured promptly; the scrape therefore runs on a worker thread (workers.py) and the caller stops
waiting at its deadline. A worker still stuck in the driver keeps the target's lock, so a later scrape
reports the target down instead of opening a second connection behind its back.

A persistent connection can die while it sits idle between scrapes (the instance restarted, failed over,
or killed the session). The driver only notices when the next batch is sent, so a scrape that finds its
reused connection gone logs in again and sends the batch once more, if the deadline leaves time for it;
otherwise every restart would cost one false `mssql_up 0`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pyodbc

from .batch import ResultSet
from .prepared import Handles, PrepareRefused, execute_batch, prepare_batch, split_prepared
from .workers import WorkerPool

log = logging.getLogger(__name__)

OpenFn = Callable[[int], "pyodbc.Connection"]  # login timeout in whole seconds -> open connection

# A second login needs a whole-second login timeout; with less left it could only overrun the deadline.
RETRY_MIN_SECONDS = 1.0
# SQLSTATEs that say the connection itself is gone, whatever the driver.
_LINK_SQLSTATES = frozenset({"08001", "08003", "08004", "08007", "08S01", "08S02"})
# FreeTDS's own numbers for a failed socket: read failed, write failed, unexpected EOF (it reports them
# under 01000/HY000, not 08S01).
_FREETDS_SOCKET_ERRORS = frozenset({20004, 20006, 20017})
# FreeTDS's "Bad token from the server" comes as 08S01 too, but the server did answer (nonsense): the
# link was alive, and a second try would meet the same server.
_FREETDS_PROTOCOL_ERRORS = frozenset({20020})
# pyodbc formats a diagnostic as "[STATE] [vendor][component]text (native) (SQLFunction)".
_NATIVE_ERROR = re.compile(r"\((-?\d+)\) \(SQL\w+\)")
# "Could not find prepared statement with handle %d": the session lives on, its prepared handles do not.
HANDLE_NOT_FOUND = 8179


# Shared by every target: a worker stuck on one target's silent server leaves the others to new threads.
WORKERS = WorkerPool()


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
        self._stale = False  # set by discard_soon(); the lock's next holder drops the connection
        self._retired = False  # set by retire(): no scrape will use this connection after the current one
        self._handles = Handles()  # the batches prepared on this connection (prepared.py)
        self._plain = False  # SQL Server refused to prepare: the plain batch on this connection
        self._refusal_logged = False
        self._reading = False  # the current round trip got past sending (see _execute)
        self.last_sql = ""  # the batch of the latest scrape (the bench pairs scrapes with it)

    def run(self, sql: str, deadline: float) -> list[ResultSet]:
        """Send `sql` once and return every result set, or raise ScrapeFailed by `deadline` (monotonic)."""
        future: Future[list[ResultSet]] = Future()
        WORKERS.submit(functools.partial(self._work, sql, deadline, future), f"scrape-{self.name}")
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            raise ScrapeFailed("timed out waiting for SQL Server") from None

    def request_for(self, sql: str) -> str:
        """What a scrape of `sql` sends on this connection now (the handle once prepared); for the
        bench, which pairs each scrape with the same request sent by hand."""
        handle = None if self._plain else self._handles.get(sql)
        return sql if handle is None else execute_batch(handle)

    def close(self) -> None:
        with self._lock:
            self._discard()

    def retire(self) -> None:
        """Close the connection without waiting: now if no scrape holds it, else when that scrape ends
        (a scrape in flight during a reload finishes on it). Never blocks, so a worker stuck in the driver
        on a hung server cannot hold up a reload or a stop."""
        self._retired = True
        self.discard_soon()

    def discard_soon(self) -> None:
        """Drop the connection without waiting for the lock: a worker stuck in the driver may hold it
        for up to twice the query timeout, and the caller (an HTTP thread) must answer by its deadline.
        The connection goes now if it is free, else before the next scrape uses it."""
        self._stale = True
        if self._lock.acquire(blocking=False):
            try:
                self._drop_if_stale()
            finally:
                self._lock.release()

    def _work(self, sql: str, deadline: float, future: Future[list[ResultSet]]) -> None:
        if not self._lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            future.set_exception(ScrapeFailed("previous scrape of this target is still running"))
            return
        try:
            self._drop_if_stale()
            future.set_result(self._execute(sql, deadline))
        except ScrapeFailed as exc:
            future.set_exception(exc)
        except pyodbc.Error as exc:
            # A failed round trip leaves the session in an unknown state (half-read results, a dropped
            # socket raising the base pyodbc.Error): start the next scrape on a fresh connection.
            self._discard()
            future.set_exception(ScrapeFailed(describe(exc)))
        except Exception as exc:  # the worker must always settle the future, or the probe would wait
            self._discard()
            log.exception("unexpected error while scraping", extra={"target": self.name})
            future.set_exception(ScrapeFailed(f"unexpected error: {type(exc).__name__}"))
        finally:
            if self._retired:
                self._discard()
            self._lock.release()

    def _execute(self, sql: str, deadline: float) -> list[ResultSet]:
        reused = self._cnxn is not None
        self._reading = False
        self.last_sql = sql
        try:
            return self._round_trip(sql, deadline)
        except pyodbc.Error as exc:
            # Only a connection that sat idle can have died unnoticed, and only while sending: a fresh
            # one failing, a timeout, a SQL error or an answer broken off mid-stream would fail again
            # the same way. Nothing has been read yet and the batch is read-only, so it is safe to send
            # again (on the new connection it is prepared again).
            idle_death = reused and not self._reading and is_link_failure(exc)
            if not (idle_death and deadline - time.monotonic() >= RETRY_MIN_SECONDS):
                raise
            log.info(
                "connection lost while idle, logging in again",
                extra={"target": self.name, "err": describe(exc)},
            )
            self._discard()
            return self._round_trip(sql, deadline)

    def _round_trip(self, sql: str, deadline: float) -> list[ResultSet]:
        """One round trip: the batch by handle once prepared on this connection, else prepared now
        (prepared.py); the plain batch where SQL Server refused to prepare it."""
        self._log_in(deadline)
        if self._plain:
            return self._query(sql, deadline)
        handle = self._handles.get(sql)
        if handle is not None:
            try:
                return self._query(execute_batch(handle), deadline)
            except pyodbc.Error as exc:
                if native_error(exc) != HANDLE_NOT_FOUND:
                    raise
                self._forget_handles(exc)
        evicted = self._handles.to_evict()
        try:
            answer = self._query(prepare_batch(sql, evicted), deadline)
        except pyodbc.Error as exc:
            # sp_unprepare of a handle the server forgot: prepare again, dropping nothing.
            if not evicted or native_error(exc) != HANDLE_NOT_FOUND:
                raise
            self._forget_handles(exc)
            evicted = []
            answer = self._query(prepare_batch(sql, evicted), deadline)
        try:
            handle, own = split_prepared(answer)
        except PrepareRefused as exc:
            # A second round trip, once per connection: from now on the plain batch, as before.
            self._plain = True
            self._handles.clear()
            if not self._refusal_logged:
                self._refusal_logged = True
                log.warning(
                    "SQL Server refused to prepare the scrape batch; sending it in full on this connection",
                    extra={"target": self.name, "err": str(exc)},
                )
            return self._query(sql, deadline)
        self._handles.add(sql, handle, evicted)
        return own

    def _forget_handles(self, exc: pyodbc.Error) -> None:
        """The server no longer knows our handles (8179) but kept the session: prepare again in this
        same scrape, on this connection, instead of answering mssql_up 0 (issue 36)."""
        log.info(
            "SQL Server forgot the prepared scrape batch; preparing it again",
            extra={"target": self.name, "err": describe(exc)},
        )
        self._handles.clear()

    def _log_in(self, deadline: float) -> None:
        if self._cnxn is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ScrapeFailed("no time left to log in")
            self._cnxn = self._open(_whole_seconds(remaining))

    def _query(self, sql: str, deadline: float) -> list[ResultSet]:
        """Send `sql` on the open connection and read every result set."""
        assert self._cnxn is not None
        remaining = min(self._query_timeout, deadline - time.monotonic())
        if remaining <= 0:
            raise ScrapeFailed("no time left to query")
        self._cnxn.timeout = _whole_seconds(remaining)
        cursor = self._cnxn.cursor()
        try:
            cursor.execute(sql)
            self._reading = True  # the server answered: a failure from here on is not an idle death
            return fetch_all(cursor)
        finally:
            with contextlib.suppress(pyodbc.Error):
                cursor.close()

    def _drop_if_stale(self) -> None:
        if self._stale:
            self._stale = False
            self._discard()

    def _discard(self) -> None:
        if self._cnxn is not None:
            # Closing a dead connection may fail; it is gone either way.
            with contextlib.suppress(pyodbc.Error):
                self._cnxn.close()
            self._cnxn = None
        # Handles live in the session: a new connection (reconnect, failover) prepares again.
        self._handles.clear()
        self._plain = False


def native_error(exc: pyodbc.Error) -> int | None:
    """SQL Server's (or the driver's) error number in a pyodbc error, when it carries one."""
    match = _NATIVE_ERROR.search(str(exc.args[1])) if len(exc.args) >= 2 else None
    return int(match.group(1)) if match else None


def is_link_failure(exc: pyodbc.Error) -> bool:
    """True when the error says the connection is gone, not that the server refused or was slow."""
    if len(exc.args) < 2:
        return False
    state, message = str(exc.args[0]), str(exc.args[1])
    if state.startswith("HYT"):  # login or query timeout: the server is there but slow
        return False
    match = _NATIVE_ERROR.search(message)
    native = int(match.group(1)) if match else None
    if native in _FREETDS_PROTOCOL_ERRORS:
        return False
    if state in _LINK_SQLSTATES or native in _FREETDS_SOCKET_ERRORS:
        return True
    # FreeTDS 1.3 on a socket the server closed while idle: the write succeeds, the first read sees EOF,
    # and the driver reports "Unknown error" with native error 0 (measured with TDSDUMP). A SQL Server
    # error always has a non-zero number, so this cannot be one.
    return state == "HY000" and native == 0


def describe(exc: pyodbc.Error) -> str:
    """pyodbc errors carry (sqlstate, driver message); keep both, they never contain the password."""
    parts = [str(arg) for arg in exc.args]
    return " ".join(parts) if parts else type(exc).__name__
