"""A target failing every scrape logs its warning once, then at most once per interval with a count, and
its recovery once (issue: one warning per failed scrape flooded the log)."""

from __future__ import annotations

import logging

from tests.conftest import scrape, value


def lines(caplog, msg: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == msg]


def test_a_down_target_logs_once_and_its_recovery_once(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    config = s.config(login_timeout_seconds=1)
    scraper = scraper_for(config)
    caplog.set_level(logging.INFO)
    s.handler.faults.hang_connect = True
    for _ in range(5):
        assert value(scrape(scraper, config, timeout=2), "mssql_up") == 0
    assert len(lines(caplog, "scrape failed")) == 1, [r.getMessage() for r in caplog.records]
    s.handler.faults.hang_connect = False
    assert value(scrape(scraper, config, timeout=5), "mssql_up") == 1
    [recovered] = lines(caplog, "scrape succeeded again")
    assert recovered.failures == 5
    assert value(scrape(scraper, config, timeout=5), "mssql_up") == 1
    assert len(lines(caplog, "scrape succeeded again")) == 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_repeats_are_summarised_per_interval_and_a_new_reason_is_logged_at_once(caplog):
    from mssql_memory_exporter.scrape.repeat_log import RepeatLimitedLog

    clock = FakeClock()
    logger = logging.getLogger("test.repeat")
    limited = RepeatLimitedLog(logger, interval=300, clock=clock)
    caplog.set_level(logging.INFO, logger="test.repeat")
    for _ in range(20):  # 20 scrapes, 15 s apart: 285 s, under the interval
        limited.failed("t", "scrape", "timed out", "scrape failed")
        clock.now += 15
    assert len(lines(caplog, "scrape failed")) == 1
    limited.failed("t", "scrape", "timed out", "scrape failed")  # at 300 s: the summary
    summary = lines(caplog, "scrape failed")[-1]
    assert len(lines(caplog, "scrape failed")) == 2 and summary.repeated == 20
    limited.failed("t", "scrape", "login refused", "scrape failed")  # another reason: at once
    assert lines(caplog, "scrape failed")[-1].err == "login refused"
    limited.failed("u", "scrape", "timed out", "scrape failed")  # another target: its own streak
    assert len(lines(caplog, "scrape failed")) == 4


def _success(got: dict, collector: str) -> float:
    return got[("mssql_exporter_collector_success", (("collector", collector),))]


def test_a_collector_finding_no_data_logs_once_then_its_recovery_once(standin, scraper_for, caplog):
    """The same answer fails the same collector on every scrape: one line, not one per scrape (each
    scrape used to log "collector found no data" again), and one line when it recovers."""
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    caplog.set_level(logging.INFO)
    rows = s.instance.scenario.views["configurations"]
    saved = list(rows)
    # 'min server memory (MB)' gone from sys.configurations: memory_config raises MissingData.
    rows[:] = [r for r in rows if r["name"] != "min server memory (MB)"]
    for _ in range(4):
        got = scrape(scraper, config)
        assert value(got, "mssql_up") == 1 and _success(got, "memory_config") == 0
    [line] = lines(caplog, "collector found no data")
    assert line.collector == "memory_config" and "min server memory" in line.err, line.err
    rows[:] = saved
    assert _success(scrape(scraper, config), "memory_config") == 1
    [recovered] = [r for r in lines(caplog, "section succeeded again") if r.collector == "memory_config"]
    assert recovered.failures == 4


def test_an_exporter_bug_logs_its_traceback_with_the_first_line_only(caplog):
    from mssql_memory_exporter.scrape.repeat_log import RepeatLimitedLog

    clock = FakeClock()
    logger = logging.getLogger("test.repeat.bug")
    limited = RepeatLimitedLog(logger, interval=300, clock=clock)
    caplog.set_level(logging.INFO, logger="test.repeat.bug")
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError as exc:
        bug = exc
    for _ in range(21):  # 300 s of scrapes 15 s apart: the first line and one summary
        limited.failed(
            "t", "collector:x", "ZeroDivisionError", "collector failed", level=logging.ERROR, exc_info=bug
        )
        clock.now += 15
    first, summary = lines(caplog, "collector failed")
    assert first.levelno == summary.levelno == logging.ERROR
    assert first.exc_info is not None and first.exc_info[1] is bug
    assert summary.exc_info is None and summary.repeated == 20
