"""Walking the generated dashboards: panels, their queries with Grafana's variables, and the PromQL a
variable query stands for. Shared by the dashboard lint (tests/unit/test_dashboards.py) and the end-to-end run
of every query (tests/e2e/test_dashboards_e2e.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from alerts import generate as alerts_generate
from alerts import shipped_collectors
from alerts.spec import Spec
from alerts.spec import load as load_spec
from dashboards import generate

BOARDS: dict[str, dict[str, Any]] = generate.build(load_spec())

# --- walking the dashboards --------------------------------------------------------------------------


@dataclass(frozen=True)
class Q:
    """One query of a dashboard: a panel target, an annotation or a template variable."""

    board: str
    where: str  # panel title / annotation name / variable name
    ref: str
    expr: str
    kind: str  # "range", "instant", "annotation", "variable"
    panel: dict[str, Any] | None = None

    def __str__(self) -> str:
        return f"{self.board} / {self.where} / {self.ref}"


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(board: dict[str, Any]) -> Iterator[Q]:
    uid = board["uid"]
    for panel in panels(board):
        for target in panel.get("targets", []):
            kind = "instant" if target.get("instant") else "range"
            yield Q(uid, panel["title"], target["refId"], target["expr"], kind, panel)
    for annotation in board["annotations"]["list"]:
        if "expr" in annotation:
            yield Q(uid, annotation["name"], "annotation", annotation["expr"], "annotation")
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            yield Q(uid, variable["name"], "variable", variable["query"], "variable")


ALL_QUERIES = [q for board in BOARDS.values() for q in queries(board)]
PROMQL = [q for q in ALL_QUERIES if q.kind != "variable"]


def substitute(text: str, values: dict[str, str]) -> str:
    """Grafana's variable interpolation: `$name` and `${name}`; an unknown variable fails."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise AssertionError(f"variable ${name} has no test value in {text!r}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, text)


LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$", re.S)
QUERY_RESULT = re.compile(r"^query_result\((?P<expr>.+)\)$", re.S)


def variable_promql(query: str) -> tuple[str, str]:
    """A `label_values(selector, label)` variable query as PromQL, and the label it lists; or the PromQL
    of a `query_result(...)` whose series carry the value in `count by (label)`."""
    result = QUERY_RESULT.match(query.strip())
    if result:
        label = re.search(r"count by \((\w+)\)", result["expr"])
        assert label, f"query_result() variable without a count by (label): {query!r}"
        return result["expr"], label.group(1)
    match = LABEL_VALUES.match(query.strip())
    assert match, f"not a label_values() variable query: {query!r}"
    return f"count by ({match['label']}) ({match['selector']})", match["label"]


def recorded_names(spec: Spec) -> set[str]:
    return {rule["record"] for rule in alerts_generate.recording_rules(spec)}


def alert_names(spec: Spec) -> set[str]:
    """The bundle's alerts, and the opt-in ones on the shipped collector files (their panels link them)."""
    rules = [*alerts_generate.alert_rules(spec), *shipped_collectors.alert_rules(spec)]
    return {rule["alert"] for rule in rules}


# --- long-window figures -----------------------------------------------------------------------------

# Recording rules averaged over a day or more (rate1d, rate7d, avg1d) and what is computed from them (the
# projected share, the time until a rating is used up): a young Prometheus holds only a fraction of the
# window, and such a figure drawn from it spikes and decays.
LONG_WINDOW_RULE = re.compile(
    r"\b[a-z]+:mssql_[a-z_]+:(?:rate|avg)\d+[dw]\b(?!_coverage)|:mssql_ssd_endurance_(?:projected_used|remaining)"
)
COVERAGE_GATE = re.compile(r"and on \([^)]*\) [a-z]+:mssql_[a-z0-9_:]+_coverage_seconds\{[^}]*\} >= (\d+)")


def long_window_figures(expr: str) -> list[str]:
    """The long-window rules `expr` shows as a figure (not only for its labels, `rule * 0`)."""
    found = []
    for match in LONG_WINDOW_RULE.finditer(expr):
        rest = expr[match.end() :]
        rest = rest[rest.index("}") + 1 :] if rest.startswith("{") else rest
        if not re.match(r"\s*\*\s*0\b", rest):
            found.append(match.group(0))
    return found


def coverage_minimums(expr: str) -> list[int]:
    """The minimum seconds of data each coverage gate of `expr` asks for."""
    return [int(minimum) for minimum in COVERAGE_GATE.findall(expr)]
