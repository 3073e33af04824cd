"""(f) What the memory diagnosis sections cost: one scrape with every collector against one without them.

Two scrapers, each on its own connection to the same stand-in, probe in alternating order (flipped every
scrape) so machine noise hits both alike. Per scrape: wall time of probe + exposition, and this process's
CPU time (the stand-in runs in its own). The share is (all - without) / all of the medians: what the
sections of sys.dm_os_sys_memory, sys.dm_os_process_memory, sys.configurations, Memory Node,
sys.dm_exec_query_resource_semaphores, sys.dm_os_memory_clerks and sys.dm_os_wait_stats add to a scrape
(rows sent, decoded and turned into metrics).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.metrics.exposition import render
from mssql_memory_exporter.scrape.scraper import Scraper

from bench.common import Farm, target_yaml
from tests.conftest import make_config

WARMUP = 20
DIAGNOSIS = (
    "os_memory",
    "memory_config",
    "memory_node",
    "resource_semaphores",
    "memory_clerks",
    "wait_stats",
)


@dataclass
class Share:
    scenario: str
    scrapes: int
    series_all: int = 0
    series_without: int = 0
    wall: dict[str, list[float]] = field(default_factory=lambda: {"all": [], "without": []})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"all": [], "without": []})


def _series(exposition: bytes) -> int:
    return sum(1 for line in exposition.splitlines() if line and not line.startswith(b"#"))


def measure(scenario: str, n: int) -> Share:
    without = tuple(c for c in COLLECTORS if c.name not in DIAGNOSIS)
    assert len(COLLECTORS) - len(without) == len(DIAGNOSIS), "a diagnosis collector was renamed"
    share = Share(scenario, n)
    with Farm(scenario) as farm:
        config = make_config({"bench": target_yaml(farm.ports[0])})
        target = config.targets["bench"]
        scrapers = {"all": Scraper(config), "without": Scraper(config, without)}
        try:
            for name, scraper in scrapers.items():
                for _ in range(WARMUP):
                    text = render(scraper.probe(target, 10))
                if name == "all":
                    share.series_all = _series(text)
                else:
                    share.series_without = _series(text)
            order = list(scrapers)
            for i in range(n):
                for name in order if i % 2 == 0 else reversed(order):
                    c0, t0 = time.process_time(), time.perf_counter()
                    render(scrapers[name].probe(target, 10))
                    share.wall[name].append(time.perf_counter() - t0)
                    share.cpu[name].append(time.process_time() - c0)
        finally:
            for scraper in scrapers.values():
                scraper.close()
    return share


def summary(s: Share) -> dict[str, object]:
    med = {k: statistics.median(v) for k, v in s.wall.items()}
    cpu = {k: statistics.mean(v) for k, v in s.cpu.items()}
    return {
        "scenario": s.scenario,
        "scrapes": s.scrapes,
        "series_all": s.series_all,
        "series_without": s.series_without,
        "median_ms_all": med["all"] * 1000,
        "median_ms_without": med["without"] * 1000,
        "cpu_ms_all": cpu["all"] * 1000,
        "cpu_ms_without": cpu["without"] * 1000,
    }


def table(shares: list[Share]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "scenario",
        "series (all / without)",
        "median ms all",
        "median ms without",
        "share of time",
        "CPU ms all",
        "CPU ms without",
        "share of CPU",
    ]
    rows = []
    for f in map(summary, shares):  # the same figures as the JSON, in ms
        rows.append(
            [
                f["scenario"],
                f"{f['series_all']} / {f['series_without']}",
                f"{f['median_ms_all']:.2f}",
                f"{f['median_ms_without']:.2f}",
                f"{(f['median_ms_all'] - f['median_ms_without']) / f['median_ms_all']:.0%}",
                f"{f['cpu_ms_all']:.2f}",
                f"{f['cpu_ms_without']:.2f}",
                f"{(f['cpu_ms_all'] - f['cpu_ms_without']) / f['cpu_ms_all']:.0%}",
            ]
        )
    return headers, rows
