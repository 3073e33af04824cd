"""Every scenario, end to end: Scraper -> pyodbc -> FreeTDS -> TCP -> stand-in, and back as exposition."""

from __future__ import annotations

import subprocess

import pytest

from tests import tools
from tests.conftest import exposition, samples_of, scrape, value
from tests.timeouts import PATIENT_SECONDS

KIB = 1024
EXPECTED_COLLECTORS = (
    "server_properties",
    "sys_info",
    "buffer_manager",
    "buffer_node",
    "memory_manager",
    "sql_statistics",
)


def assert_all_collectors_ok(samples: dict) -> None:
    assert value(samples, "mssql_up") == 1
    for collector in EXPECTED_COLLECTORS:
        assert value(samples, "mssql_exporter_collector_success", collector=collector) == 1, collector


def test_healthy_oltp_values_units_and_rates(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(100)
    first = scrape(scraper, config)
    assert_all_collectors_ok(first)
    assert value(first, "mssql_page_life_expectancy_seconds") == 5400
    assert value(first, "mssql_buffer_cache_hit_ratio") == pytest.approx(0.9995)
    assert value(first, "mssql_memory_target_bytes") == 16777216 * KIB
    assert value(first, "mssql_memory_free_bytes") == 409600 * KIB
    assert value(first, "mssql_memory_database_cache_bytes") == 14400000 * KIB
    assert value(first, "mssql_memory_grants_outstanding") == 2
    assert value(first, "mssql_buffer_node_page_life_expectancy_seconds", node="0") == 5400
    assert (
        value(
            first,
            "mssql_build_info",
            version="16.0.4135.4",
            product_level="RTM",
            update_level="CU15",
            edition="Developer Edition (64-bit)",
            engine_edition="3",
        )
        == 1
    )
    assert value(first, "mssql_target_info", workload="oltp") == 1

    s.clock.advance(10)
    second = scrape(scraper, config)
    # "/sec" counters are cumulative: over 10 s the scenario's rates add exactly rate x 10.
    assert value(second, "mssql_batch_requests_total") - value(first, "mssql_batch_requests_total") == 12000
    lookups = value(second, "mssql_page_lookups_total") - value(first, "mssql_page_lookups_total")
    batches = value(second, "mssql_batch_requests_total") - value(first, "mssql_batch_requests_total")
    assert lookups / batches == 50
    assert value(second, "mssql_lazy_writes_total") - value(first, "mssql_lazy_writes_total") == 15
    # The start time is the same instant read twice: it must not wobble between scrapes.
    assert value(second, "mssql_start_time_seconds") == value(first, "mssql_start_time_seconds")


def test_counter_types_come_from_cntr_type(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config()
    text = exposition(scraper_for(config).probe(config.targets["standin"], PATIENT_SECONDS))
    assert "# TYPE mssql_page_lookups_total counter" in text
    assert "# TYPE mssql_lazy_writes_total counter" in text
    assert "# TYPE mssql_free_list_stalls_total counter" in text
    assert "# TYPE mssql_page_life_expectancy_seconds gauge" in text
    assert "# TYPE mssql_buffer_cache_hit_ratio gauge" in text
    # The base row is an input to the ratio, never a metric of its own.
    assert "base" not in text.lower().replace("database", "")


def test_memory_pressure_crosses_every_dell_threshold(standin, scraper_for):
    s = standin("memory-pressure")
    config = s.config()
    scraper = scraper_for(config)
    s.clock.advance(10)
    before = scrape(scraper, config)
    assert value(before, "mssql_page_life_expectancy_seconds") == 2400
    s.clock.advance(20)  # t=30: the pressure started at t=20
    first = scrape(scraper, config)
    s.clock.advance(10)
    second = scrape(scraper, config)
    assert_all_collectors_ok(second)

    def rate(name: str) -> float:
        return (value(second, name) - value(first, name)) / 10

    assert value(second, "mssql_page_life_expectancy_seconds") == 140 < 300
    assert value(second, "mssql_buffer_node_page_life_expectancy_seconds", node="0") == 140
    assert rate("mssql_free_list_stalls_total") == 6 > 2
    assert rate("mssql_lazy_writes_total") == 45 > 20
    assert rate("mssql_page_lookups_total") / rate("mssql_batch_requests_total") == 200 > 100
    assert rate("mssql_page_reads_total") + rate("mssql_page_writes_total") == 1300 > 90
    assert value(second, "mssql_memory_free_bytes") == 2 * 1024 * 1024 < 5 * 1024 * 1024
    assert value(second, "mssql_memory_grants_pending") == 4
    assert value(second, "mssql_buffer_cache_hit_ratio") == pytest.approx(0.93)


def test_named_instance_with_padded_names_loses_nothing(standin, scraper_for):
    healthy, named = standin("healthy-oltp"), standin("named-instance-padded")
    named_config = named.config()
    got = scrape(scraper_for(named_config), named_config)
    assert_all_collectors_ok(got)
    reference_config = healthy.config()
    reference = scrape(scraper_for(reference_config), reference_config)
    # Every metric family of a default instance is present on the named one too.
    assert {k[0] for k in reference} <= {k[0] for k in got}
    assert value(got, "mssql_buffer_node_page_life_expectancy_seconds", node="1") == 3000
    assert value(got, "mssql_buffer_node_remote_page_lookups_total", node="1") == 0  # clock at 0
    # SQL Server's own harmonic mean of the node PLEs: 2 / (1/3600 + 1/3000)
    assert value(got, "mssql_page_life_expectancy_seconds") == int(2 / (1 / 3600 + 1 / 3000))
    assert (
        value(
            got,
            "mssql_build_info",
            version="15.0.4375.4",
            product_level="RTM",
            update_level="CU28",
            edition="Enterprise Edition (64-bit)",
            engine_edition="3",
        )
        == 1
    )


def test_numa_starved_node_visible_while_instance_ple_looks_fine(standin, scraper_for):
    s = standin("numa-4-nodes")
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert_all_collectors_ok(got)
    nodes = {
        labels: v
        for (name, labels), v in got.items()
        if name == "mssql_buffer_node_page_life_expectancy_seconds"
    }
    assert {dict(k)["node"] for k in nodes} == {"0", "1", "2", "3"}
    assert value(got, "mssql_page_life_expectancy_seconds") > 300  # the instance figure hides it...
    assert min(nodes.values()) == 150  # ...the node does not
    assert value(got, "mssql_buffer_node_database_pages", node="3") == 60000


def test_extra_labels_and_workload_reach_every_target_metric(standin, scraper_for):
    s = standin("healthy-oltp")
    config = s.config(labels={"env": "prod", "team": "dba"}, workload="olap")
    got = scrape(scraper_for(config), config)
    names = {name for name, _ in got}
    for name, labels in got:
        assert ("env", "prod") in labels and ("team", "dba") in labels, name
    assert "mssql_page_life_expectancy_seconds" in names
    assert value(got, "mssql_target_info", env="prod", team="dba", workload="olap") == 1


@tools.needs(tools.PROMTOOL)
@pytest.mark.parametrize(
    "scenario", ["healthy-oltp", "memory-pressure", "named-instance-padded", "numa-4-nodes"]
)
def test_promtool_check_metrics_is_clean(standin, scraper_for, scenario):
    s = standin(scenario)
    config = s.config()
    text = exposition(scraper_for(config).probe(config.targets["standin"], PATIENT_SECONDS))
    assert samples_of(text)[("mssql_up", ())] == 1
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", result.stdout + result.stderr


@pytest.mark.parametrize("scenario", ["healthy-oltp", "numa-4-nodes"])
def test_reserved_label_names_cover_every_label_the_exporter_emits(standin, scraper_for, scenario):
    from mssql_memory_exporter.config import RESERVED_LABELS

    s = standin(scenario)
    config = s.config()
    got = scrape(scraper_for(config), config)
    emitted = {name for _, labels in got for name, _ in labels}
    assert emitted, "no labels at all: the check would prove nothing"
    assert emitted <= RESERVED_LABELS, emitted - RESERVED_LABELS
