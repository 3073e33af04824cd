"""The report as CSV (base units, for a spreadsheet) and as a markdown table (decimal units, for people).

CSV's first nine columns are the review's contract, in this order; the drives' own wear and the row's
notes follow them. An empty cell is a figure the report could not compute; the `note` column says why.
"""

from __future__ import annotations

import csv
import io
import time

from .arithmetic import decimal_bytes, decimal_rate
from .collect import Report, Row

__all__ = ["CSV_HEADER", "to_csv", "to_markdown", "when"]

CSV_HEADER = [
    "instance",
    "pool",
    "from",
    "to",
    "max_server_memory_bytes",
    "write_rate_bytes_per_second",
    "projected_life_bytes",
    "rated_bytes",
    "share",
]
CSV_EXTRA = ["drive_life_used_ratio", "drive_implied_endurance_bytes", "note"]


def when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}" if abs(value) < 1e3 else f"{value:.0f}"


def _note(row: Row) -> str:
    return "; ".join(row.notes)


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER + CSV_EXTRA)
    for row in report.rows:
        writer.writerow(
            [
                row.instance,
                row.pool,
                when(row.start),
                when(row.end),
                _number(row.max_server_memory_bytes),
                _number(row.write_rate_bytes_per_second),
                _number(row.projected_life_bytes),
                _number(row.rated_bytes),
                "" if row.share is None else f"{row.share:.4f}",
                "" if row.drive_life_used is None else f"{row.drive_life_used:.4f}",
                _number(row.drive_implied_endurance_bytes),
                _note(row),
            ]
        )
    return out.getvalue()


def _text(value: float | None, render: object = decimal_bytes) -> str:
    return "-" if value is None else render(value)  # type: ignore[operator]


def _date(seconds: float | None) -> str:
    return "" if seconds is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds))


MARKDOWN_HEADER = [
    "Instance", "Pool", "From", "To", "Max server memory", "Write rate", "Projected life", "Rated", "Share",
    "Drives' life used", "Drives' implied endurance", "Note",
]


def text_cells(row: Row) -> list[str]:
    """A row in decimal units, as the markdown and HTML tables show it."""
    return [
        row.instance,
        row.pool,
        _date(row.start),
        _date(row.end),
        _text(row.max_server_memory_bytes),
        _text(row.write_rate_bytes_per_second, decimal_rate),
        _text(row.projected_life_bytes),
        _text(row.rated_bytes),
        "-" if row.share is None else f"{row.share:.3f}",
        "-" if row.drive_life_used is None else f"{row.drive_life_used:.0%}",
        _text(row.drive_implied_endurance_bytes),
        _note(row),
    ]


def title(report: Report) -> str:
    o = report.options
    return f"SSD endurance by memory size, {_date(o.end - o.since_seconds)} to {_date(o.end)} UTC"


def to_markdown(report: Report) -> str:
    o = report.options
    lines = [
        f"# {title(report)}",
        "",
        f"Write rate of `source=\"{o.source}\"` per period of one memory size; projected over each pool's "
        "planned life and set against its rating. Decimal units (1 TB = 10^12 bytes).",
        "",
        "| " + " | ".join(MARKDOWN_HEADER) + " |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in report.rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in text_cells(row)) + " |")
    if report.warnings:
        lines += ["", "**Partial response.** The endpoint answered without some of its stores:", ""]
        lines += [f"- {warning}" for warning in report.warnings]
    return "\n".join(lines) + "\n"
