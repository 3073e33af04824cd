"""The report as one HTML page: per instance and pool, the write rate of each period drawn beside the
memory it ran with (Micron's figures put the two side by side), then the table. Inline SVG and CSS, no
scripts, fonts or other files, so the page can be mailed or attached to a ticket as it is."""

from __future__ import annotations

import html
import time

from .arithmetic import decimal_rate, sql_memory
from .collect import Report, Row
from .formats import MARKDOWN_HEADER, NO_POOLS, text_cells, title
from .promql import readable_warning

__all__ = ["to_html"]

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 220, 70, 40, 20


def _bars(rows: list[Row], start: float, end: float) -> str:
    """Two panels over one time axis: write rate (bars per period) above, memory (steps) below."""
    plot_w = WIDTH - LEFT - 10
    span = max(end - start, 1.0)

    def x(t: float) -> float:
        return LEFT + (t - start) / span * plot_w

    rates = [r.write_rate_bytes_per_second for r in rows if r.write_rate_bytes_per_second is not None]
    memories = [r.max_server_memory_bytes for r in rows if r.max_server_memory_bytes is not None]
    top_rate = max(rates, default=0.0) or 1.0
    top_memory = max(memories, default=0.0) or 1.0
    half = (HEIGHT - TOP - BOTTOM) / 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" role="img">',
        f'<text x="4" y="{TOP + 10}" font-size="11">{html.escape(decimal_rate(top_rate))}</text>',
        f'<text x="4" y="{TOP + half + 22}" font-size="11">{html.escape(sql_memory(top_memory))}</text>',
        f'<text x="{LEFT}" y="{TOP - 6}" font-size="11">write rate</text>',
        f'<text x="{LEFT}" y="{TOP + half + 12}" font-size="11">max server memory</text>',
    ]
    for row in rows:
        if row.start is None or row.end is None:
            continue
        x0, x1 = x(row.start), x(row.end)
        title = html.escape(f"{row.instance} {row.pool}: " + ("; ".join(row.notes) or "ok"))
        if row.write_rate_bytes_per_second is not None:
            h = row.write_rate_bytes_per_second / top_rate * (half - 6)
            parts.append(
                f'<rect x="{x0:.1f}" y="{TOP + half - 6 - h:.1f}" width="{max(x1 - x0, 1):.1f}" '
                f'height="{h:.1f}" fill="#3274d9"><title>{title}</title></rect>'
            )
            if row.share is not None and x1 - x0 > 60:
                label = html.escape(f"{decimal_rate(row.write_rate_bytes_per_second)}, share {row.share:.2f}")
                parts.append(
                    f'<text x="{x0 + 4:.1f}" y="{TOP + half - 10:.1f}" font-size="11" fill="#fff">'
                    f"{label}</text>"
                )
        else:
            parts.append(
                f'<rect x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1):.1f}" height="{half - 6:.1f}" '
                f'fill="none" stroke="#999" stroke-dasharray="3,3"><title>{title}</title></rect>'
            )
        if row.max_server_memory_bytes is not None:
            base = TOP + 2 * half + 10
            h = row.max_server_memory_bytes / top_memory * (half - 16)
            parts.append(
                f'<rect x="{x0:.1f}" y="{base - h:.1f}" width="{max(x1 - x0, 1):.1f}" height="{h:.1f}" '
                f'fill="#8f3bb8"><title>{html.escape(sql_memory(row.max_server_memory_bytes))}</title></rect>'
            )
    axis_y = HEIGHT - BOTTOM + 24
    parts.append(f'<line x1="{LEFT}" y1="{axis_y - 12}" x2="{WIDTH - 10}" y2="{axis_y - 12}" stroke="#444"/>')
    for t, anchor in ((start, "start"), (end, "end")):
        parts.append(
            f'<text x="{x(t):.1f}" y="{axis_y + 4}" font-size="11" text-anchor="{anchor}">'
            f"{time.strftime('%Y-%m-%d', time.gmtime(t))}</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _table(report: Report) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in MARKDOWN_HEADER)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in text_cells(row)) + "</tr>"
        for row in report.rows
    )
    warnings = "".join(f"<li>{html.escape(readable_warning(w))}</li>" for w in report.warnings)
    unpooled = "".join(f"<li>{html.escape(i)}</li>" for i in report.unpooled)
    if unpooled:
        no_pools = html.escape(NO_POOLS.format(source=report.options.source))
        unpooled = f"<p>Instances scraped in the range with {no_pools}:</p><ul>{unpooled}</ul>"
    partial = (
        f"<p><strong>Partial response.</strong> The endpoint answered without some of its stores:</p>"
        f"<ul>{warnings}</ul>"
        if warnings
        else ""
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>{unpooled}{partial}"


def to_html(report: Report) -> str:
    o = report.options
    start, end = o.end - o.since_seconds, o.end
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in report.rows:
        groups.setdefault((row.instance, row.pool), []).append(row)
    body = []
    for (instance, pool), rows in groups.items():
        body.append(f"<h2>{html.escape(instance)} · {html.escape(pool)}</h2>")
        body.append(_bars(rows, start, end))
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title(report))}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:nth-child(-n+4),"
        "td:last-child{text-align:left}</style></head><body>\n"
        f"<h1>{html.escape(title(report))}</h1>\n"
        + "\n".join(body)
        + "\n<h2>All periods (drives in decimal units, memory in SQL Server's MB)</h2>\n"
        + f"{_table(report)}\n</body></html>\n"
    )
