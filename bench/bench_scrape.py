"""`make bench`: the exporter's cost, measured against SQL Server stand-ins in one run, as seven tables.

(a) round trips and bytes on the wire per scrape        bench/scrape_cost.py
(b) scrape latency and exporter-side time vs SELECT 1    bench/scrape_cost.py
(c) growth with databases and NUMA nodes (exporter process: time, CPU, RSS)   bench/growth.py
(d) a fleet of targets through /probe of one exporter process                  bench/fleet.py
(e) start-up with 1k/10k/50k targets: seconds to listening, bytes written, RSS  bench/startup.py
(f) the memory diagnosis sections' share of a scrape                            bench/section_share.py
(g) each collector's exporter-side cost: every collector vs all but that one    bench/collector_cost.py
(h) bursts of 200 and 2,000 probes at the same instant: all answered, latency, threads   bench/burst.py

Prints the tables and writes every figure to build/bench-results.json. `--quick` is a smoke run
(seconds, not minutes) whose numbers mean little. docs/performance.md explains the method.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import burst, collector_cost, fleet, growth, scrape_cost, section_share, startup  # noqa: E402
from bench.common import BUILD, MachineLoad, load_note, machine_info, print_table, raise_fd_limit  # noqa: E402

COST_SCENARIOS = ("healthy-oltp", "numa-4-nodes")
DATABASE_SCENARIOS = {"bench-databases-10": 300, "bench-databases-500": 200, "bench-databases-5000": 60}
NUMA_SCENARIOS = {"bench-numa-1": 300, "bench-numa-8": 300, "bench-numa-64": 300}
FLEETS = (100, 500)
GROWTH_NOTES = (
    "    first probe: login + refresh (file names). exporter-side = HTTP probe on a keep-alive connection (as"
    " Prometheus\n"
    "    scrapes) - driver round trip of the same batch from the bench, paired; target at 5,000 databases:"
    " < 100 ms.\n"
    "    new conn: the same with a new TCP connection per probe. exporter CPU/scrape = the exporter"
    " process's CPU time /\n"
    "    scrapes (includes the driver decoding rows), for each way of connecting."
)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", default="abcdefgh", help="tables to run, e.g. 'cd' (a and b run together)")
    parser.add_argument("--scrapes", type=int, default=1000, help="scrapes per scenario in (a)/(b)")
    parser.add_argument("--fleet", type=int, action="append", help="fleet sizes for (d); default 100 and 500")
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval of the fleet, seconds")
    parser.add_argument(
        "--rounds", type=int, default=3, help="measured scrape rounds per fleet (after 1 warm-up)"
    )
    parser.add_argument(
        "--startup-targets", type=int, action="append", help="fleet sizes for (e); default 1k, 10k, 50k"
    )
    parser.add_argument(
        "--startup-timeout", type=float, default=startup.TIMEOUT, help="seconds a start-up in (e) may take"
    )
    parser.add_argument(
        "--burst", type=int, action="append", help="probes at once for (h); default 200 and 2,000"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: few scrapes, small fleet, short interval"
    )
    parser.add_argument("--json", type=Path, default=BUILD / "bench-results.json")
    args = parser.parse_args()
    started = time.monotonic()
    raise_fd_limit()
    scale = 0.05 if args.quick else 1.0
    fleets = args.fleet or ([20] if args.quick else list(FLEETS))
    interval = 3.0 if args.quick else args.interval
    rounds = 1 if args.quick else args.rounds

    info = machine_info()
    results: dict[str, object] = {"machine": info, "quick": args.quick}
    print("make bench: the exporter against SQL Server stand-ins (tests/standin), one run")
    for key, value in info.items():
        print(f"  {key:<18} {value}")
    sys.stdout.flush()

    if "a" in args.only or "b" in args.only:
        n = max(20, int(args.scrapes * scale))
        load = MachineLoad()
        load.start()
        costs = [scrape_cost.measure(s, n) for s in COST_SCENARIOS]
        costs.insert(1, scrape_cost.measure(COST_SCENARIOS[0], n, scrape_cost.TABLE4_SET))
        # The same scenario through Microsoft's Driver 18 (issue 35): one row per driver.
        costs.insert(1, scrape_cost.measure(COST_SCENARIOS[0], n, driver="odbc18"))
        machine = load.stop()
        results["a_b"] = [scrape_cost.summary(c) for c in costs]
        results["a_b_machine"] = machine
        headers, rows = scrape_cost.table_a(costs)
        print_table(
            "(a) Round trips and bytes on the wire per scrape, counted by the stand-in",
            headers,
            rows,
            "    refresh: the scrape every volume_refresh_seconds (default 300 s) that also reads file names;"
            " still one round trip.\n    [freetds]/[odbc18]: the ODBC driver the target logs in through.",
        )
        headers, rows = scrape_cost.table_b(costs)
        print_table(
            "(b) Scrape latency in ms, in process (probe + exposition), vs the same batch and SELECT 1 on the"
            " scraper's own connection",
            headers,
            rows,
            "    exporter-side = scrape total - round trip of the same batch on the same connection,"
            " paired per scrape.\n    Target: < 2 ms median, < 0.8 ms with the Table 4 set. exporter CPU:"
            " this process's CPU time during"
            " the scrape (the stand-in runs in another).\n"
            + load_note(machine),
        )

    if "c" in args.only:
        load = MachineLoad()
        load.start()
        by_db = [growth.measure(s, max(5, int(n * scale))) for s, n in DATABASE_SCENARIOS.items()]
        machine_db = load.stop()
        load.start()
        by_numa = [growth.measure(s, max(5, int(n * scale))) for s, n in NUMA_SCENARIOS.items()]
        machine_numa = load.stop()
        results["c_databases"] = [growth.summary(g) for g in by_db]
        results["c_numa"] = [growth.summary(g) for g in by_numa]
        results["c_machine"] = {"databases": machine_db, "numa": machine_numa}
        headers, rows = growth.table_databases(by_db)
        print_table(
            "(c1) Growth with databases: a fresh exporter process per row, probed over HTTP (times in ms)",
            headers,
            rows,
            GROWTH_NOTES + "\n" + load_note(machine_db),
        )
        headers, rows = growth.table_numa(by_numa)
        print_table(
            "(c2) Growth with NUMA nodes (4 Buffer Node rows per node), same method (times in ms)",
            headers,
            rows,
            load_note(machine_numa),
        )

    if "d" in args.only:
        fleet_results = [fleet.measure(n, interval=interval, rounds=rounds) for n in fleets]
        results["d_fleet"] = [fleet.summary(f) for f in fleet_results]
        headers, rows = fleet.table(fleet_results)
        print_table(
            f"(d) Fleet: N stand-ins probed through /probe of ONE exporter process every {interval:g} s,"
            f" staggered; {rounds} measured rounds after 1 warm-up",
            headers,
            rows,
            "    latency: driver-observed, HTTP request to last byte. Target at 500: p99 < 1 s, exporter"
            " < 1 core.\n"
            "    The stand-ins, the driver and other processes share the machine with the exporter: trust"
            " the exporter's\n"
            "    CPU per probe; latency includes their noise. first probe: login + driver type-info queries"
            " + file-name\n"
            "    refresh (warm-up round). driver lag: how late the driver started probes against their"
            " schedule.\n"
            + "\n".join(
                f"    open files at {f.targets} targets: {f.fds} ({f.fds_per_target:.1f} per target);"
                " under a soft limit of 1024 (systemd's default)\n"
                f"    the exporter could hold about {f.targets_within(1024)} targets (fewer with more HTTP"
                " connections open)."
                for f in fleet_results
            ),
        )

    if "e" in args.only:
        sizes = args.startup_targets or list(startup.QUICK_SIZES if args.quick else startup.SIZES)
        starts = [startup.measure(n, timeout=args.startup_timeout) for n in sizes]
        results["e_startup"] = [startup.summary(r) for r in starts]
        headers, rows = startup.table(starts, args.startup_timeout)
        print_table(startup.TITLE, headers, rows, startup.NOTES)

    if "f" in args.only:
        n = max(20, int(args.scrapes * scale))
        load = MachineLoad()
        load.start()
        shares = [section_share.measure(s, n) for s in COST_SCENARIOS]
        machine = load.stop()
        results["f_section_share"] = [section_share.summary(s) for s in shares]
        headers, rows = section_share.table(shares)
        print_table(
            "(f) The memory diagnosis sections' share of a scrape: every collector vs all but those six,"
            " probed alternately",
            headers,
            rows,
            "    in process (probe + exposition), each scraper on its own connection to one stand-in; times"
            " in ms.\n" + load_note(machine),
        )

    if "g" in args.only:
        rounds = max(10, int(args.scrapes * scale / 5))
        load = MachineLoad()
        load.start()
        costs = [collector_cost.measure(s, rounds) for s in COST_SCENARIOS]
        machine = load.stop()
        results["g_collector_cost"] = [collector_cost.summary(c) for c in costs]
        headers, rows = collector_cost.table(costs)
        print_table(
            f"(g) Each collector's exporter-side cost: every collector vs all but it, {rounds} shuffled"
            " rounds",
            headers,
            rows,
            "    in process (probe + exposition) through collect[], one connection; per collector: series"
            " it adds;\n    parse ms: the median of its own collector_duration in the all-collector probes;"
            " CPU and wall:\n    median over rounds of (all - all but it) per probe, in ms (near 0 or below:"
            " under the noise).\n    Last row: the whole probe.\n" + load_note(machine),
        )

    if "h" in args.only:
        sizes = args.burst or list(burst.QUICK_SIZES if args.quick else burst.SIZES)
        load = MachineLoad()
        load.start()
        bursts = [burst.measure(n) for n in sizes]
        machine = load.stop()
        results["h_burst"] = [burst.summary(b) for b in bursts]
        headers, rows = burst.table(bursts)
        print_table(burst.TITLE, headers, rows, burst.NOTES + "\n" + load_note(machine))

    elapsed = time.monotonic() - started
    results["elapsed_seconds"] = elapsed
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    where = args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json
    print(f"\nmake bench: {elapsed:.0f} s; every figure in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
