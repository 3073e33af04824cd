"""The report as CSV (base units, for a spreadsheet) and as a markdown table (decimal units, for people).

CSV's first nine columns are the review's contract, in this order; target memory, the drives' own wear
(the highest reading in the period) and the row's notes follow them. An empty cell is a figure the report
could not compute; the `note` column says why. Text from the endpoint (labels, notes) is data, never a
formula: a CSV cell that a spreadsheet would evaluate (=, +, -, @, tab, CR first) gets a leading quote,
and a markdown cell keeps to one line.
"""

from __future__ import annotations

import csv
import io
import time

from .arithmetic import decimal_bytes, decimal_rate, sql_memory
from .collect import Report, Row
from .promql import readable_warning

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
CSV_EXTRA = ["target_memory_bytes", "drive_life_used_ratio", "drive_implied_endurance_bytes", "note"]
# Instances listed after the rows, with no figures: they were scraped but count no pool from the source.
NO_POOLS = "no SSD pools configured (none counted from source {source!r})"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def when(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}" if abs(value) < 1e3 else f"{value:.0f}"


def _note(row: Row) -> str:
    return "; ".join(row.notes)


def _cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: OWASP's advice for CSV injection."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER + CSV_EXTRA)
    for row in report.rows:
        writer.writerow(
            [
                _cell(row.instance),
                _cell(row.pool),
                when(row.start),
                when(row.end),
                _number(row.max_server_memory_bytes),
                _number(row.write_rate_bytes_per_second),
                _number(row.projected_life_bytes),
                _number(row.rated_bytes),
                "" if row.share is None else f"{row.share:.4f}",
                _number(row.target_memory_bytes),
                "" if row.drive_life_used is None else f"{row.drive_life_used:.4f}",
                _number(row.drive_implied_endurance_bytes),
                _cell(_note(row)),
            ]
        )
    for instance in report.unpooled:
        note = NO_POOLS.format(source=report.options.source)
        writer.writerow([_cell(instance)] + [""] * (len(CSV_HEADER) + len(CSV_EXTRA) - 2) + [note])
    return out.getvalue()


def _text(value: float | None, render: object = decimal_bytes) -> str:
    return "-" if value is None else render(value)  # type: ignore[operator]


def _date(seconds: float | None) -> str:
    return "" if seconds is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(seconds))


MARKDOWN_HEADER = [
    "Instance", "Pool", "From", "To", "Max server memory", "Target memory", "Write rate", "Projected life",
    "Rated", "Share", "Drives' life used (period max)", "Drives' implied endurance (period max)", "Note",
]


def text_cells(row: Row) -> list[str]:
    """A row in decimal units, as the markdown and HTML tables show it."""
    return [
        row.instance,
        row.pool,
        _date(row.start),
        _date(row.end),
        _text(row.max_server_memory_bytes, sql_memory),
        _text(row.target_memory_bytes, sql_memory),
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
    asked = o.end - o.since_seconds
    text = f"SSD endurance by memory size, {_date(asked)} to {_date(o.end)} UTC"
    start = report.data_start
    if start is not None and start > asked + 86400:
        text += f" (data from {_date(start)})"
    return text


def one_line(text: str) -> str:
    """A table cell on one line: a newline in a label would end the row."""
    return " ".join(text.splitlines()).replace("|", "\\|")


def to_markdown(report: Report) -> str:
    o = report.options
    lines = [
        f"# {title(report)}",
        "",
        f"Write rate of `source=\"{o.source}\"` per period of one memory size; projected over each pool's "
        "planned life and set against its rating. Drives in decimal units (1 TB = 10^12 bytes); memory in "
        "SQL Server's MB (2^20 bytes), as max server memory is set.",
        "",
        "| " + " | ".join(MARKDOWN_HEADER) + " |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in report.rows:
        lines.append("| " + " | ".join(one_line(c) for c in text_cells(row)) + " |")
    if report.unpooled:
        lines += ["", f"Instances scraped in the range with {NO_POOLS.format(source=o.source)}:", ""]
        lines += [f"- {one_line(instance)}" for instance in report.unpooled]
    if report.warnings:
        lines += ["", "**Partial response.** The endpoint answered without some of its stores:", ""]
        lines += [f"- {one_line(readable_warning(warning))}" for warning in report.warnings]
    return "\n".join(lines) + "\n"
