"""Scrape cost against the stand-in, in one run: round trips, bytes, and exporter-side time.

Exporter-side time is a scrape's total (Scraper.probe plus rendering the exposition) minus the
driver round trip of the same batch on the same kind of connection; `SELECT 1` is the floor of any
round trip. Medians and p99 over many scrapes, measured interleaved so machine noise hits all alike.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pyodbc
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "exporter"))
sys.path.insert(0, str(ROOT))

from mssql_memory_exporter.config import build_connection_string  # noqa: E402
from mssql_memory_exporter.connection import fetch_all  # noqa: E402
from mssql_memory_exporter.scrape import Scraper  # noqa: E402

from tests.conftest import PASSWORD_ENV, TEST_PASSWORD, StandIn, exposition, make_config  # noqa: E402
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


def run_scale(scenario: str, n: int) -> list[tuple[str, ...]]:
    """The exporter as users run it (its own process, probed over HTTP) against a stand-in in a third
    process: its RSS is the exporter's alone. Exporter-side time is the HTTP probe minus the driver
    round trip of the same batch, measured from here on a connection of our own."""
    standin_port, exporter_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "MSSQL_STANDIN_PASSWORD": TEST_PASSWORD,
        PASSWORD_ENV: TEST_PASSWORD,
        "PYTHONPATH": str(ROOT),
    }
    target_yaml = {
        "host": "127.0.0.1",
        "port": standin_port,
        "driver": "freetds",
        "encryption": "off",
        "login_timeout_seconds": 5,
        "query_timeout_seconds": 30,
        "auth_module": "standin",
    }
    config_path = ROOT / "build" / "bench-scale.yml"
    config_path.parent.mkdir(exist_ok=True)
    config_path.write_text(
        yaml.safe_dump(
            {
                "auth_modules": {"standin": {"username": "exporter", "password_env": PASSWORD_ENV}},
                "targets": {"bench": target_yaml},
            }
        )
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.standin", "--scenario", scenario, "--port", str(standin_port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            [
                str(ROOT / ".venv/bin/mssql-memory-exporter"),
                "--config.file",
                str(config_path),
                "--web.listen-address",
                f"127.0.0.1:{exporter_port}",
                "--log.level",
                "warn",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        _wait_for_port(standin_port)
        _wait_for_port(exporter_port)
        exporter = psutil.Process(procs[1].pid)
        url = f"http://127.0.0.1:{exporter_port}/probe?target=bench"
        headers = {"X-Prometheus-Scrape-Timeout-Seconds": "30"}
        rss_idle = exporter.memory_info().rss
        started = time.perf_counter()
        body = _get(url, headers)  # the first scrape is a refresh: names and paths of every file
        refresh = time.perf_counter() - started
        assert "mssql_up 1.0" in body, "the scale scrape failed"
        config = make_config({"bench": target_yaml})
        target = config.targets["bench"]
        creds = config.credentials_for(target)
        raw = pyodbc.connect(
            build_connection_string(target, "FreeTDS", creds.password, username=creds.username),
            autocommit=True,
        )
        cursor = raw.cursor()
        fast_sql = Scraper(config)._batch_for(Scraper(config)._fast)  # what scrapes between refreshes send
        cpu0 = exporter.cpu_times()
        total, batch_rt = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            body = _get(url, headers)
            t1 = time.perf_counter()
            cursor.execute(fast_sql)
            fetch_all(cursor)
            t2 = time.perf_counter()
            total.append(t1 - t0)
            batch_rt.append(t2 - t1)
        cpu1 = exporter.cpu_times()
        assert "mssql_up 1.0" in body, "the scale scrape failed"
        overhead = [t - b for t, b in zip(total, batch_rt, strict=True)]
        cpu_per_scrape = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / n
        raw.close()
        return [
            ("scenario", scenario, ""),
            ("scrapes measured (over HTTP)", str(n), ""),
            ("refresh scrape (names of 10,000 files)", ms(refresh), ""),
            ("probe over HTTP", ms(statistics.median(total)), ms(pct(total, 99))),
            ("driver round trip of the batch", ms(statistics.median(batch_rt)), ms(pct(batch_rt, 99))),
            ("exporter-side (probe - round trip)", ms(statistics.median(overhead)), ms(pct(overhead, 99))),
            ("exporter CPU per scrape", ms(cpu_per_scrape), ""),
            (
                "exporter RSS idle / after (MB)",
                f"{rss_idle / 1e6:.1f}",
                f"{exporter.memory_info().rss / 1e6:.1f}",
            ),
            ("exporter peak RSS, VmHWM (MB)", f"{_peak_rss(procs[1].pid) / 1e6:.1f}", ""),
        ]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)


def _get(url: str, headers: dict[str, str]) -> str:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
        return response.read().decode()


def _peak_rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024
    return float("nan")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the stand-in did not start")


def print_table(rows: list[tuple[str, ...]]) -> None:
    print(f"\n{'measure':<40} {'median ms':>10} {'p99 ms':>10}")
    print("-" * 62)
    for label, median, p99 in rows:
        print(f"{label:<40} {median:>10} {p99:>10}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scrapes", type=int, default=500)
    parser.add_argument("--scenario", action="append", help="default: healthy-oltp and numa-4-nodes")
    parser.add_argument("--scale-scrapes", type=int, default=50)
    args = parser.parse_args()
    for scenario in args.scenario or ["healthy-oltp", "numa-4-nodes"]:
        print_table(run(scenario, args.scrapes))
    if args.scale_scrapes:
        print_table(run_scale("scale-5000-databases", args.scale_scrapes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
