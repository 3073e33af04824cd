"""One section fails, the others export: the failure matrix derived from the collectors' records
(tests/collector_matrix.py: every object a collector reads, denied and missing), the slow tempdb
settings, and a vanished perf counter. Only the collectors reading the broken object fail.
"""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import COLLECTORS

from tests.collector_matrix import (
    SECTIONS,
    FailureCase,
    analysed_objects,
    declared_names,
    failure_cases,
    objects_read,
)
from tests.conftest import scrape, value
from tests.failure_checks import (
    assert_logged,
    assert_recovers,
    only_scrape_metrics,
)

# An SSD pool on the data volume, so that ssd_pools reads the file I/O rows too.
SSD_POOLS = {
    "data": {
        "drives": {"count": 2, "tbw_per_drive_tb": 7000},
        "planned_lifetime_years": 5,
        "in_service_date": "2022-03-01",
        "volumes": ["/var/opt/mssql/data"],
    }
}


# ---- one section fails, the others export --------------------------------------------------------


def _failed_collectors(samples: dict) -> set[str]:
    return {
        dict(labels)["collector"]
        for (name, labels), ok in samples.items()
        if name == "mssql_exporter_collector_success" and ok == 0
    }


def _break(s, case: FailureCase) -> None:
    if case.fault == "missing":
        s.instance.missing.add(case.view)
    else:
        s.instance.denied.add(case.view, int(case.fault.removeprefix("denied ")))


def _mend(s, case: FailureCase) -> None:
    s.instance.missing.discard(case.view)
    s.instance.denied.discard(case.view)


NEWEST_RELEASE = "sql2025"


@pytest.mark.parametrize("case", failure_cases(), ids=lambda case: case.id)
def test_a_failing_view_fails_exactly_the_collectors_that_read_it_then_recovers(
    standin, scraper_for, caplog, case
):
    """The matrix comes from the collectors' records (tests/collector_matrix.py): every object a
    collector's sections read, denied (229: a DENY; 300: no VIEW SERVER STATE) and missing (208: an
    older server). Exactly the collectors reading it fail, none of their declared metrics is exported,
    the failure is logged under one of them with the server's error number, and once the grant is back
    (or the object is there) the same Scraper exports all of them again. It plays the newest release the
    stand-in knows: there every version-gated section reads its objects (on 2022 the SQL Server 2025
    sections ask COL_LENGTH and stop before any object a denial could fail)."""
    s = standin(NEWEST_RELEASE)
    config = s.config(ssd_pools=SSD_POOLS)
    scraper = scraper_for(config)
    state = scraper._state(config.targets["standin"])
    before = only_scrape_metrics(scrape(scraper, config))
    _break(s, case)
    state.next_slow_at = 0.0  # the slow sections (the HBP databases, the file list) come in this batch too
    got = scrape(scraper, config)
    assert value(got, "mssql_up") == 1
    assert _failed_collectors(got) == case.failing
    for record in COLLECTORS:
        if record.name in case.failing:
            assert not declared_names(record) & only_scrape_metrics(got), record.name
    if case.failing:
        # The exporter's own existence check says "not available"; an object read past it, SQL Server's 208.
        missing = ("not available", "Invalid object name")
        number, texts = (208, missing) if case.fault == "missing" else (case.fault[-3:], ("denied",))
        failed = assert_logged(caplog, *texts, message="section failed")
        assert str(failed.err).startswith(f"{number}: ") and failed.collector in case.failing, failed.err
    _mend(s, case)
    left_out = [
        r
        for r in COLLECTORS
        if r.left_out_when_missing and any(case.view in objects_read(t) for t in r.sections)
    ]
    if case.fault == "missing" and left_out:
        # An object appears with an upgrade, which restarts SQL Server: a collector left out for its absence
        # is looked for again only then (scrape.py).
        s.instance.restart()
        s.clock.advance(60)
        scrape(scraper, config)
    state.next_slow_at = 0.0
    got = assert_recovers(scraper, config)
    assert not _failed_collectors(got)
    assert before <= only_scrape_metrics(got), before - only_scrape_metrics(got)


def test_the_objects_a_section_reads_are_those_the_stand_in_parses_from_its_sql():
    for tag in SECTIONS:
        assert objects_read(tag) == analysed_objects(tag), tag


def test_the_failure_matrix_covers_every_collector_that_reads_a_server_object():
    covered = {name for case in failure_cases() for name in case.failing}
    readers = {record.name for record in COLLECTORS if any(objects_read(tag) for tag in record.sections)}
    assert covered == readers, readers - covered


def test_denied_tempdb_growth_settings_fail_tempdb_files_until_a_refresh_reads_them(
    standin, scraper_for, caplog
):
    """The settings are a slow section: denied at the first read, tempdb_files says why and fails; once a
    refresh reads them, it succeeds from then on, also on the scrapes that do not carry them."""
    s = standin("healthy-oltp")
    s.instance.denied.add("tempdb.sys.database_files", 229)
    config = s.config(volume_refresh_seconds=30)
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 0
    s.instance.denied.discard("tempdb.sys.database_files")
    s.clock.advance(15)
    got = scrape(scraper, config)  # sizes are read, the settings not yet: no refresh is due
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 0
    assert any("tempdb growth settings not read" in str(getattr(r, "err", "")) for r in caplog.records)
    # The refresh interval runs on the exporter's monotonic clock, not the scenario's: make it due.
    scraper._state(config.targets["standin"]).next_slow_at = 0.0
    got = scrape(scraper, config)
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 1
    got = scrape(scraper, config)  # no settings in this batch: the ones read are kept
    assert value(got, "mssql_exporter_collector_success", collector="tempdb_files") == 1
    assert value(got, "mssql_tempdb_percent_growth_files") == 0


def test_vanished_required_counter_fails_its_collector_only(standin, scraper_for, caplog):
    s = standin("healthy-oltp")
    del s.instance.scenario.counters["Memory Manager"]["Memory Grants Pending"]
    config = s.config()
    scraper = scraper_for(config)
    got = scrape(scraper, config)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="memory_manager") == 0
