"""SIGTERM with requests already accepted (issue 36, item 5): they are answered, within a bounded grace,
as docs/configuration.md's /-/ready row promises. Before, the process exited 0.2 s after the signal with
the answers of probes still running lost (the connections closed with no status)."""

# ruff: noqa: F811 - the `start` fixture is imported from test_startup and named as a parameter

from __future__ import annotations

import contextlib
import http.client
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conftest import value
from tests.test_lifecycle import SLOW, VERIFYING, launch, probe, request, standin_target, write
from tests.test_startup import start  # noqa: F401 - a fixture

PROBES = 4
# The stand-in answers each batch this late: well inside the exporter's grace of 1 s.
DELAY = 0.4


def test_sigterm_answers_the_probes_already_accepted(start, standin, tmp_path: Path):
    s = standin("healthy-oltp")
    config = write(tmp_path / "c.yml", {"sql": standin_target(s.port), "tls": VERIFYING})
    run, port = launch(start, config)
    assert value(probe(port), "mssql_up") == 1  # logged in, the batch prepared: a probe is one round trip
    s.handler.faults.delay_seconds = DELAY
    batches = s.handler.exporter_batches
    with ThreadPoolExecutor(PROBES) as pool:
        answers = [
            pool.submit(
                request,
                port,
                "GET",
                "/probe?target=sql",
                SLOW,
                **{"X-Prometheus-Scrape-Timeout-Seconds": "30"},
            )
            for _ in range(PROBES)
        ]
        deadline = time.monotonic() + SLOW
        while s.handler.exporter_batches < batches + PROBES and time.monotonic() < deadline:
            time.sleep(0.01)  # every probe has sent its batch: all are in flight when the signal lands
        run.proc.send_signal(signal.SIGTERM)
        results = [answer.result(timeout=SLOW) for answer in answers]
    assert run.proc.wait(timeout=SLOW) == 0, run.log()
    for status, body in results:
        assert status == 200, body
        assert "mssql_up 1" in body
    assert "stopping with requests unanswered" not in run.log()


def test_sigterm_abandons_a_probe_stuck_past_the_grace_and_says_so(start, standin, tmp_path: Path):
    s = standin("healthy-oltp")
    config = write(tmp_path / "c.yml", {"sql": standin_target(s.port), "tls": VERIFYING})
    run, port = launch(start, config)
    assert value(probe(port), "mssql_up") == 1
    s.handler.faults.hang_batch = True
    stuck = threading.Thread(target=_quietly, args=(port,), daemon=True)
    stuck.start()
    time.sleep(2.0)  # the batch is sent at once (its text is parsed already): the worker is in the driver
    run.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert run.proc.wait(timeout=SLOW) == 0, run.log()
    assert time.monotonic() - signalled < 5.0  # the grace (1 s), not the query timeout (30 s)
    assert 'msg="stopping with requests unanswered" requests=1' in run.log()


def _quietly(port: int) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):  # the exporter goes away under it
        request(port, "GET", "/probe?target=sql", SLOW, **{"X-Prometheus-Scrape-Timeout-Seconds": "30"})
