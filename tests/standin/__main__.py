"""Run the stand-in on its own: `python -m tests.standin --scenario memory-pressure --port 14330`.

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

from .handler import ScenarioHandler
from .scenario import Instance, Scenario
from .server import StandInServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.standin", description=__doc__)
    parser.add_argument("--scenario", default="healthy-oltp", help="scenario name or path to a YAML file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=14330)
    parser.add_argument("--user", default="exporter")
    args = parser.parse_args(argv)
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
    server = StandInServer(
        ScenarioHandler(Instance(scenario), user=args.user, password=password), args.host, args.port
    )
    port = server.start()
    logging.info("SQL Server stand-in playing %r on %s:%d", scenario.name, args.host, port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
