"""The "where rules run" table of docs/scaling.md and docs/mixin.md, written from the spec's
`rule_groups.evaluators` and the generated rule files between markers, so the pages cannot drift from
what `make generate` and `make mixin` write.

    python -m generators.where_rules_run [--check]     # `make generate` runs it; --check exits 1 when stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from alerts import generate, group_names
from alerts.spec import Spec, load

from .generated_section import refresh, replace_between

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "docs" / "scaling.md", ROOT / "docs" / "mixin.md")
BEGIN = "<!-- BEGIN generated table where-rules-run: generators/where_rules_run.py, `make generate` -->"
END = "<!-- END generated table where-rules-run -->"

EVALUATED_BY = {
    group_names.PROMETHEUS: "each shard's Prometheus",
    group_names.THANOS_RULER: "Thanos Ruler, through Thanos Query",
}
# Why the group runs where the spec puts it: what it reads.
READS = {
    group_names.RECORDING: "one target's series (rates, floors, diagnoses): all on its shard, raw 5 m data",
    group_names.RECORDING_LONG_WINDOW: "one target's pool and volume series over a day to a week",
    group_names.ALERTS: "one target's records; a shard pages for its own targets even when Query is down",
    group_names.SMARTCTL_EXPORTER: "smartctl_exporter's series of one host (opt-in: docs/endurance.md)",
    group_names.FLEET: "every shard: counts and sums across the fleet, per shard and in total",
    group_names.THANOS_RULER_WATCH: (
        "Thanos Ruler's own /metrics, on the shard that scrapes it (opt-in: the fleet group failing)"
    ),
    group_names.SHIPPED_COLLECTORS: (
        "one target's shipped collector series (opt-in: Agent jobs, backups, blocking;"
        " docs/custom-collectors.md)"
    ),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(spec: Spec) -> str:
    rows = []
    files = generate.render(spec)
    for path, text in files.items():
        for group in yaml.safe_load(text)["groups"]:
            name = group["name"]
            evaluator = spec.rule_groups.evaluator(name)
            interval = group.get("interval", "the global evaluation interval")
            partial = group.get("partial_response_strategy")
            by = EVALUATED_BY[evaluator] + (f" (`partial_response_strategy: {partial}`)" if partial else "")
            count = str(len(group["rules"]))
            cells = (f"`{name}`", f"`alerts/rules/{path}`", by, interval, count, READS[name])
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    header = "| Rule group | File | Evaluated by | Every | Rules | Reads |\n|---|---|---|---|---:|---|\n"
    return header + "\n".join(rows) + "\n"


def render(text: str, spec: Spec) -> str:
    missing = f"no table markers: add\n{BEGIN}\n{END}\nwhere the table belongs"
    return replace_between(text, BEGIN, END, table(spec), missing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generators.where_rules_run", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    args = parser.parse_args(argv)
    spec = load()
    return max(refresh(page, lambda text: render(text, spec), check=args.check) for page in PAGES)


if __name__ == "__main__":
    sys.exit(main())
