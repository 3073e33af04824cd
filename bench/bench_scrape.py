"""Scrape cost against the stand-in, in one run: round trips, bytes, and exporter-side time.

Exporter-side time is a scrape's total (Scraper.probe plus rendering the exposition) minus the
driver round trip of the same batch on the same kind of connection; `SELECT 1` is the floor of any
round trip. Medians and p99 over many scrapes, measured interleaved so machine noise hits all alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pyodbc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exporter"))
sys.path.insert(0, str(ROOT))

from mssql_memory_exporter.config import build_connection_string  # noqa: E402
from mssql_memory_exporter.connection import fetch_all  # noqa: E402
from mssql_memory_exporter.scrape import Scraper  # noqa: E402

from tests.conftest import TEST_PASSWORD, StandIn, exposition, make_config  # noqa: E402
from tests.standin.handler import ScenarioHandler  # noqa: E402
from tests.standin.scenario import Clock, Instance, Scenario  # noqa: E402
from tests.standin.server import StandInServer  # noqa: E402


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f}"


def run(scenario: str, n: int) -> list[tuple[str, ...]]:
    clock = Clock(manual=False)
    handler = ScenarioHandler(
        Instance(Scenario.load(scenario), clock), user="exporter", password=TEST_PASSWORD
    )
    server = StandInServer(handler)
    server.start()
    try:
        standin = StandIn(server, handler, handler.instance, clock)
        config = make_config({"bench": standin.target_yaml(query_timeout_seconds=10)})
        target = config.targets["bench"]
        scraper = Scraper(config)
        exposition(scraper.probe(target, 10))
        scrape_session = server.sessions[-1]  # the scraper's own connection, opened by that probe
        creds = config.credentials_for(target)
        raw = pyodbc.connect(
            build_connection_string(target, "FreeTDS", creds.password, username=creds.username),
            autocommit=True,
        )
        cursor = raw.cursor()
        for _ in range(20):  # warm-up: logins, type-info queries, the stand-in's parse caches
            exposition(scraper.probe(target, 10))
            cursor.execute(scraper.batch_sql)
            fetch_all(cursor)
            cursor.execute("SELECT 1 AS one")
            cursor.fetchall()

        batches0, in0, out0 = scrape_session.batches, scrape_session.bytes_in, scrape_session.bytes_out
        total, batch_rt, floor = [], [], []
        for _ in range(n):
            t0 = time.perf_counter()
            exposition(scraper.probe(target, 10))
            t1 = time.perf_counter()
            cursor.execute(scraper.batch_sql)
            fetch_all(cursor)
            t2 = time.perf_counter()
            cursor.execute("SELECT 1 AS one")
            cursor.fetchall()
            t3 = time.perf_counter()
            total.append(t1 - t0)
            batch_rt.append(t2 - t1)
            floor.append(t3 - t2)
        round_trips = (scrape_session.batches - batches0) / n
        sent = (scrape_session.bytes_in - in0) / n
        received = (scrape_session.bytes_out - out0) / n
        overhead = [t - b for t, b in zip(total, batch_rt, strict=True)]
        raw.close()
        scraper.close()
        return [
            ("scenario", scenario, ""),
            ("scrapes measured", str(n), ""),
            ("round trips per scrape", f"{round_trips:.2f}", ""),
            ("bytes to server per scrape", f"{sent:.0f}", ""),
            ("bytes from server per scrape", f"{received:.0f}", ""),
            ("scrape total (probe + exposition)", ms(statistics.median(total)), ms(pct(total, 99))),
            ("driver round trip of the batch", ms(statistics.median(batch_rt)), ms(pct(batch_rt, 99))),
            ("exporter-side (total - round trip)", ms(statistics.median(overhead)), ms(pct(overhead, 99))),
            ("SELECT 1 round trip (floor)", ms(statistics.median(floor)), ms(pct(floor, 99))),
        ]
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--scenario", action="append", help="default: healthy-oltp and numa-4-nodes")
    args = parser.parse_args()
    for scenario in args.scenario or ["healthy-oltp", "numa-4-nodes"]:
        rows = run(scenario, args.scrapes)
        print(f"\n{'measure':<38} {'median ms':>10} {'p99 ms':>10}")
        print("-" * 60)
        for label, median, p99 in rows:
            print(f"{label:<38} {median:>10} {p99:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
