"""Run the stand-in on its own: `python -m tests.standin --scenario memory-pressure --port 14330`.

From the repository root with the project's venv: `PYTHONPATH=. .venv/bin/python -m tests.standin ...`.
Faults can be put on a timetable (see tests/standin/schedule.py): `--fault hang_batch@60-90`,
`--deny sys.dm_os_sys_info:229@30`, `--restart-every 600`, `--moment failover@40`.

The login password comes from the environment (MSSQL_STANDIN_PASSWORD), never from the command line,
where any user of the machine could read it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time

from .handler import ScenarioHandler
from .scenario import Instance, Scenario
from .schedule import FAULT_KINDS, FaultSchedule, parse_deny, parse_fault, parse_moment
from .server import StandInServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.standin", description=__doc__)
    parser.add_argument("--scenario", default="healthy-oltp", help="scenario name or path to a YAML file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=14330)
    parser.add_argument("--user", default="exporter")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[@START[-END]]",
        help=f"misbehave from START to END seconds after start (repeatable); KIND: {', '.join(FAULT_KINDS)}",
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="VIEW[:ERROR][@START[-END]]",
        help="answer this view with a permission error, 300 (default) or 229 (repeatable)",
    )
    parser.add_argument(
        "--restart-every", type=float, default=None, metavar="SECONDS", help="restart, dropping sessions"
    )
    parser.add_argument(
        "--moment",
        action="append",
        default=[],
        metavar="NAME@SECONDS",
        help="the scenario's named moment (e.g. failover) happens SECONDS after start (repeatable)",
    )
    parser.add_argument(
        "--ready-fd",
        type=int,
        default=None,
        metavar="FD",
        help="once listening, write the port and a newline to this inherited descriptor and close it",
    )
    parser.add_argument(
        "--parse-ahead",
        action="store_true",
        help="check the exporter's batch texts before listening (seconds), not inside its first scrapes",
    )
    args = parser.parse_args(argv)
    try:
        faults = [parse_fault(spec) for spec in args.fault]
        denials = [parse_deny(spec) for spec in args.deny]
        moments = [parse_moment(spec) for spec in args.moment]
    except ValueError as exc:
        parser.error(str(exc))
    if args.restart_every is not None and args.restart_every <= 0:
        parser.error("--restart-every must be positive")
    password = os.environ.get("MSSQL_STANDIN_PASSWORD")
    if not password:
        print("error: set MSSQL_STANDIN_PASSWORD to the password the stand-in should accept", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s standin %(levelname)s %(message)s")
    logging.getLogger("sqlfluff").setLevel(logging.WARNING)  # it narrates every parse at INFO
    try:
        scenario = Scenario.load(args.scenario)
    except (OSError, ValueError) as exc:
        print(f"error: scenario {args.scenario}: {exc}", file=sys.stderr)
        return 2
    handler = ScenarioHandler(Instance(scenario), user=args.user, password=password)
    try:
        schedule = FaultSchedule(handler, faults, denials, args.restart_every, moments)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.parse_ahead:
        # Before listening, so the demo starts the exporter only once its first probe can be answered
        # within the scrape timeout (issue 36: on a loaded machine the first probes timed out).
        from .parse_ahead import batch_scraper, batch_variants

        began = time.monotonic()
        texts = batch_variants(batch_scraper())
        for sql in texts:
            handler.check_ahead(sql)
        logging.info("parsed %d exporter batch texts ahead in %.1f s", len(texts), time.monotonic() - began)
    server = StandInServer(handler, args.host, args.port)
    try:
        port = server.start()
    except OSError as exc:
        # A port in use is an everyday mistake, not a bug: one line that names the address, no traceback.
        reason = exc.strerror or exc
        print(f"error: stand-in cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 1
    logging.info("SQL Server stand-in playing %r on %s:%d", scenario.name, args.host, port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.ready_fd is not None:
        # The demo (scripts/demo.py) waits for this before it starts the exporter: a port that merely
        # accepts could be another program's, and the stand-in's imports take seconds on a busy machine.
        with os.fdopen(args.ready_fd, "w") as ready:
            ready.write(f"{port}\n")
    started = time.monotonic()
    schedule.apply(0.0)
    for spec in [*args.fault, *args.deny, *args.moment]:
        logging.info("fault scheduled: %s", spec)
    scheduler = threading.Thread(
        target=schedule.run, args=(lambda: time.monotonic() - started, stop), daemon=True
    )
    scheduler.start()
    stop.wait()
    scheduler.join(2)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
