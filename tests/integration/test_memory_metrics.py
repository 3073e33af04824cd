"""Issue 16's pressure scenarios through the stand-in, told across collectors: every new family on a
healthy instance, an older server, external pressure, plan-cache bloat. Each collector's own facts (units,
NULL handling, version checks, bounded label sets) are in tests/unit/test_collector_<name>.py."""

from __future__ import annotations

import pytest

from tests.conftest import samples_of, scrape, value
from tests.offline import collect, results_for
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter
from tests.unit.test_collector_memory_clerks import clerks_of

KIB = 1024
MIB = 1024 * 1024
GIB = 1024**3


# --- end to end: Scraper -> FreeTDS -> strict stand-in ------------------------------------------------


NEW_COLLECTORS = ("memory_manager", "memory_node", "os_memory", "memory_config", "resource_semaphores")


def test_healthy_instance_exports_every_new_family(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    got = scrape(scraper_for(config), config)
    for collector in NEW_COLLECTORS:
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    assert value(got, "mssql_memory_workspace_maximum_bytes") == 12288000 * KIB
    assert value(got, "mssql_memory_lock_bytes") == 32768 * KIB
    assert value(got, "mssql_memory_node_foreign_bytes", node="0") == 0
    assert value(got, "mssql_memory_node_target_bytes", node="0") == 16 * GIB
    assert value(got, "mssql_memory_model_info", model="CONVENTIONAL") == 1
    assert value(got, "mssql_config_max_server_memory_bytes") == 16 * GIB


def test_an_older_server_lacks_the_memory_model_and_nothing_else(standin, scraper_for):
    s = standin("sql2016-rtm")
    config = s.config()
    got = scrape(scraper_for(config), config)
    for collector in NEW_COLLECTORS:
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1, collector
    assert not [k for k in got if k[0] == "mssql_memory_model_info"]
    assert value(got, "mssql_memory_committed_target_bytes") == 16 * GIB
    assert value(got, "mssql_config_max_server_memory_bytes") == 16 * GIB


def test_external_pressure_shows_the_os_taking_memory_back(standin, scraper_for):
    s = standin("external-pressure")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(10)
    before = scrape(scraper, config)
    assert value(before, "mssql_os_memory_low_signal") == 0
    assert value(before, "mssql_process_physical_memory_low") == 0
    s.clock.advance(20)
    got = scrape(scraper, config)
    assert value(got, "mssql_os_memory_low_signal") == 1
    assert value(got, "mssql_os_memory_high_signal") == 0
    assert value(got, "mssql_os_memory_state", state="low") == 1
    assert value(got, "mssql_process_physical_memory_low") == 1
    assert value(got, "mssql_os_available_physical_memory_bytes") == 256 * MIB
    assert value(got, "mssql_memory_committed_target_bytes") < value(got, "mssql_memory_committed_bytes")
    assert value(got, "mssql_memory_target_bytes") < value(got, "mssql_memory_total_bytes")
    # max server memory did not move: the squeeze came from outside
    assert value(got, "mssql_config_max_server_memory_bytes") == 16 * GIB
    assert value(got, "mssql_process_memory_utilization_ratio") == pytest.approx(0.83)


# ---- memory clerks -------------------------------------------------------------------------------


def test_group_by_in_the_interpreter_refuses_an_ungrouped_column():
    instance = Instance(Scenario.load("healthy-oltp"), Clock(manual=True))
    reply = Interpreter(instance).run(
        "SELECT mc.type, mc.pages_kb FROM sys.dm_os_memory_clerks AS mc GROUP BY mc.type;"
    )
    assert getattr(reply[0], "number", None) == 8120
    reply = Interpreter(instance).run(
        "SELECT mc.type, SUM(mc.pages_kb) AS kb, COUNT(mc.pages_kb) AS n FROM sys.dm_os_memory_clerks AS mc"
        " WHERE mc.type = N'MEMORYCLERK_SQLBUFFERPOOL' GROUP BY mc.type;"
    )
    assert reply[0].rows == [("MEMORYCLERK_SQLBUFFERPOOL", 14809600, 2)]  # node 0 and the DAC node


# ---- wait statistics -----------------------------------------------------------------------------


# ---- compilations and the plan-cache-bloat scenario ----------------------------------------------


def test_plan_cache_bloat_shows_the_plan_cache_and_the_compilations(standin, scraper_for):
    s = standin("plan-cache-bloat")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(10)
    first = scrape(scraper, config)
    s.clock.advance(10)
    got = scrape(scraper, config)
    for collector in ("memory_clerks", "wait_stats", "sql_statistics"):
        assert value(got, "mssql_exporter_collector_success", collector=collector) == 1
    clerks = clerks_of(got)
    assert clerks["CACHESTORE_SQLCP"] == 6 * GIB
    assert clerks["CACHESTORE_SQLCP"] > 0.35 * value(got, "mssql_memory_total_bytes")
    assert max(clerks, key=clerks.__getitem__) == "MEMORYCLERK_SQLBUFFERPOOL"

    def per_second(metric: str) -> float:
        return (value(got, metric) - value(first, metric)) / 10

    assert per_second("mssql_sql_compilations_total") == 1000
    assert per_second("mssql_sql_recompilations_total") == 5
    assert per_second("mssql_sql_compilations_total") / per_second("mssql_batch_requests_total") > 0.8
    healthy = samples_of(collect(results_for("healthy-oltp")))
    assert clerks_of(healthy)["CACHESTORE_SQLCP"] == 512 * MIB
    assert (
        value(healthy, "mssql_sql_compilations_total") / value(healthy, "mssql_batch_requests_total") == 0.05
    )
