"""The threads that answer requests: at most a limit, the rest of a burst waiting in a queue.

The stdlib's ThreadingHTTPServer starts a thread per accepted connection, so a burst of 2,000 probes
started 2,000 threads, and each idle keep-alive connection held one for 90 s. Here a request reaches a
worker only once its head has arrived whole (connections.py), and a worker holds it only while answering;
a burst beyond the limit waits in the queue (unbounded: nothing is refused) for the next free worker.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

log = logging.getLogger(__name__)

Job = Callable[[], None]


# As the scrape workers (workers.py): outlasts Prometheus' default scrape interval, so a steady load
# keeps its threads, while a burst's extra ones go away.
IDLE_SECONDS = 120.0


class BoundedPool:
    """Daemon threads, started as jobs arrive while none is idle, up to `limit()` (read at each start, so
    a reloaded config's limit applies to the next thread). A thread idle for `idle_seconds` exits."""

    def __init__(self, limit: Callable[[], int], name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self._limit = limit
        self._name = name
        self._idle_seconds = idle_seconds
        self._cond = threading.Condition()
        self._jobs: deque[Job] = deque()
        self._threads = 0
        self._busy = 0
        self._closed = False
        self._started = 0
        self.peak = 0  # most threads at once, for the bench and tests

    def counts(self) -> tuple[int, int]:
        """(busy, idle) threads."""
        with self._cond:
            return self._busy, self._threads - self._busy

    def submit(self, job: Job) -> None:
        with self._cond:
            self._jobs.append(job)
            # A thread that runs no job is waiting, or about to look at the queue: it takes a job, so
            # start one only when the queue holds more jobs than such threads.
            if self._threads - self._busy >= len(self._jobs):
                self._cond.notify()
                return
            if self._closed or self._threads >= max(1, self._limit()):
                return  # the job waits for a busy thread
            self._threads += 1
            self._started += 1
            self.peak = max(self.peak, self._threads)
            number = self._started
        try:
            threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True).start()
        except RuntimeError:  # no thread to be had (a process limit): a running worker takes the job
            with self._cond:
                self._threads -= 1
            log.warning("cannot start a thread to answer requests", extra={"threads": self._threads})

    def wait_idle(self, timeout: float) -> bool:
        """Waits until no job is queued or running, at most `timeout` seconds; True if it got there."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._jobs and not self._busy, timeout)

    def close(self) -> None:
        """Threads finish their job and those queued before, then exit."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _work(self) -> None:
        with self._cond:
            while True:
                if self._jobs:
                    job = self._jobs.popleft()
                    self._busy += 1
                    self._cond.release()
                    try:
                        job()
                    except Exception:  # a job reports its own errors; this only keeps the thread alive
                        log.exception("unhandled error in an HTTP worker")
                    finally:
                        self._cond.acquire()
                        self._busy -= 1
                        if not self._busy and not self._jobs:
                            self._cond.notify_all()  # wait_idle
                    continue
                if self._closed:
                    break
                if not self._cond.wait(self._idle_seconds) and not self._jobs:
                    break  # idle for idle_seconds
            self._threads -= 1
