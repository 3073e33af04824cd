"""Issue 16 part 1 through the stand-in: OS and process memory, memory configuration and model, the new
Memory Manager and Memory Node counters, resource semaphores; units, NULL handling, version checks and the
two pressure scenarios."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.collectors import memory_config, os_memory, resource_semaphores
from mssql_memory_exporter.collectors.base import FamilyBuilder, ImpossibleValue, ScrapeContext, SectionResult

from tests.conftest import exposition, samples_of, scrape, value
from tests.test_collectors import results_for

KIB = 1024
MIB = 1024 * 1024
GIB = 1024**3


def offline(scenario: str, at: float = 60.0) -> dict:
    results = results_for(scenario, at)
    out = FamilyBuilder({})
    ctx = ScrapeContext(now=0.0, workload="oltp", memo={})
    for module in (os_memory, memory_config, resource_semaphores):
        module.COLLECTOR.collect(results, ctx, out)
    return samples_of(exposition(out.families()))


def test_kb_columns_become_bytes_and_percent_a_ratio():
    got = offline("healthy-oltp")
    assert value(got, "mssql_os_physical_memory_bytes") == 25165824 * KIB == 24 * GIB
    assert value(got, "mssql_os_available_physical_memory_bytes") == 6 * GIB
    assert value(got, "mssql_process_physical_memory_bytes") == 17170432 * KIB
    assert value(got, "mssql_memory_committed_bytes") == 16 * GIB
    assert value(got, "mssql_process_memory_utilization_ratio") == 1.0
    # the setting is in MB
    assert value(got, "mssql_config_max_server_memory_bytes") == 16384 * MIB == 16 * GIB
    assert value(got, "mssql_config_min_server_memory_bytes") == 0
    assert value(got, "mssql_memory_model_info", model="CONVENTIONAL") == 1


def test_the_memory_state_is_a_state_set_of_five_fixed_series():
    got = offline("healthy-oltp")
    states = {
        dict(labels)["state"]: v for (name, labels), v in got.items() if name == "mssql_os_memory_state"
    }
    assert states == {"high": 1, "steady": 0, "low": 0, "transitioning": 0, "other": 0}


def test_an_unknown_memory_state_text_is_other_not_a_new_series():
    results = results_for("healthy-oltp")
    result = results[os_memory.SYS_TAG]
    at = result.index("system_memory_state_desc")
    result.raw = [tuple("Memory is fine, thanks" if i == at else v for i, v in enumerate(result.raw[0]))]
    out = FamilyBuilder({})
    os_memory.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    got = samples_of(exposition(out.families()))
    assert value(got, "mssql_os_memory_state", state="other") == 1
    assert len([k for k in got if k[0] == "mssql_os_memory_state"]) == 5


def test_semaphores_are_labelled_by_pool_and_id_and_null_columns_are_absent():
    got = offline("healthy-oltp")
    pairs = {
        (dict(labels)["pool_id"], dict(labels)["resource_semaphore_id"])
        for (name, labels), _ in got.items()
        if name == "mssql_resource_semaphore_target_bytes"
    }
    assert pairs == {("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")}  # the id repeats per pool
    regular = {"pool_id": "2", "resource_semaphore_id": "0"}
    small = {"pool_id": "2", "resource_semaphore_id": "1"}
    assert value(got, "mssql_resource_semaphore_granted_bytes", **regular) == 20480 * KIB
    assert value(got, "mssql_resource_semaphore_timeout_errors_total", **regular) == 0
    # the small-query semaphore's NULL counts are left out, not exported as 0
    for name in (
        "mssql_resource_semaphore_timeout_errors_total",
        "mssql_resource_semaphore_forced_grants_total",
    ):
        assert (name, tuple(sorted(small.items()))) not in got
    assert value(got, "mssql_resource_semaphore_waiters", **small) == 0


def test_the_unlimited_default_max_server_memory_is_exported_as_it_is():
    results = results_for("healthy-oltp")
    result = results[memory_config.CONFIG_TAG]
    name, at = result.index("name"), result.index("value_in_use")
    result.raw = [
        tuple(
            2147483647 if i == at and row[name] == "max server memory (MB)" else v for i, v in enumerate(row)
        )
        for row in result.raw
    ]
    out = FamilyBuilder({})
    memory_config.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    got = samples_of(exposition(out.families()))
    assert value(got, "mssql_config_max_server_memory_bytes") == 2147483647 * MIB


def test_a_missing_setting_or_a_non_number_fails_the_collector():
    results = results_for("healthy-oltp")
    results[memory_config.CONFIG_TAG].raw = results[memory_config.CONFIG_TAG].raw[:1]
    with pytest.raises(Exception, match="server memory"):
        memory_config.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), FamilyBuilder({}))
    results = results_for("healthy-oltp")
    result = results[os_memory.PROCESS_TAG]
    at = result.index("memory_utilization_percentage")
    result.raw = [tuple(float("nan") if i == at else v for i, v in enumerate(result.raw[0]))]
    with pytest.raises(ImpossibleValue, match="memory_utilization_percentage"):
        os_memory.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), FamilyBuilder({}))


def test_the_model_section_is_guarded_by_a_column_check():
    section = next(s for s in memory_config.SECTIONS if s.tag == memory_config.MODEL_TAG)
    assert section.optional and section.requires_columns == (("sys.dm_os_sys_info", "sql_memory_model_desc"),)
    assert isinstance(results_for("sql2016-rtm")[memory_config.MODEL_TAG], SectionResult)
    assert results_for("sql2016-rtm")[memory_config.MODEL_TAG].unavailable
    assert not results_for("healthy-oltp")[memory_config.MODEL_TAG].unavailable


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


def test_numa_nodes_each_report_their_memory(standin, scraper_for):
    s = standin("numa-4-nodes")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_memory_node_foreign_bytes", node="3") == 1048576 * KIB
    assert [value(got, "mssql_memory_node_total_bytes", node=str(n)) for n in range(4)] == [12 * GIB] * 4


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


def test_grant_starvation_shows_waiters_and_rising_timeouts(standin, scraper_for):
    s = standin("grant-starvation")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(30)
    first = scrape(scraper, config)
    s.clock.advance(10)
    second = scrape(scraper, config)
    regular = {"pool_id": "2", "resource_semaphore_id": "0"}
    assert value(second, "mssql_resource_semaphore_waiters", **regular) == 6
    assert value(second, "mssql_memory_grants_pending") == 6
    timeouts = "mssql_resource_semaphore_timeout_errors_total"
    assert value(second, timeouts, **regular) - value(first, timeouts, **regular) == 2  # 0.2/s over 10 s
    assert value(second, "mssql_resource_semaphore_available_bytes", **regular) == 8000 * KIB
    assert value(second, "mssql_os_memory_low_signal") == 0  # the OS is calm: an inside shortage
