"""(a) round trips and bytes per scrape; (b) scrape latency and exporter-side time vs a SELECT 1 floor.

The scraper runs in this process (Scraper.probe plus writing the exposition as the HTTP layer does, no
HTTP); the stand-in runs in its own process, so the two do not share a GIL. Right after each scrape, the
same batch and then `SELECT 1` run on the scraper's own connection (same session, same socket, no worker
thread): exporter-side time is the scrape's total minus that plain round trip of the same batch, and
`SELECT 1` is the floor of any round trip on that connection. The three are interleaved, so machine
noise hits all alike. Exporter CPU is this process's CPU time during the scrape alone (the stand-in's is
in its own process). Round trips and bytes are counted by the stand-in on the scraper's session, over
scrapes with nothing else sent on it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import pyodbc
from mssql_memory_exporter.connection.batch import ResultSet
from mssql_memory_exporter.connection.session import fetch_all
from mssql_memory_exporter.metrics.exposition import render
from mssql_memory_exporter.scrape.scraper import Scraper

from bench.common import Farm, ms, pct, session_totals, target_yaml
from tests.conftest import make_config

WARMUP = 20
# The Dell white paper's Table 4 counters: a site that wants only them narrows a target to these
# (collectors include / collect[]); the row "healthy-oltp (Table 4 set)" measures that scrape.
TABLE4_SET = frozenset(
    {"server_properties", "sys_info", "buffer_manager", "buffer_node", "memory_manager", "sql_statistics"}
)
TABLE4_LABEL = "(Table 4 set)"


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
    cpu: list[float]
    batch_rt: list[float]
    floor: list[float]

    @property
    def overhead(self) -> list[float]:
        return [t - b for t, b in zip(self.total, self.batch_rt, strict=True)]


def measure(
    scenario: str, n: int, collect: frozenset[str] | None = None, driver: str = "freetds"
) -> ScrapeCost:
    """`collect` narrows every probe to those collectors, as `collect[]` does; `driver` is the target's
    (freetds, or odbc18: Microsoft's Driver 18 from the msodbc extra)."""
    with Farm(scenario) as farm:
        config = make_config({"bench": {**target_yaml(farm.ports[0]), "driver": driver}})
        target = config.targets["bench"]
        scraper = Scraper(config)

        def probe() -> None:
            render(scraper.probe(target, 10, collect))

        try:
            probe()  # session 0, the scraper's; this first one is a refresh
            connection = scraper._states[target.name].connection
            for _ in range(WARMUP):
                probe()
            fast_sql = connection.last_sql  # what every scrape between refreshes sends
            refresh_sql = scraper.batch_sql if collect is None else fast_sql
            # (a): the scraper alone on its session.
            start = session_totals(farm.stats(), 0, 0)
            for _ in range(n):
                probe()
            end = session_totals(farm.stats(), 0, 0)
            with connection._lock:
                raw = connection._cnxn
                assert raw is not None, "the scraper's connection is open after its scrapes"
                # What the scraper sends for each batch on this connection: EXEC sp_execute by handle
                # once prepared (prepared.py), so the paired round trip below is the scrape's own.
                fast_request = connection.request_for(fast_sql)
                before = session_totals(farm.stats(), 0, 0)
                refresh = _round_trip(raw, connection.request_for(refresh_sql))
                refresh_rows = sum(len(rs.rows) for rs in refresh)
                after = session_totals(farm.stats(), 0, 0)
                rows = sum(len(rs.rows) for rs in _round_trip(raw, fast_request))
            # (b): each scrape, then the same batch and SELECT 1 on the same connection.
            total, cpu, batch_rt, floor = [], [], [], []
            for _ in range(n):
                c0 = time.process_time()
                t0 = time.perf_counter()
                probe()
                t1 = time.perf_counter()
                c1 = time.process_time()
                with connection._lock:
                    t2 = time.perf_counter()
                    _round_trip(raw, fast_request)
                    t3 = time.perf_counter()
                    _round_trip(raw, "SELECT 1 AS one")
                    t4 = time.perf_counter()
                total.append(t1 - t0)
                cpu.append(c1 - c0)
                batch_rt.append(t3 - t2)
                floor.append(t4 - t3)
        finally:
            scraper.close()
    label = scenario if collect is None else f"{scenario} {_label(collect)}"
    return ScrapeCost(
        scenario=f"{label} [{driver}]",
        scrapes=n,
        round_trips=(end[0] - start[0]) / n,
        bytes_to_server=(end[1] - start[1]) / n,
        bytes_from_server=(end[2] - start[2]) / n,
        rows=rows,
        refresh_bytes_to_server=after[1] - before[1],
        refresh_bytes_from_server=after[2] - before[2],
        refresh_rows=refresh_rows,
        total=total,
        cpu=cpu,
        batch_rt=batch_rt,
        floor=floor,
    )


def _label(collect: frozenset[str]) -> str:
    return TABLE4_LABEL if collect == TABLE4_SET else "(narrowed)"


def _round_trip(raw: pyodbc.Connection, sql: str) -> list[ResultSet]:
    cursor = raw.cursor()
    try:
        cursor.execute(sql)
        return fetch_all(cursor)
    finally:
        cursor.close()


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
        "exporter CPU p50/p99",
        "SELECT 1 p50/p99",
    ]

    def pair(values: list[float]) -> str:
        return f"{ms(statistics.median(values), 3)} / {ms(pct(values, 99), 3)}"

    rows = [
        [r.scenario, r.scrapes, pair(r.total), pair(r.batch_rt), pair(r.overhead), pair(r.cpu), pair(r.floor)]
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
                ("exporter_cpu", r.cpu),
                ("select1", r.floor),
            )
        },
    }
