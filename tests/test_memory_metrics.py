"""Issue 16 through the stand-in: OS and process memory, memory configuration and model, the new
Memory Manager and Memory Node counters, resource semaphores, memory clerks, wait statistics, compilations;
units, NULL handling, version checks, bounded label sets and the pressure scenarios."""

from __future__ import annotations

import pytest
from mssql_memory_exporter.batch import ResultSet, route
from mssql_memory_exporter.collectors import (
    memory_clerks,
    memory_config,
    os_memory,
    resource_semaphores,
    wait_stats,
)
from mssql_memory_exporter.collectors.base import FamilyBuilder, ImpossibleValue, ScrapeContext, SectionResult

from tests.conftest import exposition, samples_of, scrape, value
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.tsql import Interpreter
from tests.test_collectors import BATCH, SECTIONS, collect, results_for

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
    node = {
        name: [value(got, f"mssql_memory_node_{name}_bytes", node=str(n)) for n in range(4)]
        for name in ("total", "target", "free", "stolen", "database", "foreign")
    }
    # Node 3 is short of local memory: far below its target, a gigabyte of what it uses is foreign.
    assert node["foreign"][3] == 1048576 * KIB and max(node["foreign"][:3]) < 4 * MIB
    assert node["total"][3] < node["target"][3] / 8
    assert all(t > 0.95 * g for t, g in zip(node["total"][:3], node["target"][:3], strict=True))
    assert len(set(node["total"])) == 4  # each node its own figures, not one value copied
    for n in range(4):  # each node's memory is its database pages, free and stolen memory
        assert node["database"][n] + node["free"][n] + node["stolen"][n] == node["total"][n]
    assert sum(node["total"]) == value(got, "mssql_memory_total_bytes")
    assert sum(node["target"]) == value(got, "mssql_memory_target_bytes")
    # the node's database memory is its Buffer Node database pages (8 KiB each)
    assert node["database"][3] == value(got, "mssql_buffer_node_database_pages", node="3") * 8 * KIB


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


# ---- memory clerks -------------------------------------------------------------------------------


def clerks_of(got: dict) -> dict[str, float]:
    return {
        dict(labels)["clerk"]: v for (name, labels), v in got.items() if name == "mssql_memory_clerk_bytes"
    }


@pytest.mark.parametrize("scenario", ["healthy-oltp", "plan-cache-bloat", "numa-4-nodes"])
def test_the_clerks_add_up_to_total_server_memory(scenario):
    got = samples_of(collect(results_for(scenario)))
    clerks = clerks_of(got)
    assert set(clerks) == set(memory_clerks.LABELS)
    assert sum(clerks.values()) == pytest.approx(value(got, "mssql_memory_total_bytes"), rel=0.02)
    # the buffer pool clerk holds the database pages and the free list
    database_and_free = value(got, "mssql_memory_database_cache_bytes") + value(
        got, "mssql_memory_free_bytes"
    )
    assert clerks["MEMORYCLERK_SQLBUFFERPOOL"] == pytest.approx(database_and_free, rel=0.01)


def run_with(scenario: str, change) -> dict[str, SectionResult]:
    instance = Instance(Scenario.load(scenario), Clock(manual=True))
    change(instance.scenario.views)
    instance.clock.advance(60)
    reply = Interpreter(instance).run(BATCH)
    return route([ResultSet(tuple(c.name for c in r.columns), list(r.rows)) for r in reply], SECTIONS)


def test_an_unknown_clerk_type_lands_in_other_summed_in_sql():
    before = clerks_of(samples_of(collect(results_for("healthy-oltp"))))

    def add_clerks(views):
        views["dm_os_memory_clerks"]["MEMORYCLERK_FROM_A_LATER_RELEASE"] = [
            {"memory_node_id": 0, "pages_kb": 4096},
            {"memory_node_id": 1, "pages_kb": 1024},
        ]

    results = run_with("healthy-oltp", add_clerks)
    # The server sends one row per label: the new type was folded into "other" by the SQL, not in Python.
    labels = [row["clerk"] for row in results[memory_clerks.TAG].rows]
    assert sorted(labels) == sorted(memory_clerks.LABELS)
    after = clerks_of(samples_of(collect(results)))
    assert set(after) == set(before)
    assert after["other"] - before["other"] == 5120 * KIB
    assert {k: v for k, v in after.items() if k != "other"} == {
        k: v for k, v in before.items() if k != "other"
    }


def test_a_listed_clerk_type_the_server_lacks_is_zero_so_the_series_stay_put():
    results = run_with("healthy-oltp", lambda views: views["dm_os_memory_clerks"].pop("MEMORYCLERK_XTP"))
    clerks = clerks_of(samples_of(collect(results)))
    assert len(clerks) == len(memory_clerks.CLERKS) + 1 == 16
    assert clerks["MEMORYCLERK_XTP"] == 0


def clerk_rows(*rows: tuple[object, object]) -> dict[str, SectionResult]:
    return {
        memory_clerks.TAG: SectionResult(
            rows=[{"section": "memory_clerks", "clerk": c, "pages_kb": kb} for c, kb in rows]
        )
    }


def test_a_clerk_name_the_sql_did_not_fold_never_makes_a_new_series():
    out = FamilyBuilder({})
    results = clerk_rows(
        ("cachestore_sqlcp ", 10), ("SOMETHING_ELSE", 5), ("other", 1), ("CACHESTORE_SQLCP", 2)
    )
    memory_clerks.collect(results, ScrapeContext(now=0.0, workload="oltp", memo={}), out)
    clerks = clerks_of(samples_of(exposition(out.families())))
    assert len(clerks) == 16
    assert clerks["CACHESTORE_SQLCP"] == 12 * KIB and clerks["other"] == 6 * KIB


def test_a_negative_clerk_fails_the_collector_rather_than_shrink_a_sum():
    with pytest.raises(ImpossibleValue, match="pages_kb"):
        memory_clerks.collect(
            clerk_rows(("other", 100), ("other", -50)),
            ScrapeContext(now=0.0, workload="oltp", memo={}),
            FamilyBuilder({}),
        )


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


def waits_of(got: dict, metric: str = "mssql_wait_seconds_total") -> dict[str, float]:
    return {dict(labels)["wait_type"]: v for (name, labels), v in got.items() if name == metric}


def test_waits_are_filtered_in_sql_and_read_in_seconds():
    results = results_for("healthy-oltp")
    sent = {row["wait_type"] for row in results[wait_stats.TAG].rows}
    assert sent == set(wait_stats.WAIT_TYPES)  # SOS_SCHEDULER_YIELD, LCK_M_X... stayed on the server
    got = samples_of(collect(results))
    assert waits_of(got)["WRITELOG"] == 6.0  # 100 ms per second for 60 s
    assert waits_of(got, "mssql_wait_tasks_total")["WRITELOG"] == 12000
    assert waits_of(got, "mssql_wait_signal_seconds_total")["WRITELOG"] == 0.3
    assert len(waits_of(got)) == 12


def test_a_wait_type_the_server_does_not_list_is_absent_not_zero():
    results = run_with("healthy-oltp", lambda views: views["dm_os_wait_stats"].pop("THREADPOOL"))
    got = samples_of(collect(results))
    for metric in ("mssql_wait_seconds_total", "mssql_wait_tasks_total", "mssql_wait_signal_seconds_total"):
        waits = waits_of(got, metric)
        assert "THREADPOOL" not in waits and len(waits) == 11, metric


def test_grant_starvation_grows_resource_semaphore_wait_seconds(standin, scraper_for):
    s = standin("grant-starvation")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(10)
    calm = scrape(scraper, config)
    s.clock.advance(20)
    first = scrape(scraper, config)
    s.clock.advance(10)
    second = scrape(scraper, config)
    before = waits_of(calm)["RESOURCE_SEMAPHORE"]
    assert before < 0.01  # healthy: next to no grant waits
    grown = waits_of(second)["RESOURCE_SEMAPHORE"] - waits_of(first)["RESOURCE_SEMAPHORE"]
    assert grown == pytest.approx(60.0)  # six waiters: 6 s of waiting per second, over 10 s
    tasks = "mssql_wait_tasks_total"
    assert waits_of(second, tasks)["RESOURCE_SEMAPHORE"] - waits_of(first, tasks)["RESOURCE_SEMAPHORE"] == 30
    # forced grants spill to tempdb
    assert waits_of(second)["IO_COMPLETION"] - waits_of(first)["IO_COMPLETION"] == pytest.approx(0.4)


def test_clearing_the_wait_statistics_is_a_counter_reset_not_a_failure(standin, scraper_for):
    """DBCC SQLPERF('sys.dm_os_wait_stats', CLEAR) sets the counts back to 0, as a restart does (the
    stand-in plays both by restarting its counters): the values drop, the collector still succeeds, and
    rate() sees a reset."""
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(30)
    before = scrape(scraper, config)
    s.instance.restart()
    s.clock.advance(5)
    after = scrape(scraper, config)
    assert value(after, "mssql_exporter_collector_success", collector="wait_stats") == 1
    assert waits_of(after)["WRITELOG"] < waits_of(before)["WRITELOG"]
    assert waits_of(after)["WRITELOG"] == pytest.approx(0.5)


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
