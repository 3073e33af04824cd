"""The hybrid_buffer_pool collector: its facts from the stand-in's rows in process."""

from __future__ import annotations

from tests.conftest import scrape, value
from tests.file_figures import MB


def test_hybrid_buffer_pool_on_a_dax_volume(offline_standin, scraper_for):
    s = offline_standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 1
    assert value(got, "mssql_hybrid_buffer_pool_enabled") == 1
    # The database-level switch is on by default: every database but archive (master, tempdb, sales,
    # stock, reports), whether or not its files are on PMEM.
    assert value(got, "mssql_hybrid_buffer_pool_databases") == 5
    # Only sales and stock data files count: 2 x 204,800 MB (sizes are whole 8 KiB pages). archive's data
    # file is on PMEM with the switch off; reports has it on, with its data file off PMEM; the logs on
    # PMEM are not data files.
    page = 8192
    expected = 2 * (204800 * MB // page) * page
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == expected


def test_hybrid_buffer_pool_databases_are_read_with_the_file_list_not_every_scrape(
    offline_standin, scraper_for
):
    s = offline_standin("hbp-dax")
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    scraper = scraper_for(config)
    first = scrape(scraper, config)
    s.clock.advance(15)
    second = scrape(scraper, config)  # not a refresh: volume_refresh_seconds has not passed
    batches = [sql for sql in s.handler.sql_seen if "N'perf'" in sql]
    assert len(batches) == 2 and "is_memory_optimized_enabled" in batches[0]
    assert "is_memory_optimized_enabled" not in batches[1]
    for got in (first, second):
        assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
        assert value(got, "mssql_hybrid_buffer_pool_databases") == 5
    eligible = "mssql_hybrid_buffer_pool_eligible_bytes"
    assert value(second, eligible, volume="/mnt/pmem0") == value(first, eligible, volume="/mnt/pmem0") > 0


def test_hybrid_buffer_pool_absent_before_2019_is_not_a_failure(offline_standin, scraper_for):
    s = offline_standin("named-instance-padded")  # 15.x has the view; make it an older server
    s.instance.scenario.properties["ProductVersion"] = "14.0.3456.2"
    config = s.config()
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_exporter_collector_success", collector="hybrid_buffer_pool") == 1
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 0
    assert value(got, "mssql_hybrid_buffer_pool_databases") == 0


def test_hybrid_buffer_pool_off_at_server_level_serves_nothing(offline_standin, scraper_for):
    s = offline_standin("hbp-dax")
    s.instance.scenario.files.hbp = {"configured": 1, "enabled": 0}  # configured, awaiting a restart
    config = s.config(pmem_volumes=["/mnt/pmem0"], volume_map={"/mnt/pmem0": "/mnt/pmem0"})
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_hybrid_buffer_pool_configured") == 1
    assert value(got, "mssql_hybrid_buffer_pool_enabled") == 0
    assert value(got, "mssql_hybrid_buffer_pool_eligible_bytes", volume="/mnt/pmem0") == 0
