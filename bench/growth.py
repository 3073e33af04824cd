"""(c) How exporter-side time and RSS grow with databases (10, 500, 5,000) and NUMA nodes (1, 8, 64).

Per scenario: a stand-in (its own process) and a fresh exporter process with one target, probed over
HTTP: first n probes on one keep-alive connection, as Prometheus scrapes, then n probes each on a new
connection. Exporter-side time is each probe's HTTP time minus the driver round trip of the same batch,
measured from this process on its own connection right after it (paired, so noise hits both).
Exporter CPU per scrape is the exporter process's CPU time (psutil) over each set of probes divided by
their number: it includes the driver decoding the rows, which the subtraction leaves out, and it is the
steadier figure. RSS is the exporter process's own: after start-up, after the measured scrapes, and its
peak (VmHWM).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyodbc
from mssql_memory_exporter.config import build_connection_string
from mssql_memory_exporter.connection.session import fetch_all
from mssql_memory_exporter.scrape.scraper import Scraper

from bench.common import Exporter, Farm, get_new_connection, mb, ms, pct, session_totals, target_yaml
from tests.conftest import make_config
from tests.standin.scenario import Scenario

PROBE = "/probe?target=bench"
SYSTEM_DATABASES = frozenset({"master", "tempdb", "model", "msdb"})
WARMUP = 5


@dataclass
class Growth:
    scenario: str
    databases: int  # user databases (the system ones not counted)
    files: int
    numa_nodes: int
    scrapes: int
    rows: int
    bytes_from_server: float
    first_probe: float
    http: list[float]  # keep-alive connection, as Prometheus scrapes
    batch_rt: list[float]  # paired with http
    fresh: list[float]  # a new connection per probe
    fresh_batch_rt: list[float]  # paired with fresh
    cpu_per_scrape: float  # keep-alive
    cpu_per_scrape_fresh: float
    rss_idle: float
    rss_after: float
    rss_peak: float

    @property
    def overhead(self) -> list[float]:
        """Exporter-side time: probe on the keep-alive connection minus the driver round trip."""
        return [h - b for h, b in zip(self.http, self.batch_rt, strict=True)]

    @property
    def overhead_fresh(self) -> list[float]:
        """Exporter-side time of a probe on a new connection (TCP set-up and a handler thread included)."""
        return [h - b for h, b in zip(self.fresh, self.fresh_batch_rt, strict=True)]


def measure(scenario: str, n: int) -> Growth:
    spec = Scenario.load(scenario)
    live = spec.files.live(0.0)
    target = target_yaml(0, query_timeout=30, login_timeout=10)
    with Farm(scenario) as farm:
        target["port"] = farm.ports[0]
        with Exporter({"bench": target}, name="growth") as exporter:
            client = exporter.client()
            rss_idle = exporter.rss()
            t0 = time.perf_counter()
            body = client.get(PROBE)  # session 0: the exporter's; login, then a refresh (file names)
            first_probe = time.perf_counter() - t0
            if "mssql_up 1.0" not in body:
                raise RuntimeError(f"{scenario}: the first probe failed")
            config = make_config({"bench": target})
            cfg_target = config.targets["bench"]
            creds = config.credentials_for(cfg_target)
            raw = pyodbc.connect(  # session 1: ours
                build_connection_string(cfg_target, "FreeTDS", creds.password, username=creds.username),
                autocommit=True,
            )
            cursor = raw.cursor()
            scraper = Scraper(config)
            fast_sql = scraper._batch_for(scraper._fast)  # what the exporter sends between refreshes
            rows = 0
            for _ in range(WARMUP):
                client.get(PROBE)
                cursor.execute(fast_sql)
                rows = sum(len(rs.rows) for rs in fetch_all(cursor))
            start = session_totals(farm.stats(), 0, 0)

            def paired(probe: Callable[[], str]) -> tuple[list[float], list[float], float, str]:
                cpu0 = exporter.cpu()
                probes, round_trips, body = [], [], ""
                for _ in range(n):
                    t0 = time.perf_counter()
                    body = probe()
                    t1 = time.perf_counter()
                    cursor.execute(fast_sql)
                    fetch_all(cursor)
                    t2 = time.perf_counter()
                    probes.append(t1 - t0)
                    round_trips.append(t2 - t1)
                return probes, round_trips, (exporter.cpu() - cpu0) / n, body

            http, batch_rt, cpu_keepalive, body = paired(lambda: client.get(PROBE))
            fresh, fresh_batch_rt, cpu_fresh, _ = paired(lambda: get_new_connection(exporter.port, PROBE))
            end = session_totals(farm.stats(), 0, 0)
            if "mssql_up 1.0" not in body:
                raise RuntimeError(f"{scenario}: a measured probe failed")
            if end[0] - start[0] != 2 * n:
                raise RuntimeError(f"{scenario}: {end[0] - start[0]} round trips for {2 * n} scrapes")
            raw.close()
            client.close()
            return Growth(
                scenario=scenario,
                databases=sum(1 for d in live if d.name not in SYSTEM_DATABASES),
                files=sum(len(d.files) for d in live),
                numa_nodes=spec.numa_nodes,
                scrapes=2 * n,
                rows=rows,
                bytes_from_server=(end[2] - start[2]) / (2 * n),
                first_probe=first_probe,
                http=http,
                batch_rt=batch_rt,
                fresh=fresh,
                fresh_batch_rt=fresh_batch_rt,
                cpu_per_scrape=cpu_keepalive,
                cpu_per_scrape_fresh=cpu_fresh,
                rss_idle=rss_idle,
                rss_after=exporter.rss(),
                rss_peak=exporter.peak_rss(),
            )


HEADERS = [
    "scrapes",
    "rows/scrape",
    "bytes from server",
    "first probe",
    "round trip p50",
    "HTTP probe p50 keep-alive/new conn",
    "exporter-side p50/p99",
    "new conn: exporter-side p50",
    "exporter CPU/scrape keep-alive/new conn",
    "RSS idle/after/peak MB",
]


def _cells(g: Growth) -> list[object]:
    return [
        g.scrapes,
        g.rows,
        f"{g.bytes_from_server:.0f}",
        f"{ms(g.first_probe, 1)}",
        f"{ms(statistics.median(g.batch_rt))}",
        f"{ms(statistics.median(g.http))} / {ms(statistics.median(g.fresh))}",
        f"{ms(statistics.median(g.overhead))} / {ms(pct(g.overhead, 99))}",
        f"{ms(statistics.median(g.overhead_fresh))}",
        f"{ms(g.cpu_per_scrape)} / {ms(g.cpu_per_scrape_fresh)}",
        f"{mb(g.rss_idle)} / {mb(g.rss_after)} / {mb(g.rss_peak)}",
    ]


def table_databases(results: list[Growth]) -> tuple[list[str], list[list[object]]]:
    headers = ["user databases (files)", *HEADERS]
    return headers, [[f"{g.databases:,} ({g.files:,})", *_cells(g)] for g in results]


def table_numa(results: list[Growth]) -> tuple[list[str], list[list[object]]]:
    headers = ["NUMA nodes", *HEADERS]
    return headers, [[g.numa_nodes, *_cells(g)] for g in results]


def summary(g: Growth) -> dict[str, object]:
    return {
        "scenario": g.scenario,
        "databases": g.databases,
        "files": g.files,
        "numa_nodes": g.numa_nodes,
        "scrapes": g.scrapes,
        "rows": g.rows,
        "bytes_from_server": g.bytes_from_server,
        "first_probe_ms": g.first_probe * 1000,
        "driver_round_trip_ms_p50": statistics.median(g.batch_rt) * 1000,
        "http_probe_new_connection_ms_p50": statistics.median(g.fresh) * 1000,
        "http_probe_new_connection_ms_p99": pct(g.fresh, 99) * 1000,
        "http_probe_keepalive_ms_p50": statistics.median(g.http) * 1000,
        "http_probe_keepalive_ms_p99": pct(g.http, 99) * 1000,
        "exporter_side_ms_p50": statistics.median(g.overhead) * 1000,
        "exporter_side_ms_p99": pct(g.overhead, 99) * 1000,
        "exporter_side_new_connection_ms_p50": statistics.median(g.overhead_fresh) * 1000,
        "exporter_side_new_connection_ms_p99": pct(g.overhead_fresh, 99) * 1000,
        "exporter_cpu_ms_per_scrape": g.cpu_per_scrape * 1000,
        "exporter_cpu_ms_per_scrape_new_connection": g.cpu_per_scrape_fresh * 1000,
        "rss_idle_mb": g.rss_idle / 1e6,
        "rss_after_mb": g.rss_after / 1e6,
        "rss_peak_mb": g.rss_peak / 1e6,
    }
