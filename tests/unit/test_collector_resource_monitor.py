"""The resource_monitor collector: sys.dm_os_ring_buffers' notifications and out-of-memory records, each
counted once across scrapes, on the stand-in's rows in process (tests/offline.py), one target's memo kept
from scrape to scrape as the scraper keeps it.

Scenarios: memory-notifications (process-side LOW on node 0, OS-side LOW on node 1, two OOM records, a SQL
Server restart at 700 s) and memory-notifications-wrapped (a 4-record buffer that drops its oldest record
every 5 s).
"""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import resource_monitor
from mssql_memory_exporter.collectors.base import ScrapeContext
from mssql_memory_exporter.connection.batch import ResultSet, route
from mssql_memory_exporter.metrics.builder import FamilyBuilder, MissingData

from tests.conftest import exposition, samples_of
from tests.offline import BATCH, SECTIONS, results_for
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter

RM = resource_monitor
LOW = RM.NOTIFICATIONS_TOTAL.name


def scrapes(scenario: str, times: tuple[float, ...], change=None) -> list[dict]:
    """The collector's samples at each time, one instance and one memo throughout (restarts play)."""
    instance = Instance(Scenario.load(scenario), Clock(manual=True))
    if change is not None:
        change(instance.scenario.views)
    memo: dict = {}
    got = []
    for at in times:
        instance.clock.advance(at - instance.clock.now())
        reply = Interpreter(instance).run(BATCH)
        results = route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)
        out = FamilyBuilder({})
        RM.COLLECTOR.collect(results, ScrapeContext(now=at, workload="oltp", memo=memo), out)
        got.append(samples_of(exposition(out.families())))
    return got


def count(samples: dict, **labels: str) -> float:
    return sum(v for (name, key), v in samples.items() if name == LOW and labels.items() <= dict(key).items())


def test_each_notification_is_counted_once_by_kind_source_and_node():
    """Scrapes every 15 s from 50 s: node 0's process-side LOWs (60..600 s, every 30 s: 19) and node 1's
    OS-side LOWs (300..600 s, every 60 s: 6), however many scrapes read them while in the window."""
    times = tuple(50.0 + 15 * k for k in range(41))  # 50 .. 650 s
    got = scrapes("memory-notifications", times)
    last = got[-1]
    assert count(last, notification="physical_low", source="process", node="0") == 19
    assert count(last, notification="physical_low", source="system", node="1") == 6
    assert count(last, notification="steady", source="none", node="0") == 1
    assert value_of(last, RM.OOM_TOTAL.name) == 2
    # Never down: a counter that only rises, scrape after scrape.
    totals = [count(g) for g in got]
    assert totals == sorted(totals)
    # The newest state per node: node 0 is STEADY (630 s), node 1 still LOW (its HIGH comes at 660 s).
    assert value_of(last, RM.LOW_NOW.name, node="0") == 0
    assert value_of(last, RM.LOW_NOW.name, node="1") == 1


def value_of(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_the_first_scrape_counts_nothing_but_knows_the_state():
    """What the buffer already holds when the exporter starts would be counted again after every exporter
    restart: the first scrape only remembers the newest record (and the state it says)."""
    first, second = scrapes("memory-notifications", (400.0, 430.0))
    assert count(first) == 0 and value_of(first, RM.OOM_TOTAL.name) == 0
    assert value_of(first, RM.LOW_NOW.name, node="0") == 1
    # 410..430 s: node 0 at 420 s; the OOM record at 420 s.
    assert count(second, source="process") == 1
    assert value_of(second, RM.OOM_TOTAL.name) == 1


def test_a_sql_server_restart_empties_the_buffer_and_ids_start_again_without_a_double_count():
    """SQL Server restarts at 700 s: record ids start from 0 again while ms_ticks go on, so the records
    after the restart (730, 760 s) are new and nothing before it is counted again."""
    got = scrapes("memory-notifications", (50.0, 690.0, 790.0))
    before, after = got[1], got[2]
    assert count(after, source="process", node="0") - count(before, source="process", node="0") == 2
    assert count(after) - count(before) == 2
    assert value_of(after, RM.LOW_NOW.name, node="0") == 1


def test_a_wrapped_buffer_loses_nothing_read_in_time_and_counts_nothing_twice():
    """Capacity 4, a record every 5 s, a scrape every 10 s: each scrape sees the 4 newest, of which 2 are
    new. From 15 s to 300 s, 58 records were written after the first scrape; all 58 are counted."""
    times = tuple(15.0 + 10 * k for k in range(30))  # 15 .. 305 s
    got = scrapes("memory-notifications-wrapped", times)
    assert count(got[-1]) == (305 - 15) // 5
    # Scrapes 60 s apart read only the 4 newest: the 8 in between fell out of the buffer unread. Fewer,
    # never more: no record is counted twice.
    sparse = scrapes("memory-notifications-wrapped", (15.0, 75.0, 135.0))
    assert count(sparse[-1]) == 8


def test_a_record_of_an_unknown_shape_fails_the_collector_once_and_is_passed_over():
    """An undocumented view may change: a record without <ResourceMonitor> fails this scrape with a clear
    message; the next scrape succeeds and the good records around it are counted."""

    def odd(views: dict) -> None:
        views["dm_os_ring_buffers"]["raw"] = [
            {
                "at": 95,
                "type": "RING_BUFFER_RESOURCE_MONITOR",
                "record": '<Record id="{id}" time="{time}"><X/></Record>',
            }
        ]

    instance = Instance(Scenario.load("memory-notifications"), Clock(manual=True))
    odd(instance.scenario.views)
    memo: dict = {}
    outcomes = []
    for at in (50.0, 100.0, 130.0):
        instance.clock.advance(at - instance.clock.now())
        reply = Interpreter(instance).run(BATCH)
        results = route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)
        out = FamilyBuilder({})
        try:
            RM.COLLECTOR.collect(results, ScrapeContext(now=at, workload="oltp", memo=memo), out)
            outcomes.append(samples_of(exposition(out.families())))
        except MissingData as err:
            outcomes.append(str(err))
    assert (
        isinstance(outcomes[1], str) and "<ResourceMonitor>" in outcomes[1] and "passed over" in outcomes[1]
    )
    # 60, 90 s before the odd record (at 50 s: nothing yet), 120 s after it: 3 counted, none lost.
    assert isinstance(outcomes[2], dict) and count(outcomes[2], source="process") == 3


@pytest.mark.parametrize("record", ["not xml at all", '<Record id="x" time="1"/>', "<Other/>"])
def test_malformed_records_are_named(record):
    with pytest.raises(ValueError):
        RM.parse(RM.RESOURCE_MONITOR, 1.0, record)


def test_unknown_notification_names_are_other_not_a_new_label():
    parsed = RM.parse(
        RM.RESOURCE_MONITOR,
        1.0,
        '<Record id="3" time="1"><ResourceMonitor><Notification>RESOURCE_MEM_NEW</Notification>'
        "<IndicatorsProcess>0</IndicatorsProcess><IndicatorsSystem>2</IndicatorsSystem><NodeId>1</NodeId>"
        "</ResourceMonitor></Record>",
    )
    assert (parsed.notification, parsed.source, parsed.node, parsed.record_id) == ("other", "system", "1", 3)


def test_the_section_reads_only_the_window_not_the_whole_buffer():
    results = results_for("memory-notifications", 600.0)
    stamps = [r["timestamp"] for r in results[RM.TAG].rows]
    ticks = results[RM.TAG].rows[0]["ms_ticks"]
    assert min(stamps) > ticks - RM.WINDOW_SECONDS * 1000  # type: ignore[operator]


def test_on_azure_sql_database_the_view_is_absent_and_nothing_fails():
    results = results_for("azure-sql-database", 60)
    assert results[RM.TAG].unavailable and results[RM.TAG].error is None
    out = FamilyBuilder({})
    RM.COLLECTOR.collect(results, ScrapeContext(now=0, workload="oltp", memo={}), out)
    assert out.families() == []
