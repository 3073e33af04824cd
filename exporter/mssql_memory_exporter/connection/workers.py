"""Reusable daemon threads for the scrapes' round trips.

Each round trip runs off the HTTP thread so the caller can stop waiting at its deadline (connection.py).
Starting a new thread for every scrape cost about 0.26 ms of CPU per scrape (0.81 against 0.55 ms per
round trip; docs/performance.md, finding 6), so finished workers wait for the next job instead.
A job never waits for a busy worker: one stuck in the driver on a silent server must not hold up another
target, so the pool starts a thread whenever none is idle, and a thread idle for `idle_seconds` exits.
A fleet probed at 15 s intervals needs only as many threads as probes overlap. The default idle time
outlasts Prometheus' default scrape interval (1 minute), so one target scraped alone keeps its worker.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

IDLE_NAME = "scrape-idle"


class WorkerPool:
    def __init__(self, idle_seconds: float = 120.0) -> None:
        self._idle_seconds = idle_seconds
        self._lock = threading.Lock()
        # Last in, first out: the most recently used worker is the one whose stack is still warm.
        self._idle: list[_Worker] = []
        self._threads = 0

    def submit(self, job: Callable[[], None], name: str) -> None:
        """Run `job` on a worker named `name` while it runs; never blocks on busy workers."""
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            with self._lock:
                self._threads += 1
            try:
                _Worker(self, job, name).start()
            except BaseException:  # no thread to be had (a process limit): the count must not lie
                with self._lock:
                    self._threads -= 1
                raise
        else:
            worker.give(job, name)

    def counts(self) -> tuple[int, int]:
        """(busy, idle) workers. A busy one that stays busy is stuck in the driver on a silent server."""
        with self._lock:
            return self._threads - len(self._idle), len(self._idle)

    def _park(self, worker: _Worker) -> None:
        with self._lock:
            self._idle.append(worker)

    def _leave(self, worker: _Worker) -> bool:
        """True if the worker may exit: nobody took it from the idle list while its wait ran out."""
        with self._lock:
            if worker in self._idle:
                self._idle.remove(worker)
                self._threads -= 1
                return True
            return False


class _Worker(threading.Thread):
    def __init__(self, pool: WorkerPool, job: Callable[[], None], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._pool = pool
        self._first: Callable[[], None] | None = job
        self._jobs: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()

    def give(self, job: Callable[[], None], name: str) -> None:
        self._jobs.put((job, name))

    def run(self) -> None:
        job = self._first
        self._first = None
        while job is not None:
            try:
                job()
            except BaseException:  # a job settles its own result; anything reaching here is a bug
                log.exception("scrape worker job failed", extra={"worker": self.name})
            job = self._next()

    def _next(self) -> Callable[[], None] | None:
        # Renamed while idle so that a thread named after a target is one still working for it.
        self.name = IDLE_NAME
        self._pool._park(self)
        try:
            job, name = self._jobs.get(timeout=self._pool._idle_seconds)
        except queue.Empty:
            if self._pool._leave(self):
                return None
            job, name = self._jobs.get()  # taken from the idle list just as the wait ran out
        self.name = name
        return job
