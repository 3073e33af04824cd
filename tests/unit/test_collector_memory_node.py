"""The memory_node collector (perf object Memory Node): its facts from the stand-in's rows in process."""

from __future__ import annotations

from tests.conftest import scrape, value

KIB = 1024
MIB = 1024 * 1024


def test_numa_nodes_each_report_their_memory(offline_standin, scraper_for):
    s = offline_standin("numa-4-nodes")
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
