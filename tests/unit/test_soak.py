"""A short soak in CI (the long one is `make soak`): every fault comes and goes once, the exporter keeps
answering, every target is up again at the end on exactly one connection each, and threads, descriptors
and memory do not grow. The verdict is tests/soak.py's own, so CI and `make soak` judge alike."""

from __future__ import annotations

from collections import Counter

import pytest

from tests import soak


@pytest.mark.integration
@pytest.mark.slow
def test_short_soak_with_faults():
    report = soak.run(scrapes=1500, targets=4, seed=11, warmup=300)
    for line in report.lines():
        print(line)  # kept in the run's captured output, so a slow drift can be compared across runs
    assert set(report.faults) == set(soak.FAULTS), "a short run must still inject every fault"
    assert report.up > 0 and report.down > 0, "the run must see both healthy scrapes and injected faults"
    # Each fault really reached the exporter (a login fault on an already open connection would not),
    # except a restart: the exporter logs in again within the same scrape, so it is never seen down.
    downs = report.downs_during
    assert all(downs.get(fault, 0) > 0 for fault in soak.FAULTS if fault != "restart"), downs
    assert downs.get("restart", 0) == 0, downs
    assert len(report.final_answers) == 4 * soak.FINAL_ROUNDS
    # Reloads while scraping (issue 25): good ones applied, bad ones refused, every kind several times.
    assert all(report.reloads[kind] >= 2 for kind in soak.Reloads.KINDS), report.reloads
    assert report.failures() == [], report.lines()


def _snapshot(
    threads: int = 10,
    fds: int = 20,
    sockets: Counter[str] | None = None,
    busy: int = 0,
    rss: int = 50_000_000,
) -> soak.Snapshot:
    sockets = Counter({"ESTABLISHED": 4}) if sockets is None else sockets
    return soak.Snapshot(rss, fds, threads, sockets, busy)


def _report(**changes: object) -> soak.Report:
    report = soak.Report(targets=4, final_answers=["up"] * 8, start=_snapshot(), end=_snapshot())
    for name, value in changes.items():
        setattr(report, name, value)
    return report


def test_the_verdict_catches_each_kind_of_leak_and_a_stuck_target():
    assert _report().failures() == []
    # Warm-up growth (threads' malloc arenas, first fault paths) before the warm snapshot is not a leak.
    assert _report(warm=_snapshot(rss=56_000_000), end=_snapshot(rss=57_000_000)).failures() == []
    cases = {
        "final round not all up": _report(final_answers=["up", "down"]),
        "no answers": _report(final_answers=[]),
        # Every target stuck down with no connection at all: the old `<= targets` check passed this.
        "expected ESTABLISHED 4": _report(end=_snapshot(sockets=Counter())),
        "CLOSE_WAIT 1": _report(end=_snapshot(sockets=Counter({"ESTABLISHED": 4, "CLOSE_WAIT": 1}))),
        "threads grew from 10 to 11": _report(end=_snapshot(threads=11)),
        "1 scrape workers still busy": _report(end=_snapshot(busy=1)),
        "open fds grew": _report(end=_snapshot(fds=21)),
        "bad answers": _report(bad_answers=["0: ConnectionResetError()"]),
        "password": _report(password_leaked=True),
        "reloads answered wrongly": _report(reload_errors=["bad: 200 config reloaded"]),
        # RSS is judged from the warm snapshot (after the first cycle of faults), not from the start.
        "RSS grew by 2.00 MB after warm-up": _report(warm=_snapshot(), end=_snapshot(rss=52_000_000)),
    }
    for expected, report in cases.items():
        problems = report.failures()
        assert any(expected in problem for problem in problems), (expected, problems)
