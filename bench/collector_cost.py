"""(g) What each collector costs the exporter: a scrape with every collector against one without it.

One scraper and one connection to a stand-in; each round probes every variant once in a shuffled order
(so machine noise spreads over all of them): every collector on, then, per collector, every collector but
that one and those that need it (`collect[]` narrowing, the way a site turns it off). Per probe: this
process's CPU time and the wall time of probe + exposition (the stand-in runs in its own process). A
collector's cost is the median over rounds of "all" minus "all but it" in the same round (paired, so a
slow minute cancels out); the series are those it adds. Beside it, its parse time: the median of its own
mssql_exporter_collector_duration_seconds in the "all" probes (rows to families, without the driver's
decoding or the exposition). Small collectors cost less than the noise of a loaded machine: their
differences can come out at 0 or just below, and read as "too small to measure", not as a saving.

Two custom collectors (docs/custom-collectors.md) run beside the built-in ones, so the table shows what a
site's own query costs per scrape: the shipped `blocking` file (answered from the scenario's
custom_queries) and `custom_waits`, a one-table query the stand-in runs itself.
"""

from __future__ import annotations

import os
import random
import re
import statistics
import time
from dataclasses import dataclass, field

from mssql_memory_exporter.collectors.base import CollectorRecord
from mssql_memory_exporter.config import ExporterConfig, parse_config
from mssql_memory_exporter.metrics.exposition import render
from mssql_memory_exporter.scrape.scraper import Scraper

from bench.common import Farm, target_yaml
from tests.conftest import PASSWORD_ENV, TEST_PASSWORD

CUSTOM_WAITS = {
    "name": "custom_waits",
    "query": "SELECT wait_type, waiting_tasks_count FROM sys.dm_os_wait_stats",
    "columns": ["wait_type", "waiting_tasks_count"],
    "metrics": [
        {
            "name": "mssql_custom_bench_waits_total",
            "type": "counter",
            "help": "Waits by type (a site's own query, for the benchmark).",
            "value_column": "waiting_tasks_count",
            "label_columns": ["wait_type"],
        }
    ],
}


def bench_config(port: int) -> ExporterConfig:
    """One target on the stand-in at `port`, every built-in collector and the two custom ones."""
    os.environ[PASSWORD_ENV] = TEST_PASSWORD
    data = {
        "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
        "targets": {"bench": target_yaml(port, query_timeout=30)},
        "collector_files": ["shipped:blocking"],
        "custom_collectors": [CUSTOM_WAITS],
    }
    return parse_config(data, source="bench")


# The collectors as the benchmark's config has them (the port does not change them).
COLLECTORS: tuple[CollectorRecord, ...] = bench_config(1).collector_records
EVERY = frozenset(record.name for record in COLLECTORS)
WARMUP = 5  # rounds before measuring: logins, first refreshes, the stand-in's parse of each batch
ALL = "(all)"
DURATION = re.compile(
    rb'^mssql_exporter_collector_duration_seconds\{.*collector="([a-z_]+)".*\} (\S+)$', re.MULTILINE
)


@dataclass
class CollectorCost:
    scenario: str
    rounds: int
    series: dict[str, int] = field(default_factory=dict)  # per variant
    cpu: dict[str, list[float]] = field(default_factory=dict)
    wall: dict[str, list[float]] = field(default_factory=dict)
    parse: dict[str, list[float]] = field(default_factory=dict)  # per collector, from the "all" probes


def _series(exposition: bytes) -> int:
    return sum(1 for line in exposition.splitlines() if line and not line.startswith(b"#"))


def without(name: str) -> frozenset[str]:
    """Every collector but `name` and those that need it (directly or not): what excluding it turns off."""
    off = {name}
    changed = True
    while changed:
        changed = False
        for record in COLLECTORS:
            if record.name not in off and off & set(record.needs):
                off.add(record.name)
                changed = True
    return EVERY - off


def measure(scenario: str, rounds: int) -> CollectorCost:
    variants: dict[str, frozenset[str] | None] = {ALL: None}
    variants.update({record.name: without(record.name) for record in COLLECTORS})
    cost = CollectorCost(scenario, rounds)
    order = list(variants)
    shuffle = random.Random(24)  # the same order every run
    with Farm(scenario) as farm:
        config = bench_config(farm.ports[0])
        target = config.targets["bench"]
        scraper = Scraper(config)
        try:
            for i in range(WARMUP + rounds):
                shuffle.shuffle(order)
                for name in order:
                    c0, t0 = time.process_time(), time.perf_counter()
                    text = render(scraper.probe(target, 30, variants[name]))
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    if i < WARMUP:
                        cost.series[name] = _series(text)
                        continue
                    cost.wall.setdefault(name, []).append(wall)
                    cost.cpu.setdefault(name, []).append(cpu)
                    if name == ALL:
                        for collector, seconds in DURATION.findall(text):
                            cost.parse.setdefault(collector.decode(), []).append(float(seconds))
        finally:
            scraper.close()
    return cost


def _paired_ms(per_round: dict[str, list[float]], name: str) -> float:
    """Median over rounds of (all - all but `name`), in ms."""
    return statistics.median(a - b for a, b in zip(per_round[ALL], per_round[name], strict=True)) * 1000


def summary(c: CollectorCost) -> dict[str, object]:
    cpu = statistics.median(c.cpu[ALL]) * 1000
    wall = statistics.median(c.wall[ALL]) * 1000
    return {
        "scenario": c.scenario,
        "rounds": c.rounds,
        "all": {"series": c.series[ALL], "cpu_ms": cpu, "wall_ms": wall},
        "collectors": {
            name: {
                "turns_off": sorted(EVERY - without(name)),
                "series": c.series[ALL] - c.series[name],
                "cpu_ms": _paired_ms(c.cpu, name),
                "wall_ms": _paired_ms(c.wall, name),
                "parse_ms": statistics.median(c.parse.get(name, [0.0])) * 1000,
            }
            for name in (r.name for r in COLLECTORS)
        },
    }


def table(costs: list[CollectorCost]) -> tuple[list[str], list[list[object]]]:
    figures = [summary(c) for c in costs]
    headers = ["collector (off with it)"]
    for f in figures:
        headers += [f"{f['scenario']}: series", "parse ms", "CPU ms", "wall ms"]
    rows: list[list[object]] = []
    for record in COLLECTORS:
        first = figures[0]["collectors"][record.name]  # type: ignore[index]
        dependents = [n for n in first["turns_off"] if n != record.name]
        row: list[object] = [record.name + (f" (+{', '.join(dependents)})" if dependents else "")]
        for f in figures:
            one = f["collectors"][record.name]  # type: ignore[index]
            row += [one["series"], f"{one['parse_ms']:.3f}", f"{one['cpu_ms']:.2f}", f"{one['wall_ms']:.2f}"]
        rows.append(row)
    total: list[object] = ["every collector (the whole scrape)"]
    for f in figures:
        whole = f["all"]  # type: ignore[index]
        parse = sum(f["collectors"][r.name]["parse_ms"] for r in COLLECTORS)  # type: ignore[index]
        total += [whole["series"], f"{parse:.3f}", f"{whole['cpu_ms']:.2f}", f"{whole['wall_ms']:.2f}"]
    rows.append(total)
    return headers, rows
