"""The scrape worker pool: threads are reused, a busy worker never holds up a new job, idle ones exit."""

from __future__ import annotations

import logging
import threading
import time

from mssql_memory_exporter.connection.workers import IDLE_NAME, WorkerPool

from tests.failure_checks import eventually


def idle(pool: WorkerPool) -> int:
    return pool.counts()[1]


def run_and_wait(pool: WorkerPool, name: str = "scrape-a") -> tuple[int, str]:
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def job() -> None:
        seen.append((threading.get_ident(), threading.current_thread().name))
        done.set()

    pool.submit(job, name)
    assert done.wait(5), "job did not run"
    return seen[0]


def test_sequential_jobs_reuse_one_thread_named_after_the_job():
    pool = WorkerPool(idle_seconds=30)
    first = run_and_wait(pool, "scrape-a")
    assert eventually(lambda: idle(pool) == 1, 5)
    idents = {run_and_wait(pool, f"scrape-{i}")[0] for i in range(50)}
    assert idents == {first[0]}
    assert first[1] == "scrape-a"
    assert run_and_wait(pool, "scrape-b")[1] == "scrape-b"
    # Parked, it no longer carries the target's name (tests wait on that name to see a worker settle).
    assert eventually(lambda: idle(pool) == 1, 5)
    assert not any(t.name == "scrape-b" for t in threading.enumerate())
    assert any(t.name == IDLE_NAME and t.ident == first[0] for t in threading.enumerate())


def test_a_stuck_worker_never_delays_another_job():
    pool = WorkerPool(idle_seconds=30)
    release = threading.Event()
    stuck = threading.Event()

    def hang() -> None:
        stuck.set()
        release.wait(20)

    pool.submit(hang, "scrape-hung")
    assert stuck.wait(5)
    try:
        started = time.monotonic()
        _, name = run_and_wait(pool, "scrape-healthy")
        assert time.monotonic() - started < 2
        assert name == "scrape-healthy"
        assert any(t.name == "scrape-hung" for t in threading.enumerate())
    finally:
        release.set()


def test_idle_workers_exit():
    pool = WorkerPool(idle_seconds=0.2)
    ident, _ = run_and_wait(pool)
    assert eventually(lambda: not any(t.ident == ident for t in threading.enumerate()), 5)
    assert idle(pool) == 0
    run_and_wait(pool)  # and a new one starts when needed


def test_every_job_runs_once_when_workers_time_out_as_jobs_arrive():
    # An idle wait of a millisecond makes workers leave while jobs are being handed to them.
    pool = WorkerPool(idle_seconds=0.001)
    runs: list[int] = []
    lock = threading.Lock()
    all_done = threading.Event()
    total = 2000

    def job(i: int) -> None:
        with lock:
            runs.append(i)
            if len(runs) == total:
                all_done.set()

    for i in range(total):
        pool.submit(lambda i=i: job(i), "scrape-stress")
        if i % 2 == 0:
            time.sleep(0.001)
    assert all_done.wait(20), f"{total - len(runs)} jobs never ran"
    assert sorted(runs) == list(range(total))


def test_a_failing_job_is_logged_and_the_worker_lives_on(caplog):
    pool = WorkerPool(idle_seconds=30)
    ident, _ = run_and_wait(pool)
    assert eventually(lambda: idle(pool) == 1, 5)

    def boom() -> None:
        raise RuntimeError("bug in a job")

    with caplog.at_level(logging.ERROR, logger="mssql_memory_exporter.connection.workers"):
        pool.submit(boom, "scrape-boom")
        assert eventually(lambda: any("job failed" in r.getMessage() for r in caplog.records), 5)
    assert eventually(lambda: idle(pool) == 1, 5)
    assert run_and_wait(pool)[0] == ident
