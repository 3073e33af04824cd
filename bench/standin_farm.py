"""Many SQL Server stand-ins in one process: `python -m bench.standin_farm --scenario NAME --count K`.

Starts K StandInServer instances (threads per connection, as in the tests), each on its own free port
of 127.0.0.1 and each with its own Instance of the same scenario, then prints one JSON line
`{"ports": [...]}`. It then reads commands from stdin, one per line:
  stats   print `{"servers": [[[batches, bytes_in, bytes_out], ...per session...], ...], "errors": N}`
  quit    (or end of input) exit
The login password comes from MSSQL_STANDIN_PASSWORD, as for `python -m tests.standin`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import threading

from tests.standin.handler import ScenarioHandler
from tests.standin.scenario import Clock, Instance, Scenario
from tests.standin.server import StandInServer

# 500 servers hold ~1,000 threads (an acceptor each, a thread per open connection); the default 8 MiB
# stacks are only reserved, but a smaller reservation keeps the farm's address space modest.
THREAD_STACK_BYTES = 512 * 1024


def _answer(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _warm(servers: list[StandInServer]) -> None:
    """Answer the exporter's batches once before any client connects. The stand-in's strict check parses
    each new batch text with sqlfluff (about a second the first time, then cached by text); unwarmed,
    the first probes of a fleet would all parse the same text at once and measure the stand-in."""
    from mssql_memory_exporter.scrape.scraper import Scraper

    from bench.common import target_yaml
    from tests.conftest import make_config

    scraper = Scraper(make_config({"warm": target_yaml(1)}))
    for sql in (scraper.batch_sql, scraper._batch_for(scraper._fast)):
        for server in servers:
            handler = server.handler
            if isinstance(handler, ScenarioHandler):
                handler.answer(sql)  # the first call checks (cached per text) and parses (per handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.standin_farm", description=__doc__)
    parser.add_argument("--scenario", default="healthy-oltp")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--user", default="exporter")
    args = parser.parse_args(argv)
    password = os.environ.get("MSSQL_STANDIN_PASSWORD")
    if not password:
        print("error: set MSSQL_STANDIN_PASSWORD", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s standin-farm %(levelname)s %(message)s")
    logging.getLogger("sqlfluff").setLevel(logging.WARNING)
    threading.stack_size(THREAD_STACK_BYTES)
    scenario = Scenario.load(args.scenario)  # parsed once, shared (read-only) by every instance
    servers = []
    for _ in range(args.count):
        handler = ScenarioHandler(Instance(scenario, Clock()), user=args.user, password=password)
        server = StandInServer(handler)
        server.start()
        servers.append(server)
    _warm(servers)
    _answer({"ports": [s.port for s in servers]})
    for line in sys.stdin:
        command = line.strip()
        if command == "stats":
            _answer(
                {
                    "servers": [
                        [[s.batches, s.bytes_in, s.bytes_out] for s in list(server.sessions)]
                        for server in servers
                    ],
                    "errors": sum(len(server.errors) for server in servers),
                }
            )
            # The handlers keep every batch text they saw; a long run need not keep them all.
            for server in servers:
                handler = server.handler
                if isinstance(handler, ScenarioHandler):
                    handler.sql_seen.clear()
        elif command == "quit":
            break
    # Exiting closes every socket; stopping 500 servers one by one would only join threads.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
