"""The threads that answer requests: at most a limit, the rest of a burst waiting in a queue.

The stdlib's ThreadingHTTPServer starts a thread per accepted connection, so a burst of 2,000 probes
started 2,000 threads, and each idle keep-alive connection held one for 90 s. Here a request reaches a
worker only once its head has arrived whole (connections.py), and a worker holds it only while answering;
a burst beyond the limit waits in the queue (unbounded: nothing is refused) for the next free worker.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], None]


class BoundedPool:
    """Daemon threads, started as jobs arrive while none is idle, up to `limit()` (read at each start, so
    a reloaded config's limit applies to the next thread). Threads stay until close(): a burst's threads
    serve the next burst."""

    def __init__(self, limit: Callable[[], int], name: str) -> None:
        self._limit = limit
        self._name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # One token per worker that finished a job and waits for another: a job submitted while a token
        # is free is left to that worker instead of starting a thread (as ThreadPoolExecutor does).
        self._idle = threading.Semaphore(0)
        self._threads = 0
        self._closed = False
        self.peak = 0  # most threads at once, for the bench and tests

    @property
    def threads(self) -> int:
        with self._lock:
            return self._threads

    def submit(self, job: Job) -> None:
        self._jobs.put(job)
        if self._idle.acquire(blocking=False):
            return
        with self._lock:
            if self._closed or self._threads >= max(1, self._limit()):
                return  # the job waits for a busy worker
            self._threads += 1
            self.peak = max(self.peak, self._threads)
            number = self._threads
        try:
            threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True).start()
        except RuntimeError:  # no thread to be had (a process limit): a running worker takes the job
            with self._lock:
                self._threads -= 1
            log.warning("cannot start a thread to answer requests", extra={"threads": number - 1})

    def close(self) -> None:
        """Workers finish the job they run (and those queued before) and exit."""
        with self._lock:
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(None)

    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                try:
                    job()
                except Exception:  # a job reports its own errors; this only keeps the worker alive
                    log.exception("unhandled error in an HTTP worker")
                self._idle.release()
        finally:
            with self._lock:
                self._threads -= 1
