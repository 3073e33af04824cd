"""The scrape batch is prepared once per connection and executed by handle afterwards (prepared.py),
through FreeTDS + pyodbc against the stand-in, which keeps prepared handles per session as SQL Server
does and can refuse to prepare."""

from __future__ import annotations

import logging

import pyodbc

from exporter.mssql_memory_exporter.connection.prepared import MAX_HANDLES
from tests.conftest import TEST_PASSWORD, scrape, value

REFUSED_MSG = "SQL Server refused to prepare the scrape batch; sending it in full on this connection"
SMALL_SETS = [
    {"server_properties"},
    {"sys_info"},
    {"buffer_manager"},
    {"buffer_node"},
    {"memory_manager"},
    {"memory_node"},
    {"os_memory"},
    {"memory_config"},
    {"sql_statistics"},
    {"wait_stats"},
    {"memory_clerks"},
]


def probe(scraper, config, collect=None) -> dict:
    from tests.conftest import exposition, samples_of

    return samples_of(exposition(scraper.probe(config.targets["standin"], 10.0, collect)))


def test_an_established_connection_sends_the_handle_not_the_text_in_one_round_trip(
    standin, scraper_for, driver
):
    s = standin("healthy-oltp")
    config = s.config(driver=driver)
    scraper = scraper_for(config)
    # The first scrape logs in and prepares the batch with the slow sections; the second the one
    # without them (the slow sections run every few minutes, see scrape.py).
    first = scrape(scraper, config, timeout=10.0)
    scrape(scraper, config, timeout=10.0)
    session = s.server.sessions[-1]
    prepared = session.prepares
    assert 1 <= prepared <= 2 and len(session.prepared) == prepared
    for _ in range(3):
        bytes_before, trips_before = session.bytes_in, session.batches
        got = scrape(scraper, config, timeout=10.0)
        assert value(got, "mssql_up") == 1
        assert session.batches - trips_before == 1
        assert session.bytes_in - bytes_before < 2048
        assert value(got, "mssql_page_life_expectancy_seconds") == value(
            first, "mssql_page_life_expectancy_seconds"
        )
    assert session.prepares == prepared
    assert s.server.errors == []


def test_a_refused_prepare_falls_back_to_the_plain_batch_logged_once(standin, scraper_for, caplog, driver):
    s = standin("healthy-oltp")
    s.handler.faults.refuse_prepare = True
    config = s.config(driver=driver)
    scraper = scraper_for(config)
    with caplog.at_level(logging.INFO):
        got = scrape(scraper, config, timeout=10.0)
        assert value(got, "mssql_up") == 1
        assert value(got, "mssql_page_life_expectancy_seconds") > 0
        session = s.server.sessions[-1]
        for _ in range(3):
            trips_before, bytes_before = session.batches, session.bytes_in
            assert value(scrape(scraper, config, timeout=10.0), "mssql_up") == 1
            assert session.batches - trips_before == 1
            assert session.bytes_in - bytes_before > 2048  # the whole text, as before
    assert session.prepared == {}
    refusals = [r for r in caplog.records if r.getMessage() == REFUSED_MSG]
    assert len(refusals) == 1 and "8180" in refusals[0].err
    assert s.handler.logins == 1


def test_a_reconnect_prepares_again(standin, scraper_for, driver):
    s = standin("healthy-oltp")
    config = s.config(driver=driver)
    scraper = scraper_for(config)
    scrape(scraper, config, timeout=10.0)
    scrape(scraper, config, timeout=10.0)
    s.server.drop_sessions()  # a restart or failover: the server forgets the session and its handles
    got = scrape(scraper, config, timeout=10.0)
    assert value(got, "mssql_up") == 1
    fresh = s.server.sessions[-1]
    assert len(s.server.sessions) == 2 and fresh.prepares == 1 and len(fresh.prepared) == 1
    trips_before = fresh.batches
    assert value(scrape(scraper, config, timeout=10.0), "mssql_up") == 1
    assert fresh.batches - trips_before == 1 and fresh.prepares == 1


def test_alternating_collector_sets_keep_a_bounded_number_of_handles(standin, scraper_for):
    s = standin("healthy-oltp")
    s.handler.strict = False  # eleven small batches; sqlfluff is not what this test is about
    config = s.config()
    scraper = scraper_for(config)
    for _round in range(2):
        for wanted in SMALL_SETS:
            assert value(probe(scraper, config, wanted), "mssql_up") == 1
            session = s.server.sessions[-1]
            assert len(session.prepared) <= MAX_HANDLES
    session = s.server.sessions[-1]
    assert len(s.server.sessions) == 1
    assert session.unprepares == session.prepares - len(session.prepared) > 0
    # The most recent set is still prepared: probing it again sends no text.
    before = session.prepares
    assert value(probe(scraper, config, SMALL_SETS[-1]), "mssql_up") == 1
    assert session.prepares == before
    assert s.server.errors == []


def test_the_stand_in_answers_odbc_prepared_statements_as_freetds_sends_them(standin):
    """What pyodbc + FreeTDS 1.3.17 do with parameters: sp_prepexec each execute, sp_unprepare of the
    previous handle before it (pyodbc binds again, FreeTDS re-prepares on every bind), which is why
    prepared.py calls sp_prepexec from T-SQL instead."""
    s = standin("healthy-oltp")
    s.handler.strict = False
    cnxn = pyodbc.connect(
        f"DRIVER={{FreeTDS}};SERVER=127.0.0.1;PORT={s.port};UID=exporter;PWD={TEST_PASSWORD};TDS_Version=7.4",
        autocommit=True,
        timeout=5,
    )
    try:
        cursor = cnxn.cursor()
        sql = "SELECT N'sys_info' AS section, cpu_count FROM sys.dm_os_sys_info WHERE ? = 1"
        for _ in range(3):
            rows = cursor.execute(sql, 1).fetchall()
            assert rows and rows[0][0] == "sys_info"
        session = s.server.sessions[-1]
        assert session.prepares == 3 and session.unprepares == 2 and len(session.prepared) == 1
        cursor.close()
    finally:
        cnxn.close()


def test_a_forgotten_handle_is_prepared_again_within_the_same_scrape(standin, scraper_for, caplog):
    """Issue 36 item 11: SQL Server forgot the handle but kept the session (8179 on sp_execute), and
    that scrape answered mssql_up 0. Over TDS: the stand-in forgets every session's handles."""
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    scrape(scraper, config, timeout=10.0)
    scrape(scraper, config, timeout=10.0)
    session = s.server.sessions[-1]
    prepared = session.prepares
    s.server.forget_prepared()
    with caplog.at_level(logging.INFO):
        got = scrape(scraper, config, timeout=10.0)
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_page_life_expectancy_seconds") > 0
    assert len(s.server.sessions) == 1 and s.handler.logins == 1  # the same session, no new login
    assert session.prepares == prepared + 1 and len(session.prepared) == 1
    forgot = [r for r in caplog.records if "forgot the prepared" in r.getMessage()]
    assert len(forgot) == 1 and "8179" in forgot[0].err
    trips_before = session.batches
    assert value(scrape(scraper, config, timeout=10.0), "mssql_up") == 1
    assert session.batches - trips_before == 1 and session.prepares == prepared + 1


def test_a_forgotten_handle_among_those_to_evict_is_not_unprepared(standin, scraper_for):
    """A full handle cache evicts with sp_unprepare in the prepare batch; a handle the server forgot
    answers 8179 there too, and the batch is prepared again without it."""
    s = standin("healthy-oltp")
    s.handler.strict = False
    config = s.config()
    scraper = scraper_for(config)
    for wanted in SMALL_SETS[:MAX_HANDLES]:
        assert value(probe(scraper, config, wanted), "mssql_up") == 1
    session = s.server.sessions[-1]
    assert len(session.prepared) == MAX_HANDLES
    s.server.forget_prepared()
    assert value(probe(scraper, config, SMALL_SETS[MAX_HANDLES]), "mssql_up") == 1
    assert len(s.server.sessions) == 1 and len(session.prepared) == 1
    assert s.server.errors == []
