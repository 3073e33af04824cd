"""The in-process stand-in (tests/inprocess.py) the collector modules scrape: it runs the exporter's own
scraper and connection, and what the wire would refuse it refuses too."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.conftest import scrape, value
from tests.inprocess import _through_the_wire
from tests.standin.tds import Column, ResultSet


def test_the_batch_is_prepared_once_then_executed_by_handle(offline_standin, scraper_for):
    s = offline_standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    for _ in range(3):
        assert value(scrape(scraper, config), "mssql_up") == 1
        s.clock.advance(15)
    (connection,) = s.connections  # one login, kept
    assert connection.session.prepares == 2  # the refresh batch and the fast one, each once
    assert s.handler.exporter_batches == 3  # one round trip per scrape


def test_a_target_no_stand_in_answers_is_down_not_a_hang(offline_standin, scraper_for):
    s = offline_standin("healthy-oltp")
    config = s.config(port=s.port + 1000)
    assert value(scrape(scraper_for(config), config), "mssql_up") == 0


def test_a_value_its_column_cannot_carry_fails_as_over_tds():
    with pytest.raises(TypeError, match="column 'n'"):
        _through_the_wire(ResultSet([Column("n", "bigint")], [("12",)]))


def test_values_come_back_as_pyodbc_returns_them():
    columns = [Column("f", "float"), Column("b", "bit"), Column("t", "datetime")]
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 1234)
    _, rows = _through_the_wire(ResultSet(columns, [(3, 1, when)]))
    assert rows == [(3.0, True, dt.datetime(2026, 1, 2, 3, 4, 5, 0))]
    assert isinstance(rows[0][0], float)
