"""exporter-toolkit's web flags, with its names and meanings (its kingpinflag and bootstrap packages):
`--web.systemd-socket`, `--web.telemetry-path`, `--web.disable-exporter-metrics`, `--web.max-requests`,
and Prometheus' `--web.enable-lifecycle` for `POST /-/reload`. `--web.listen-address` (repeatable) and
`--web.config.file` are declared in cli.py beside the other flags."""

from __future__ import annotations

import argparse
import logging

from mssql_memory_exporter.config import ExporterConfig
from mssql_memory_exporter.web import (
    ExporterHTTPServer,
    OwnMetricsFn,
    ProbeFn,
    SystemdSocketError,
    make_server,
    parse_listen_address,
    systemd_sockets,
)
from mssql_memory_exporter.web.requests import MAX_WORKERS
from mssql_memory_exporter.webconfig import WebConfigSource

__all__ = ["SystemdSocketError", "add_web_flags", "listen", "web_flag_problems"]

log = logging.getLogger(__name__)

# Paths the exporter serves itself: the telemetry path cannot take one of them.
RESERVED_PATHS = frozenset({"/probe", "/-/healthy", "/-/ready", "/-/reload"})


def add_web_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--web.systemd-socket",
        dest="web_systemd_socket",
        action="store_true",
        help="use the listening sockets systemd passes (socket activation: LISTEN_FDS) instead of "
        "--web.listen-address (Linux)",
    )
    parser.add_argument(
        "--web.telemetry-path",
        dest="web_telemetry_path",
        metavar="PATH",
        default="/metrics",
        help="path of the exporter's own metrics (and the default target's) (default: %(default)s)",
    )
    parser.add_argument(
        "--web.disable-exporter-metrics",
        dest="web_disable_exporter_metrics",
        action="store_true",
        help="leave the exporter's process and runtime metrics (process_*, python_*) and its HTTP threads "
        "(mssql_exporter_http_workers) out of the telemetry path",
    )
    parser.add_argument(
        "--web.max-requests",
        dest="web_max_requests",
        metavar="N",
        type=_count,
        default=None,
        help="requests answered at once (the HTTP worker threads); more wait in a queue. 0: no limit but "
        f"the hard one of {MAX_WORKERS} (default: 2 x targets + 16, at least 32, at most {MAX_WORKERS})",
    )
    parser.add_argument(
        "--web.enable-lifecycle",
        dest="web_enable_lifecycle",
        action="store_true",
        help="allow POST /-/reload (otherwise answered 403); SIGHUP reloads either way",
    )


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)


def web_flag_problems(args: argparse.Namespace) -> list[str]:
    """What start-up (and --config.check) refuses in the web flags, one line each."""
    problems = []
    if not args.web_systemd_socket:
        for address in args.listen_address:
            try:
                parse_listen_address(address)
            except ValueError as exc:
                problems.append(f"--web.listen-address: {exc}")
        if len(set(args.listen_address)) < len(args.listen_address):
            problems.append("--web.listen-address: the same address is given twice")
    path = args.web_telemetry_path
    if not path.startswith("/"):
        problems.append(f"--web.telemetry-path: {path!r} must begin with /")
    elif path in RESERVED_PATHS or "?" in path or "#" in path:
        problems.append(f"--web.telemetry-path: {path!r} is a path the exporter serves otherwise")
    return problems


def listen(
    args: argparse.Namespace,
    config: ExporterConfig,
    probe: ProbeFn,
    own_metrics: OwnMetricsFn,
    web: WebConfigSource | None,
) -> ExporterHTTPServer:
    """The HTTP server on the addresses or systemd sockets the flags name, set up as the flags say."""
    if args.web_systemd_socket:
        server = make_server(config, probe, (), own_metrics, web=web, sockets=systemd_sockets())
    else:
        server = make_server(config, probe, args.listen_address, own_metrics, web=web)
    server.telemetry_path = args.web_telemetry_path
    server.exporter_metrics = not args.web_disable_exporter_metrics
    server.max_requests = args.web_max_requests
    server.lifecycle = args.web_enable_lifecycle
    return server
