"""(g) What each collector costs the exporter: a scrape with every collector against one without it.

One scraper and one connection to a stand-in; each round probes every variant once in a shuffled order
(so machine noise spreads over all of them): every collector on, then, per collector, every collector but
that one and those that need it (`collect[]` narrowing, the way a site turns it off). Per probe: this
process's CPU time and the wall time of probe + exposition (the stand-in runs in its own process). A
collector's cost is the median of "all" minus the median of "all but it"; the series are those it adds.
Small collectors cost less than the noise of a loaded machine: their figures can come out at 0 or just
below, and read as "too small to measure", not as a saving.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.exposition import render
from mssql_memory_exporter.scrape import Scraper

from bench.common import Farm, target_yaml
from tests.conftest import make_config

EVERY = frozenset(record.name for record in COLLECTORS)
WARMUP = 5  # rounds before measuring: logins, first refreshes, the stand-in's parse of each batch
ALL = "(all)"


@dataclass
class CollectorCost:
    scenario: str
    rounds: int
    series: dict[str, int] = field(default_factory=dict)  # per variant
    cpu: dict[str, list[float]] = field(default_factory=dict)
    wall: dict[str, list[float]] = field(default_factory=dict)


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
        config = make_config({"bench": target_yaml(farm.ports[0], query_timeout=30)})
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
        finally:
            scraper.close()
    return cost


def summary(c: CollectorCost) -> dict[str, object]:
    cpu = {k: statistics.median(v) for k, v in c.cpu.items()}
    wall = {k: statistics.median(v) for k, v in c.wall.items()}
    return {
        "scenario": c.scenario,
        "rounds": c.rounds,
        "all": {"series": c.series[ALL], "cpu_ms": cpu[ALL] * 1000, "wall_ms": wall[ALL] * 1000},
        "collectors": {
            name: {
                "turns_off": sorted(EVERY - without(name)),
                "series": c.series[ALL] - c.series[name],
                "cpu_ms": (cpu[ALL] - cpu[name]) * 1000,
                "wall_ms": (wall[ALL] - wall[name]) * 1000,
            }
            for name in (r.name for r in COLLECTORS)
        },
    }


def table(costs: list[CollectorCost]) -> tuple[list[str], list[list[object]]]:
    figures = [summary(c) for c in costs]
    headers = ["collector (off with it)"]
    for f in figures:
        headers += [f"{f['scenario']}: series", "CPU ms", "wall ms"]
    rows: list[list[object]] = []
    for record in COLLECTORS:
        first = figures[0]["collectors"][record.name]  # type: ignore[index]
        dependents = [n for n in first["turns_off"] if n != record.name]
        row: list[object] = [record.name + (f" (+{', '.join(dependents)})" if dependents else "")]
        for f in figures:
            one = f["collectors"][record.name]  # type: ignore[index]
            row += [one["series"], f"{one['cpu_ms']:.2f}", f"{one['wall_ms']:.2f}"]
        rows.append(row)
    total: list[object] = ["every collector (the whole scrape)"]
    for f in figures:
        whole = f["all"]  # type: ignore[index]
        total += [whole["series"], f"{whole['cpu_ms']:.2f}", f"{whole['wall_ms']:.2f}"]
    rows.append(total)
    return headers, rows
