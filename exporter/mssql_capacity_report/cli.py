"""mssql-capacity-report: SSD endurance per memory size over a long range, from any PromQL endpoint.

    mssql-capacity-report --prometheus http://thanos-query:10902 --since 365d --format markdown

Exit status: 0 every row has its figures; 1 the report is printed but some rows lack a figure (the
drives' wear included, where the drives are read) or the endpoint answered without some of its stores
(each row says which); 2 bad arguments; 3 nothing could be
computed (endpoint unreachable or too slow, no pool wrote anything in the range).
"""

from __future__ import annotations

import argparse
import datetime
import math
import re
import sys
import time
from collections.abc import Sequence

from .collect import Options, build
from .formats import to_csv, to_markdown
from .html import to_html
from .promql import EndpointError, PromQLClient

__all__ = ["main", "parse_duration"]

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE, EXIT_NOTHING = 0, 1, 2, 3
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
# The bundle's own share for target memory moves (alerts/thresholds.yml tempdb.memory_change_target_share;
# tests/test_capacity_report.py keeps the two equal).
DEFAULT_MEMORY_CHANGE_SHARE = 0.05


def parse_duration(text: str) -> float:
    """365d, 12h, 1w2d: a PromQL-style duration in seconds."""
    parts = re.findall(r"(\d+)([smhdw])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 365d, 12h or 30m")
    return float(sum(int(n) * _UNITS[u] for n, u in parts))


def _resolution(text: str) -> float:
    if text == "raw":
        return 0.0
    return parse_duration(text)


def parse_end(text: str) -> float:
    """Unix seconds, or an ISO 8601 date or time (UTC unless it names its zone): 2026-11-01,
    2026-11-01T06:00, 2026-11-01T06:00:00+01:00."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--end {text!r} is neither unix seconds nor an ISO 8601 date or time like 2026-11-01T06:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _concurrency(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"--concurrency {text} is not a whole number from 1 to 64")
    return value


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"--timeout {text} is not a positive number of seconds")
    return value


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as err:
        raise argparse.ArgumentTypeError(f"--instance {text!r} is not a regular expression: {err}") from err
    return text


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"--memory-change-share {text} is not a share in [0, 1)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mssql-capacity-report",
        description="SSD endurance per period of one memory size, from Prometheus or Thanos Query.",
    )
    parser.add_argument(
        "--prometheus", required=True, help="PromQL endpoint base URL (Prometheus or Thanos Query)"
    )
    parser.add_argument(
        "--since", type=parse_duration, default=parse_duration("365d"), metavar="DURATION",
        help="how far back the review reaches, e.g. 365d or 1825d for five years (default 365d)",
    )
    parser.add_argument(
        "--end", type=parse_end, default=None, metavar="TIME",
        help="where the range ends: unix seconds or an ISO 8601 date/time, UTC unless zoned (default now)",
    )
    parser.add_argument(
        "--instance", type=_regex, default=".+", help="regular expression on instance (default all)"
    )
    parser.add_argument("--format", choices=["markdown", "csv", "html"], default="markdown",
                        help="markdown (default), csv (base units) or html (one page with charts)")
    parser.add_argument("--selector", default='job="mssql"',
                        help='matchers of the SQL Server targets (default job="mssql")')
    parser.add_argument("--source", default="sqlserver",
                        help="pool byte count: sqlserver (default), host or drive")
    parser.add_argument(
        "--resolution",
        type=_resolution,
        default=parse_duration("1h"),
        help="coarsest data the endpoint may answer from: raw, 5m or 1h (default 1h; Thanos' "
        "max_source_resolution). Periods are cut on an hourly grid, or on the resolution's if coarser: "
        "raw and 5m let Thanos read finer data, they do not make the grid finer",
    )
    parser.add_argument(
        "--memory-change-share", type=_share, default=DEFAULT_MEMORY_CHANGE_SHARE, metavar="SHARE",
        help="a move of max server memory or target memory by more than this share starts a new period "
        f"(default {DEFAULT_MEMORY_CHANGE_SHARE}, the share the dashboards mark)",
    )
    parser.add_argument("--timeout", type=_timeout, default=60.0,
                        help="seconds each query may take, whole answer included (default 60)")
    parser.add_argument("--concurrency", type=_concurrency, default=4,
                        help="instances queried at once (default 4)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    end = time.time() if args.end is None else args.end
    step = max(args.resolution, 3600.0) if args.resolution else 3600.0
    resolution_param = f"{int(args.resolution)}s"
    client = PromQLClient(args.prometheus, args.timeout, resolution_param)
    options = Options(
        end=end,
        since_seconds=args.since,
        step_seconds=step,
        resolution_seconds=args.resolution,
        selector=args.selector,
        instance_regex=args.instance,
        source=args.source,
        memory_change_share=args.memory_change_share,
        concurrency=args.concurrency,
    )
    try:
        report = build(client, options)
    except EndpointError as err:
        print(f"mssql-capacity-report: nothing computed: {err}", file=sys.stderr)
        return EXIT_NOTHING
    if not report.rows:
        print(
            f"mssql-capacity-report: nothing computed: no mssql_ssd_pool_written_bytes_total{{source="
            f'"{args.source}"}} matching {args.selector}, instance=~"{args.instance}" in the range',
            file=sys.stderr,
        )
        return EXIT_NOTHING
    render = {"markdown": to_markdown, "csv": to_csv, "html": to_html}[args.format]
    sys.stdout.write(render(report))
    for warning in report.warnings:  # as the endpoint wrote it: the rows carry the readable form
        print(f"mssql-capacity-report: partial response: {warning}", file=sys.stderr)
    if not report.anything_computed:
        print("mssql-capacity-report: nothing computed: no row has a write rate", file=sys.stderr)
        return EXIT_NOTHING
    if report.warnings or not all(row.complete for row in report.rows):
        return EXIT_INCOMPLETE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
