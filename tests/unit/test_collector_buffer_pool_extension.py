"""The buffer_pool_extension collector: its facts from the stand-in's rows in process."""

from __future__ import annotations

from tests.conftest import scrape, value


def test_buffer_pool_extension_state_and_counters(offline_standin, scraper_for):
    from tests.standin.scenario import CounterSpec

    s = offline_standin("healthy-oltp")
    s.instance.scenario.files.bpe = {"path": "E:\\bpe\\ext.BPE", "size_kb": 33554432}
    buffer_manager = s.instance.scenario.counters["Buffer Manager"]
    buffer_manager["Extension page reads/sec"] = CounterSpec.parse({"rate": 300}, "test")
    buffer_manager["Extension page writes/sec"] = CounterSpec.parse({"rate": 120}, "test")
    buffer_manager["Extension allocated pages"] = CounterSpec.parse(4000000, "test")
    config = s.config()
    s.clock.advance(10)
    got = scrape(scraper_for(config), config)
    assert value(got, "mssql_buffer_pool_extension_enabled") == 1
    assert value(got, "mssql_buffer_pool_extension_size_bytes") == 33554432 * 1024
    assert value(got, "mssql_buffer_pool_extension_page_reads_total") == 3000
    assert value(got, "mssql_buffer_pool_extension_page_writes_total") == 1200
    assert value(got, "mssql_buffer_pool_extension_allocated_pages") == 4000000
