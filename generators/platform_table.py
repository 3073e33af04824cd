"""docs/platforms.md's collector-by-platform table, written from the code between markers: one row per
collector of the registry (collectors/__init__.py COLLECTORS), one column per platform of platform.py
PLATFORMS, each cell what the exporter does there (runs, or left out and why: platform.why_left_out). A
collector added to the registry gets its row from `make generate`; the page cannot drift from the code,
and tests/test_platform_matrix.py scrapes a stand-in of each platform and compares with the page.

    python -m generators.platform_table [--docs docs/platforms.md] [--check]

`--check` rewrites nothing and exits 1 when the table is stale (the tests run it).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import CollectorRecord
from mssql_memory_exporter.collectors.perf import objects_named
from mssql_memory_exporter.scrape.platform import PLATFORMS, Platform, reads, sql_by_tag, why_left_out

from .generated_section import refresh, replace_between

DOCS = Path("docs/platforms.md")
BEGIN = "<!-- BEGIN generated table collectors by platform: platform.py and COLLECTORS, `make generate` -->"
END = "<!-- END generated table collectors by platform -->"
RUNS = "runs"
LEFT_OUT = "left out"
# Column headings; a platform added to platform.py without a title here is headed by its name.
TITLES = {
    "sql_server": "SQL Server",
    "azure_sql_managed_instance": "Azure SQL Managed Instance",
    "azure_sql_database": "Azure SQL Database",
}


def platform_columns() -> list[tuple[Platform, list[int]]]:
    """Each distinct platform with the EngineEdition values detected as it, in PLATFORMS' order."""
    columns: dict[str, tuple[Platform, list[int]]] = {}
    for edition, platform in PLATFORMS.items():
        columns.setdefault(platform.name, (platform, []))[1].append(edition)
    return list(columns.values())


def heading(platform: Platform, editions: Sequence[int]) -> str:
    numbers = ", ".join(str(e) for e in editions)
    return f"{TITLES.get(platform.name, platform.name)} (EngineEdition {numbers})"


def _reads_cell(record: CollectorRecord, sql_of: dict[str, str]) -> str:
    optional = {
        name.lower() for s in record.defines if s.optional for name in s.requires
    }  # "unavailable", not failed, where the server lacks them (an older version, no AG)
    objects = sorted(reads(record, sql_of))
    perf = "sys.dm_os_performance_counters"
    names = [
        f"`{o}`"
        + (f" ({', '.join(objects)})" if o == perf and (objects := objects_named(record.reads)) else "")
        + (" (if present)" if o in optional else "")
        for o in objects
    ]
    return ", ".join(names) or "SERVERPROPERTY only"


def table(collectors: Sequence[CollectorRecord] = COLLECTORS) -> str:
    columns = platform_columns()
    left = [why_left_out(platform, collectors) for platform, _ in columns]
    sql_of = sql_by_tag(collectors)
    lines = [
        "| Collector | Reads | " + " | ".join(heading(p, e) for p, e in columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for record in collectors:
        cells = [f"{LEFT_OUT}: {why[record.name]}" if record.name in why else RUNS for why in left]
        lines.append(f"| `{record.name}` | {_reads_cell(record, sql_of)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(text: str, collectors: Sequence[CollectorRecord] = COLLECTORS) -> str:
    """The page with the table rewritten between its markers."""
    missing = f"the page has no table markers: add\n{BEGIN}\n{END}\nwhere the table belongs"
    return replace_between(text, BEGIN, END, table(collectors), missing)


def parse(text: str) -> dict[str, dict[int, str]]:
    """The table as written on the page: collector -> {EngineEdition: cell}, for the tests to compare
    with scrapes of each platform."""
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    rows = [line.strip().strip("|").split(" | ") for line in text[start:end].strip().splitlines()]
    header, body = rows[0], rows[2:]
    editions = [[int(n) for n in re.findall(r"\d+", h.split("EngineEdition")[-1])] for h in header[2:]]
    return {
        row[0].strip("` "): {
            e: cell.strip() for numbers, cell in zip(editions, row[2:], strict=True) for e in numbers
        }
        for row in body
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m generators.platform_table", description=__doc__
    )
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale; write nothing")
    args = parser.parse_args(argv)
    return refresh(args.docs, render, check=args.check)


if __name__ == "__main__":
    raise SystemExit(main())
