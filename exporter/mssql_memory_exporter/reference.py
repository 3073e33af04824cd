"""docs/metrics.md's metric reference tables, written from the collectors' declarations (their
`CollectorRecord.metrics`) between markers, so the page cannot drift from what the exporter emits; and
docs/permissions.md's tables of what each collector reads and needs (permission_reference.py).

    python -m mssql_memory_exporter.reference [--docs docs/metrics.md] [--permissions docs/permissions.md]
        [--check]

`--check` rewrites nothing and exits 1 when a table is stale (the tests and `make generate` run it).
A declared collector whose markers are missing from the page is an error naming it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import permission_reference
from .collectors import COLLECTORS
from .collectors.base import CollectorRecord
from .collectors.declare import MetricSpec

DOCS = Path("docs/metrics.md")
HEADER = "| Metric | Type | Labels | Unit | Source | Question it answers |\n|---|---|---|---|---|---|\n"


def begin(name: str) -> str:
    return f"<!-- BEGIN generated table {name}: from its COLLECTOR.metrics, `make generate` -->"


def end(name: str) -> str:
    return f"<!-- END generated table {name} -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(spec: MetricSpec, previous: MetricSpec | None) -> str:
    if not spec.labels:
        labels = "—"
    elif previous is not None and previous.labels == spec.labels:
        labels = "same"
    else:
        labels = "; ".join(
            f"`{label.name}`" + (f": {label.meaning}" if label.meaning else "") for label in spec.labels
        )
    question = spec.question or spec.help
    if spec.conditional:
        question += f" Absent {spec.conditional}."
    cells = (f"`{spec.name}`", spec.type, labels, spec.unit or "—", spec.source, question)
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def table(record: CollectorRecord) -> str:
    lines = []
    previous: MetricSpec | None = None
    for spec in record.metrics:
        lines.append(row(spec, previous))
        previous = spec
    return HEADER + "\n".join(lines) + "\n"


def render(text: str, collectors: Iterable[CollectorRecord] = COLLECTORS) -> str:
    """The page with every declared collector's table rewritten between its markers."""
    for record in collectors:
        if not record.metrics:
            continue
        pattern = re.compile(re.escape(begin(record.name)) + r"\n.*?" + re.escape(end(record.name)), re.S)
        if not pattern.search(text):
            raise LookupError(
                f"docs/metrics.md has no table markers for collector {record.name!r}: add\n"
                f"{begin(record.name)}\n{end(record.name)}\nwhere its table belongs"
            )
        text = pattern.sub(lambda _m, r=record: f"{begin(r.name)}\n{table(r)}{end(r.name)}", text)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mssql_memory_exporter.reference", description=__doc__)
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--permissions", type=Path, default=permission_reference.DOCS)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args(argv)
    status = 0
    for page, renderer in ((args.docs, render), (args.permissions, permission_reference.render)):
        status = max(status, _refresh(page, renderer, check=args.check))
    return status


def _refresh(page: Path, renderer: Callable[[str], str], *, check: bool) -> int:
    current = page.read_text(encoding="utf-8")
    try:
        fresh = renderer(current)
    except LookupError as exc:
        print(exc, file=sys.stderr)
        return 2
    if fresh == current:
        return 0
    if check:
        print(f"{page} is stale: run `make generate`", file=sys.stderr)
        return 1
    page.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
