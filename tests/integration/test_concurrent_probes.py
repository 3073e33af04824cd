"""Probes at once through the real driver: a connection is never shared by two scrapes, a hung target
does not hold up healthy ones, a probe does not wait for a worker stuck in the driver, and a stuck
worker shows as busy in the exporter's own metrics.

Wall-clock bounds are generous: the CI box is a loaded 2-core VM.
"""

from __future__ import annotations

import threading
import time

from tests.conftest import exposition, make_config, samples_of, scrape, value
from tests.failure_checks import (
    SLACK,
    TARGET_METRIC,
    assert_down_and_nothing_stale,
    eventually,
    records,
    settle,
    timed_scrape,
)

# ---- concurrency ---------------------------------------------------------------------------------


def test_concurrent_probes_never_share_the_connection_at_once(standin, scraper_for):
    s = standin("healthy-oltp")
    other = standin("numa-4-nodes")
    config = make_config({"a": s.target_yaml(), "b": other.target_yaml()})
    scraper = scraper_for(config)
    results: list[float] = []
    lock = threading.Lock()

    def probe(name: str) -> None:
        got = scrape(scraper, config, target=name, timeout=8)
        with lock:
            results.append(value(got, "mssql_up"))

    threads = [threading.Thread(target=probe, args=("a" if i % 2 else "b",)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [1.0] * 12
    # One connection per target, each used by one scrape at a time.
    assert len(s.server.sessions) == 1 and len(other.server.sessions) == 1
    assert s.handler.exporter_batches == 6 and other.handler.exporter_batches == 6


def test_one_hung_target_among_healthy_ones_under_concurrent_probes(standin, scraper_for, caplog):
    healthy = {"a": standin("healthy-oltp"), "b": standin("numa-4-nodes"), "c": standin("memory-pressure")}
    hung = standin("healthy-oltp")
    targets = {name: s.target_yaml(name) for name, s in healthy.items()}
    targets["h"] = hung.target_yaml("h", query_timeout_seconds=2)
    config = make_config(targets)
    scraper = scraper_for(config)
    for name in targets:  # warm: logged in, batch text parsed by the stand-in
        assert value(scrape(scraper, config, target=name), "mssql_up") == 1
    timeout = 4.0

    def round_of_probes(per_target: int) -> list[tuple[str, float, float]]:
        outcomes: list[tuple[str, float, float]] = []
        lock = threading.Lock()

        def probe(name: str) -> None:
            got, elapsed = timed_scrape(scraper, config, timeout, target=name)
            with lock:
                outcomes.append((name, value(got, "mssql_up"), elapsed))

        threads = [
            threading.Thread(target=probe, args=(name,)) for name in targets for _ in range(per_target)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 10)
        assert not any(t.is_alive() for t in threads), "a probe did not answer"
        return outcomes

    caplog.clear()
    hung.handler.faults.hang_batch = True
    outcomes = round_of_probes(4)
    assert len(outcomes) == 16
    for name, up, elapsed in outcomes:
        assert up == (0.0 if name == "h" else 1.0), (name, up, elapsed)
        assert elapsed < timeout + SLACK, (name, elapsed)
    failed = records(caplog, "scrape failed")
    assert failed and {r.target for r in failed} == {"h"}
    # Every way of running out of time is fine (a probe whose worker got the lock at its deadline says
    # "no time left"); what must not appear is a reason that is not about time.
    timing = ("timed out waiting", "still running", "HYT00", "no time left")
    assert all(any(t in r.err for t in timing) for r in failed), [r.err for r in failed]
    hung.handler.faults.hang_batch = False
    settle("h")
    outcomes = round_of_probes(2)
    assert len(outcomes) == 8 and all(up == 1.0 for _, up, _ in outcomes), outcomes


def test_unreadable_answer_while_another_worker_holds_the_connection_does_not_block(
    standin, scraper_for, caplog, monkeypatch
):
    from mssql_memory_exporter.connection.batch import ResultSet

    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    assert value(scrape(scraper, config), "mssql_up") == 1
    connection = scraper._state(config.targets["standin"]).connection
    # This probe's round trip returns an answer route() rejects, while a concurrent probe's worker is
    # stuck in the driver with the target's lock.
    monkeypatch.setattr(connection, "run", lambda sql, deadline: [ResultSet(("section",), [("bogus",)])])
    connection._lock.acquire()
    got: list[dict] = []
    prober = threading.Thread(target=lambda: got.append(scrape(scraper, config, timeout=3)), daemon=True)
    started = time.monotonic()
    prober.start()
    prober.join(5)
    elapsed = time.monotonic() - started
    connection._lock.release()
    assert not prober.is_alive(), "the probe waited for the lock held by the stuck worker"
    assert elapsed < 1.0, elapsed
    assert_down_and_nothing_stale(got[0])
    (failed,) = records(caplog, "scrape failed")
    assert getattr(failed, "target", None) == "standin" and "bogus" in str(getattr(failed, "err", ""))
    monkeypatch.undo()
    # The unreadable session is not reused: the next scrape logs in again and is healthy.
    again = scrape(scraper, config)
    assert value(again, "mssql_up") == 1 and value(again, TARGET_METRIC) == 5400
    assert len(s.server.sessions) == 2
    assert eventually(lambda: s.server.sessions[0].closed)  # the server sees the close on its own thread


def test_a_worker_stuck_on_a_hung_target_shows_as_busy(standin, scraper_for):
    from mssql_memory_exporter.app.self_metrics import worker_families
    from mssql_memory_exporter.connection.session import WORKERS

    s = standin("healthy-oltp")
    config = make_config({"hung": s.target_yaml("hung", query_timeout_seconds=2)})
    scraper = scraper_for(config)
    assert value(scrape(scraper, config, target="hung"), "mssql_up") == 1
    s.handler.faults.hang_batch = True
    got, _ = timed_scrape(scraper, config, 1.5, target="hung")
    assert value(got, "mssql_up") == 0
    busy = samples_of(exposition(worker_families(WORKERS)))
    assert value(busy, "mssql_exporter_scrape_workers", state="busy") >= 1
    assert any(t.name == "scrape-hung" for t in threading.enumerate())
    s.handler.faults.hang_batch = False
    settle("hung")
