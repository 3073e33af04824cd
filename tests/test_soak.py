"""A short soak in CI (the long one is `make soak`): faults come and go, and the exporter keeps answering
with no growth in memory, descriptors or connections, and no password in its output."""

from __future__ import annotations

from tests import soak


def test_short_soak_with_faults():
    report = soak.run(scrapes=1500, targets=4, seed=11, warmup=300)
    assert report.start is not None and report.end is not None
    assert not report.bad_answers, report.bad_answers[:5]
    assert report.up > 0 and report.down > 0, "the run must see both healthy scrapes and injected faults"
    assert report.end.fds <= report.start.fds, report.lines()
    assert report.end.connections <= 4, report.lines()
    assert report.end.rss - report.start.rss < 5_000_000, report.lines()
    assert not report.password_leaked
