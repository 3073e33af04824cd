"""Subprocess-bound tests whose work runs ahead in a background thread while the rest of the suite runs.

Every rule test file runs under promtool 2.42 and 3.13.3, plain and rewritten with target labels: some
six minutes of promtool on one core, while the suite itself is one Python process on another core of a
two-core machine. Tests marked with `runs_ahead` are moved to the end of the run (conftest.py), their
subprocesses are started when collection finishes, one at a time, and each test then waits for its own
result and asserts on it exactly as before: a failing run still fails its test, naming file and release.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

Job = Callable[[], subprocess.CompletedProcess[str]]
# From a test's parameters: the key of its run and the run itself.
JobOf = Callable[..., tuple[str, Job]]
F = TypeVar("F", bound=Callable[..., Any])
THREAD_PREFIX = "runs-ahead"


def runs_ahead(job_of: JobOf) -> Callable[[F], F]:
    """Mark a parametrized test whose subprocess `job_of(**params)` may run ahead in the background."""

    def mark(test: F) -> F:
        test.background_job = job_of  # type: ignore[attr-defined]
        return test

    return mark


class Background:
    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._runs: dict[str, Future[subprocess.CompletedProcess[str]]] = {}

    def start(self, jobs: dict[str, Job]) -> None:
        if not jobs:
            return
        # One worker: one core for the subprocesses, the other for the suite.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=THREAD_PREFIX)
        self._runs = {key: self._pool.submit(job) for key, job in jobs.items()}

    def result(self, key: str, job: Job) -> subprocess.CompletedProcess[str]:
        """The run's result; run now if it was not started ahead (a test selected on its own)."""
        run = self._runs.get(key)
        return run.result() if run is not None else job()

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


BACKGROUND = Background()
