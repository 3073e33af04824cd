"""The collector files shipped with the exporter (collectors/shipped/: Agent jobs, backup age, blocking),
switched on with `collector_files: [shipped:NAME]` and scraped in process on stand-in scenarios playing
healthy and failing states, and Azure SQL Database, which has neither Agent nor msdb's backup history
(left out there, as built-in collectors are). Their SQL passes the stand-in's strict check against the
documented columns of msdb's tables (catalog.yaml). Fails on main: no shipped files, no `shipped:`."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.config import ConfigError
from mssql_memory_exporter.config.custom import SHIPPED_DIR
from mssql_memory_exporter.scrape.scraper import Outcome

from tests.custom_fixtures import BUILT_IN, Offline, config_with, enabled, success

SHIPPED = ["agent_jobs", "backup_age", "blocking"]


def shipped_config():
    return config_with(
        [],
        target={"collectors": {"include": [*BUILT_IN, *SHIPPED]}},
        collector_files=[f"shipped:{name}" for name in SHIPPED],
    )


def scrape(scenario: str) -> tuple[dict, dict[str, Outcome]]:
    config = shipped_config()
    offline = Offline(config, scenario)
    outcomes: dict[str, Outcome] = {}
    return offline.scrape(outcomes=outcomes), outcomes


def test_every_shipped_file_loads_and_only_those_are_shipped() -> None:
    assert sorted(p.stem for p in SHIPPED_DIR.glob("*.yml")) == SHIPPED
    with pytest.raises(ConfigError, match="no shipped file 'shipped:agent_job'; shipped: shipped:agent_jobs"):
        config_with([], collector_files=["shipped:agent_job"])


def test_healthy_server() -> None:
    samples, outcomes = scrape("healthy-oltp")
    assert {name: outcomes[name].status for name in SHIPPED} == dict.fromkeys(SHIPPED, "ok")
    job = (("agent_job", "nightly_full_backup"),)
    assert samples[("mssql_custom_agent_job_last_run_failed", job)] == 0.0
    assert samples[("mssql_custom_agent_job_enabled", (("agent_job", "old_import"),))] == 0.0
    assert ("mssql_custom_agent_job_running_seconds", job) not in samples  # NULL: not running
    log = (("backup_type", "log"), ("database_name", "sales"), ("recovery_model", "FULL"))
    assert samples[("mssql_custom_backup_age_seconds", log)] == 600.0
    assert samples[("mssql_custom_blocked_wait_longest_seconds", ())] == 0.0
    assert samples[("mssql_custom_deadlocks_total", ())] == 3.0


def test_failing_states() -> None:
    samples, _outcomes = scrape("shipped-collectors-failing")
    assert samples[("mssql_custom_agent_job_last_run_failed", (("agent_job", "nightly_full_backup"),))] == 1.0
    assert samples[("mssql_custom_agent_job_running_seconds", (("agent_job", "index_maintenance"),))] == 10800
    log = (("backup_type", "log"), ("database_name", "sales"), ("recovery_model", "FULL"))
    assert samples[("mssql_custom_backup_age_seconds", log)] == 21600.0
    never = (("backup_type", "full"), ("database_name", "staging"), ("recovery_model", "SIMPLE"))
    assert samples[("mssql_custom_backup_present", never)] == 0.0
    assert samples[("mssql_custom_blocked_wait_longest_seconds", ())] == 95.0
    assert (
        samples[("mssql_custom_head_blockers", ())] == 1.0
        and samples[("mssql_custom_blocked_requests", ())] == 3
    )
    assert samples[("mssql_custom_deadlocks_total", ())] == 41.0


def test_azure_sql_database_leaves_out_agent_and_backups() -> None:
    samples, outcomes = scrape("azure-sql-database")
    assert outcomes["agent_jobs"] == Outcome(
        "left out", "runs on azure_sql_managed_instance, sql_server only"
    )
    assert outcomes["backup_age"].status == "left out"
    assert enabled(samples, "agent_jobs") == 0.0 and success(samples, "agent_jobs") is None
    assert success(samples, "blocking") == 1.0


def test_a_denied_agent_table_fails_only_agent_jobs() -> None:
    offline = Offline(shipped_config())
    offline.instance.denied.add("msdb.dbo.sysjobs", 229)
    outcomes: dict[str, Outcome] = {}
    samples = offline.scrape(outcomes=outcomes)
    assert outcomes["agent_jobs"].error_number == 229
    assert "database 'msdb', schema 'dbo'" in outcomes["agent_jobs"].reason
    assert success(samples, "backup_age") == 1.0 and success(samples, "blocking") == 1.0
