"""The platform a target runs on, detected on the first scrape: what it cannot answer is left out, once,
with one log line, and never shows as a failing collector (issue 28 item 2)."""

from __future__ import annotations

import logging

from tests.conftest import make_config, scrape, value

GENEROUS = 60.0  # seconds: nothing here is about a timeout
# What Microsoft's pages do not list for Azure SQL Database (EngineEdition 5): SQL Server only.
NOT_ON_AZURE_SQL_DATABASE = {"sys.master_files", "sys.dm_os_volume_stats"}
# Left out on every stand-in scenario older than 17.x, whatever its edition: it reads SQL Server 2025's
# sys.dm_os_memory_health_history (tests/unit/test_collector_memory_health.py).
NEEDS_2025 = {"memory_health"}


def by_collector(samples: dict, metric: str) -> dict[str, float]:
    return {dict(labels)["collector"]: v for (name, labels), v in samples.items() if name == metric}


def scrapes(
    standin, scraper_for, edition: object, missing: set[str], count: int = 2, scenario: str = "healthy-oltp"
) -> list[dict]:
    s = standin(scenario)
    if edition is not None:
        s.instance.scenario.properties["EngineEdition"] = edition
    s.instance.missing.update(missing)
    target = s.target_yaml(query_timeout_seconds=GENEROUS, login_timeout_seconds=GENEROUS)
    config = make_config({"standin": target})
    scraper = scraper_for(config)
    got = [scrape(scraper, config, timeout=GENEROUS) for _ in range(count)]
    for samples in got:
        assert value(samples, "mssql_up") == 1
    return got


def test_azure_sql_database_leaves_out_what_it_lacks_from_the_first_scrape(standin, scraper_for, caplog):
    # On a box SQL Server whose views were missing, these collectors would fail on every scrape:
    failing_on_a_box = {
        c
        for c, ok in by_collector(
            scrapes(standin, scraper_for, "3", NOT_ON_AZURE_SQL_DATABASE)[-1],
            "mssql_exporter_collector_success",
        ).items()
        if ok == 0
    }
    assert failing_on_a_box, "the stand-in must refuse the missing views, or this test proves nothing"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mssql_memory_exporter.scrape.platform"):
        # The scenario file: the stand-in's catalog says which objects the platform lacks (`platforms`).
        got = scrapes(standin, scraper_for, None, set(), count=3, scenario="azure-sql-database")
    for samples in got:  # the first scrape included: no collector fails for what the platform lacks
        success = by_collector(samples, "mssql_exporter_collector_success")
        assert [c for c, ok in success.items() if ok == 0] == []
        enabled = by_collector(samples, "mssql_exporter_collector_enabled")
        left_out = {c for c, on in enabled.items() if on == 0}
        # Everything that would fail, and also what reads the missing views without failing: the
        # Hybrid Buffer Pool's PMEM figure (a SQL Server feature) and the SSD pools, which need volumes.
        # The scenario plays base.yml's 16.x, so SQL Server 2025's memory health view is missing too.
        assert left_out == failing_on_a_box | {"hybrid_buffer_pool", "ssd_pools"} | NEEDS_2025
        assert left_out.isdisjoint(success)
    lines = [r.getMessage() for r in caplog.records if "azure_sql_database" in r.getMessage()]
    assert len(lines) == 1 and all(c in lines[0] for c in failing_on_a_box), lines
    assert "mssql_build_info" in {name for name, _ in got[0]}  # the rest of the first scrape is intact


def test_an_unknown_engine_edition_is_logged_once_and_leaves_everything_on(standin, scraper_for, caplog):
    with caplog.at_level(logging.WARNING, logger="mssql_memory_exporter.scrape.platform"):
        got = scrapes(standin, scraper_for, "42", set(), count=3)
    lines = [r.getMessage() for r in caplog.records if "unknown engine edition" in r.getMessage()]
    assert len(lines) == 1 and "'42'" in lines[0]
    for samples in got:
        enabled = by_collector(samples, "mssql_exporter_collector_enabled")
        assert {c for c, on in enabled.items() if on == 0} == NEEDS_2025  # 16.x: no 2025 view
        assert set(by_collector(samples, "mssql_exporter_collector_success").values()) == {1.0}


def test_a_managed_instance_keeps_every_collector(standin, scraper_for, caplog):
    """Under the SQL Server 2022 update policy (16.x) only the memory health view is missing, and said
    once; under the SQL Server 2025 policy (17.x) every collector runs."""
    with caplog.at_level(logging.INFO, logger="mssql_memory_exporter.scrape.platform"):
        got = scrapes(standin, scraper_for, None, set(), scenario="managed-instance")
    lines = [r.getMessage() for r in caplog.records if r.name == "mssql_memory_exporter.scrape.platform"]
    assert len(lines) == 1 and "left out memory_health" in lines[0], lines
    assert set(by_collector(got[-1], "mssql_exporter_collector_success").values()) == {1.0}
    enabled = by_collector(got[-1], "mssql_exporter_collector_enabled")
    assert {c for c, on in enabled.items() if on == 0} == NEEDS_2025
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mssql_memory_exporter.scrape.platform"):
        got = scrapes(standin, scraper_for, None, set(), scenario="managed-instance-2025")
    assert [r for r in caplog.records if r.name == "mssql_memory_exporter.scrape.platform"] == []
    assert set(by_collector(got[-1], "mssql_exporter_collector_success").values()) == {1.0}
    assert set(by_collector(got[-1], "mssql_exporter_collector_enabled").values()) == {1.0}


def test_the_stand_in_answers_as_the_platform_its_catalog_says():
    """catalog.yaml's `platforms`: the Azure SQL Database scenario has no sys.master_files (Msg 208, and
    OBJECT_ID is NULL), a box SQL Server and a Managed Instance have it."""
    from tests.standin.scenario import Clock, Instance, Scenario
    from tests.standin.tsql import Interpreter

    def instance(name: str) -> Instance:
        return Instance(Scenario.load(name), Clock(manual=True))

    azure = instance("azure-sql-database")
    for name in NOT_ON_AZURE_SQL_DATABASE:
        assert not azure.object_exists(name)
        assert instance("healthy-oltp").object_exists(name)
        assert instance("managed-instance").object_exists(name)
    assert azure.object_exists("sys.dm_os_performance_counters")
    reply = Interpreter(azure).run("SELECT mf.database_id FROM sys.master_files AS mf;")
    assert [getattr(r, "number", None) for r in reply] == [208]


def test_sql_server_2025_scrapes_with_every_collector_healthy(standin, scraper_for):
    """ProductVersion 17.x is the catalog's "2025" release: every column up to it answers."""
    got = scrapes(standin, scraper_for, None, set(), scenario="sql2025")
    assert set(by_collector(got[-1], "mssql_exporter_collector_success").values()) == {1.0}
    assert set(by_collector(got[-1], "mssql_exporter_collector_enabled").values()) == {1.0}
    versions = {dict(labels)["version"] for name, labels in got[-1] if name == "mssql_build_info"}
    assert versions == {"17.0.1000.7"}
