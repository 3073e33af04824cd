"""The stand-in is strict, so mistakes in the exporter's SQL fail here and not on a user's first scrape."""

from __future__ import annotations

import pyodbc
import pytest
from mssql_memory_exporter.config import build_connection_string
from mssql_memory_exporter.connection.session import fetch_all
from mssql_memory_exporter.scrape.scraper import Scraper

from tests.conftest import exposition, samples_of, value
from tests.timeouts import PATIENT_SECONDS


def connect(s) -> pyodbc.Connection:
    # Generous: these tests are about what the stand-in accepts, not how fast; a first parse of a new
    # batch text takes the stand-in seconds on a loaded machine.
    config = s.config()
    target = config.targets["standin"]
    creds = config.credentials_for(target)
    cnxn = pyodbc.connect(
        build_connection_string(target, "FreeTDS", creds.password, username=creds.username),
        timeout=30,
        autocommit=True,
    )
    cnxn.timeout = 30
    return cnxn


def test_unknown_object_is_error_208_like_sql_server(standin):
    s = standin("healthy-oltp")
    cursor = connect(s).cursor()
    with pytest.raises(pyodbc.Error) as err:
        cursor.execute("SELECT cntr_value FROM sys.dm_os_performance_countrs")
    assert "208" in str(err.value) and "dm_os_performance_countrs" in str(err.value)


def test_the_exporters_batch_passes_the_strict_checks(standin):
    s = standin("healthy-oltp")
    cursor = connect(s).cursor()
    cursor.execute(Scraper(s.config()).batch_sql)
    tags = [rs.rows[0][0] for rs in fetch_all(cursor) if rs.rows]
    # hbp_databases has rows: every database has the database-level HBP switch on by default (2019+);
    # it is a slow section, read with the file list.
    expected = [
        "server",
        "sys_info",
        "perf",
        "os_sys_memory",
        "os_process_memory",
        "memory_config",
        "memory_model",
        "resource_semaphores",
        "memory_clerks",
        "wait_stats",
        "file_stats",
        "tempdb_sizes",
        "tempdb_usage",
        "tempdb_volumes",
        "tempdb_log_space",
        "tempdb_log_reuse",
        # tempdb_governance on SQL Server 2022: the 2025 columns are missing (COL_LENGTH), so its four
        # resource governor sections answer "unavailable"; tempdb's persistent version store has no row.
        "section_unavailable",
        "section_unavailable",
        "section_unavailable",
        "section_unavailable",
        "hbp",
        "bpe",
        "section_unavailable",  # memory_health: sys.dm_os_memory_health_history is SQL Server 2025's
        "files",
        "tempdb_settings",
        "hbp_databases",
    ]
    assert tags == expected  # slow sections last


def mutate(scraper: Scraper, old: str, new: str) -> None:
    render = scraper._batch_for
    scraper._batch_for = lambda sections: render(sections).replace(old, new, 1)  # type: ignore[method-assign]


MUTATIONS = {
    # a typo in a DMV name inside the dynamic SQL
    "object": ("FROM sys.dm_os_performance_counters AS pc", "FROM sys.dm_os_performance_counter AS pc"),
    # a typo in a column
    "column": ("pc.cntr_value, pc.cntr_type", "pc.cntr_valu, pc.cntr_type"),
    # a column that exists, but on another DMV
    "wrong_dmv_column": ("si.ms_ticks,", "si.cntr_value,"),
    # broken syntax
    "syntax": ("END CATCH;\nBEGIN TRY", "END CATCH;\nBEGIN TRI"),
    # sys.configurations.value_in_use read as sql_variant, which FreeTDS cannot fetch
    "sql_variant": ("CAST(c.value_in_use AS bigint) AS value_in_use", "c.value_in_use"),
    # the clerk type selected without its GROUP BY (SQL Server: Msg 8120)
    "group_by": ("END AS clerk, SUM(mc.pages_kb) AS pages_kb", "END AS clerk, mc.pages_kb"),
    # a wait-stats column that is not on the view
    "wait_column": ("ws.signal_wait_time_ms\n", "ws.signal_wait_ms\n"),
    # tempdb's space view misspelt inside its three-part name
    "three_part_name": ("FROM tempdb.sys.dm_db_file_space_usage", "FROM tempdb.sys.dm_db_file_space_usage_"),
    # a space-usage column that is on another view
    "space_column": ("su.mixed_extent_page_count", "su.mixed_page_count"),
    # a column of the applied function read from the wrong side of the CROSS APPLY
    "apply_side": ("vs.available_bytes", "df.available_bytes"),
    # tempdb's log view misspelt inside its three-part name
    "log_view": ("FROM tempdb.sys.dm_db_log_space_usage", "FROM tempdb.sys.dm_db_log_space_used"),
    # a log-space column spelt as the DBCC SQLPERF(LOGSPACE) habit has it
    "log_column": ("ls.used_log_space_in_bytes", "ls.log_space_used_in_bytes"),
    # the reuse wait read by its code's name on sys.databases, which has no such column
    "reuse_column": ("d.log_reuse_wait_desc", "d.log_reuse_wait_description"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_mistake_in_the_batch_fails_the_scrape_visibly(standin, scraper_for, mutation):
    s = standin("healthy-oltp")
    config = s.config()
    scraper: Scraper = scraper_for(config)
    old, new = MUTATIONS[mutation]
    assert old in scraper.batch_sql, "the mutation no longer applies: update it to the current batch"
    mutate(scraper, old, new)
    got = samples_of(exposition(scraper.probe(config.targets["standin"], PATIENT_SECONDS)))
    failed = value(got, "mssql_up") == 0 or any(
        v == 0 for (name, _), v in got.items() if name == "mssql_exporter_collector_success"
    )
    assert failed, f"mutation {mutation!r} went unnoticed"


def test_a_like_pattern_that_ignores_nchar_padding_is_caught(standin, scraper_for):
    """`LIKE N'%:Buffer Node'` (no trailing %) matches nothing on SQL Server's blank-padded nchar(128)."""
    s = standin("numa-4-nodes")
    config = s.config()
    scraper: Scraper = scraper_for(config)
    mutate(scraper, "LIKE N''%:Buffer Node%''", "LIKE N''%:Buffer Node''")
    got = samples_of(exposition(scraper.probe(config.targets["standin"], PATIENT_SECONDS)))
    assert value(got, "mssql_up") == 1
    assert value(got, "mssql_exporter_collector_success", collector="buffer_node") == 0
    assert value(got, "mssql_exporter_collector_success", collector="buffer_manager") == 1


@pytest.mark.parametrize(
    ("scenario", "answered"),
    [("azure-sql-database", True), ("healthy-oltp", False), ("managed-instance", False)],
)
def test_a_column_only_another_platform_has_is_207_as_sql_server_would(standin, scenario, answered):
    """catalog.yaml's per-column `platforms`: sys.databases.catalog_collation_type_desc is Azure SQL
    Database's alone. There it answers; elsewhere the batch is refused with 207 naming where the column
    is, whether it names the column in plain T-SQL (strict check) or through sp_executesql behind an
    existence check (the stand-in's rows lack it), and COL_LENGTH says NULL."""
    cursor = connect(standin(scenario)).cursor()
    plain = "SELECT d.catalog_collation_type_desc FROM sys.databases AS d WHERE d.database_id = 1"
    dynamic = f"EXEC sp_executesql N'{plain}'"
    for sql in (plain, dynamic):
        if answered:
            assert [tuple(r) for r in cursor.execute(sql).fetchall()] == [("DATABASE_DEFAULT",)]
            continue
        with pytest.raises(pyodbc.Error) as err:
            cursor.execute(sql).fetchall()
        assert "207" in str(err.value) and "catalog_collation_type_desc" in str(err.value), sql
    if not answered:
        with pytest.raises(pyodbc.Error, match="is on azure_sql_database only"):
            cursor.execute(plain)
    length = cursor.execute("SELECT COL_LENGTH(N'sys.databases', N'catalog_collation_type')").fetchone()[0]
    assert (length is not None) == answered
