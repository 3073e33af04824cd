"""docs/metrics.md's metric reference tables, written from the collectors' declarations (their
`CollectorRecord.metrics`) between markers, so the page cannot drift from what the exporter emits; and
docs/permissions.md's tables of what each collector reads and needs (permission_reference.py); and
docs/configuration.md's list of the label names a target's `labels` may not use, from the declarations.

    python -m generators.reference [--docs docs/metrics.md] [--permissions docs/permissions.md]
        [--config-docs docs/configuration.md] [--check]

`--check` rewrites nothing and exits 1 when a table is stale (the tests and `make generate` run it).
A declared collector whose markers are missing from the page is an error naming it.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import CollectorRecord
from mssql_memory_exporter.metrics.declare import MetricSpec
from mssql_memory_exporter.scrape.scrape_metrics import TARGET_SERIES_LABELS

from . import permission_reference
from .generated_section import refresh, replace_between

DOCS = Path("docs/metrics.md")
CONFIG_DOCS = Path("docs/configuration.md")
LABELS_BEGIN = "<!-- BEGIN generated reserved labels: from the metrics' declarations, `make generate` -->"
LABELS_END = "<!-- END generated reserved labels -->"
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
        first, last = begin(record.name), end(record.name)
        missing = (
            f"docs/metrics.md has no table markers for collector {record.name!r}: add\n"
            f"{first}\n{last}\nwhere its table belongs"
        )
        text = replace_between(text, first, last, table(record), missing)
    return text


def reserved_labels(names: Iterable[str] = TARGET_SERIES_LABELS) -> str:
    """The paragraph naming every label a target's series carry, wrapped like the page's prose."""
    listed = ", ".join(f"`{name}`" for name in sorted(names))
    text = f"Label names the exporter itself puts on a target's samples cannot be used in `labels`: {listed}."
    return textwrap.fill(text, width=104, break_long_words=False, break_on_hyphens=False) + "\n"


def render_labels(text: str) -> str:
    """The configuration page with its reserved-label paragraph rewritten between its markers."""
    missing = f"docs/configuration.md has no reserved-label markers: add\n{LABELS_BEGIN}\n{LABELS_END}"
    return replace_between(text, LABELS_BEGIN, LABELS_END, reserved_labels(), missing)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generators.reference", description=__doc__)
    parser.add_argument("--docs", type=Path, default=DOCS)
    parser.add_argument("--permissions", type=Path, default=permission_reference.DOCS)
    parser.add_argument("--config-docs", type=Path, default=CONFIG_DOCS)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args(argv)
    status = 0
    pages = (
        (args.docs, render),
        (args.permissions, permission_reference.render),
        (args.config_docs, render_labels),
    )
    for page, renderer in pages:
        status = max(status, refresh(page, renderer, check=args.check))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
