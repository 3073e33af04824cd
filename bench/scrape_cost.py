"""(a) round trips and bytes per scrape; (b) scrape latency and exporter-side time vs a SELECT 1 floor.

The scraper runs in this process (Scraper.probe plus rendering the exposition, no HTTP); the stand-in
runs in its own process, so the two do not share a GIL. Exporter-side time is a scrape's total minus
the driver round trip of the same batch on a second connection to the same stand-in, measured right
after it; `SELECT 1` on that connection is the floor of any round trip. The three are interleaved, so
machine noise hits all alike. Round trips and bytes are counted by the stand-in on the scraper's own
session.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import pyodbc
from mssql_memory_exporter.config import build_connection_string
from mssql_memory_exporter.connection import fetch_all
from mssql_memory_exporter.scrape import Scraper

from bench.common import Farm, ms, pct, session_totals, target_yaml
from tests.conftest import exposition, make_config

WARMUP = 20


@dataclass
class ScrapeCost:
    scenario: str
    scrapes: int
    round_trips: float
    bytes_to_server: float
    bytes_from_server: float
    rows: int
    refresh_bytes_to_server: int
    refresh_bytes_from_server: int
    refresh_rows: int
    total: list[float]
    batch_rt: list[float]
    floor: list[float]

    @property
    def overhead(self) -> list[float]:
        return [t - b for t, b in zip(self.total, self.batch_rt, strict=True)]


def measure(scenario: str, n: int) -> ScrapeCost:
    with Farm(scenario) as farm:
        config = make_config({"bench": target_yaml(farm.ports[0])})
        target = config.targets["bench"]
        scraper = Scraper(config)
        try:
            exposition(scraper.probe(target, 10))  # session 0: the scraper's; this first one is a refresh
            creds = config.credentials_for(target)
            raw = pyodbc.connect(  # session 1: ours
                build_connection_string(target, "FreeTDS", creds.password, username=creds.username),
                autocommit=True,
            )
            cursor = raw.cursor()
            fast_sql = scraper._batch_for(scraper._fast)  # what every scrape between refreshes sends
            for _ in range(WARMUP):
                exposition(scraper.probe(target, 10))
                cursor.execute(fast_sql)
                fetch_all(cursor)
                cursor.execute("SELECT 1 AS one")
                cursor.fetchall()
            # The refresh batch (file names, every volume_refresh_seconds), once, on our session.
            before = session_totals(farm.stats(), 0, 1)
            cursor.execute(scraper.batch_sql)
            refresh_rows = sum(len(rs.rows) for rs in fetch_all(cursor))
            after = session_totals(farm.stats(), 0, 1)
            cursor.execute(fast_sql)
            rows = sum(len(rs.rows) for rs in fetch_all(cursor))

            start = session_totals(farm.stats(), 0, 0)
            total, batch_rt, floor = [], [], []
            for _ in range(n):
                t0 = time.perf_counter()
                exposition(scraper.probe(target, 10))
                t1 = time.perf_counter()
                cursor.execute(fast_sql)
                fetch_all(cursor)
                t2 = time.perf_counter()
                cursor.execute("SELECT 1 AS one")
                cursor.fetchall()
                t3 = time.perf_counter()
                total.append(t1 - t0)
                batch_rt.append(t2 - t1)
                floor.append(t3 - t2)
            end = session_totals(farm.stats(), 0, 0)
            raw.close()
        finally:
            scraper.close()
    return ScrapeCost(
        scenario=scenario,
        scrapes=n,
        round_trips=(end[0] - start[0]) / n,
        bytes_to_server=(end[1] - start[1]) / n,
        bytes_from_server=(end[2] - start[2]) / n,
        rows=rows,
        refresh_bytes_to_server=after[1] - before[1],
        refresh_bytes_from_server=after[2] - before[2],
        refresh_rows=refresh_rows,
        total=total,
        batch_rt=batch_rt,
        floor=floor,
    )


def table_a(results: list[ScrapeCost]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "scenario",
        "round trips/scrape",
        "bytes to server",
        "bytes from server",
        "result rows",
        "refresh: bytes to",
        "refresh: bytes from",
        "refresh: rows",
    ]
    rows = [
        [
            r.scenario,
            f"{r.round_trips:.2f}",
            f"{r.bytes_to_server:.0f}",
            f"{r.bytes_from_server:.0f}",
            r.rows,
            r.refresh_bytes_to_server,
            r.refresh_bytes_from_server,
            r.refresh_rows,
        ]
        for r in results
    ]
    return headers, rows


def table_b(results: list[ScrapeCost]) -> tuple[list[str], list[list[object]]]:
    headers = [
        "scenario",
        "scrapes",
        "scrape total p50/p99",
        "batch round trip p50/p99",
        "exporter-side p50/p99",
        "SELECT 1 p50/p99",
    ]

    def pair(values: list[float]) -> str:
        return f"{ms(statistics.median(values), 3)} / {ms(pct(values, 99), 3)}"

    rows = [
        [r.scenario, r.scrapes, pair(r.total), pair(r.batch_rt), pair(r.overhead), pair(r.floor)]
        for r in results
    ]
    return headers, rows


def summary(r: ScrapeCost) -> dict[str, object]:
    return {
        "scenario": r.scenario,
        "scrapes": r.scrapes,
        "round_trips_per_scrape": r.round_trips,
        "bytes_to_server": r.bytes_to_server,
        "bytes_from_server": r.bytes_from_server,
        "rows": r.rows,
        "refresh_bytes_to_server": r.refresh_bytes_to_server,
        "refresh_bytes_from_server": r.refresh_bytes_from_server,
        "refresh_rows": r.refresh_rows,
        "ms": {
            name: {"p50": statistics.median(v) * 1000, "p99": pct(v, 99) * 1000}
            for name, v in (
                ("total", r.total),
                ("batch_round_trip", r.batch_rt),
                ("exporter_side", r.overhead),
                ("select1", r.floor),
            )
        },
    }
