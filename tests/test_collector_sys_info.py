"""The sys_info collector (sys.dm_os_sys_info): the instance's start time, steady under clock drift."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import sys_info
from mssql_memory_exporter.collectors.base import ScrapeContext, SectionResult
from mssql_memory_exporter.metrics.builder import FamilyBuilder

DAY = 86_400


def start_time_after(memo: dict[str, object], now: float, uptime: float) -> float:
    """mssql_start_time_seconds from one sys_info row: server clock `now`, up for `uptime` seconds."""
    boot_ticks_ms = 7 * DAY * 1000  # the OS was up a week before SQL Server started
    row = {
        "section": "sys_info",
        "now_unix_ms": int(now * 1000),
        "ms_ticks": boot_ticks_ms + int(uptime * 1000),
        "sqlserver_start_time_ms_ticks": boot_ticks_ms,
    }
    out = FamilyBuilder({})
    sys_info.collect({"sys_info": SectionResult(rows=[row])}, ScrapeContext(now, "oltp", memo), out)
    (family,) = out.families()
    return family.samples[0].value


T0 = 1_700_000_000.0  # when the instance started


@pytest.mark.parametrize(
    ("uptime", "drift", "kept"),
    [
        (600, 4.0, True),  # a fresh start: the 5 s floor
        (600, 6.0, False),
        (30 * DAY, 250.0, True),  # a month up: 259 s of drift is still the same start
        (30 * DAY, -250.0, True),
        (30 * DAY, 270.0, False),
    ],
)
def test_start_time_tolerates_clock_drift_in_proportion_to_uptime(uptime, drift, kept):
    memo: dict[str, object] = {}
    assert start_time_after(memo, T0 + 60, 60) == T0
    # The tick counter ran `drift` seconds slow against the wall clock over the uptime.
    got = start_time_after(memo, T0 + uptime + drift, uptime)
    assert got == (T0 if kept else T0 + drift)


def test_a_restart_after_long_uptime_always_moves_the_start_time():
    memo: dict[str, object] = {}
    assert start_time_after(memo, T0 + 60 * DAY, 60 * DAY) == T0  # tolerance 518 s by now
    restarted = T0 + 60 * DAY + 30
    assert start_time_after(memo, restarted + 60, 60) == restarted
    assert start_time_after(memo, restarted + 62, 62.003) == restarted  # and it holds still again
