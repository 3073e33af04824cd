"""Rule lint, standing in for pint (not installable here): alert labels and annotations, counters under
rate(), and every raw metric exported by the exporter and filtered by the spec's selector."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
EXPORTER_SRC = ROOT / "exporter" / "mssql_memory_exporter"

SEVERITIES = {"critical", "warning", "info"}
RECORD_NAME = re.compile(r"^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$")
RANGE_FUNCTION = re.compile(r"\b(rate|irate|increase)\s*\(\s*([a-zA-Z_:][\w:]*)")
# A metric name that is not part of a recorded name (level:metric:operations) on either side.
RAW_METRIC = re.compile(r"(?<![\w:])(mssql_\w+)(?![\w:])")
# Names promised verbatim to capacity reviews by the alerting issue, kept although they carry no
# operations part (public API outranks the convention).
NAMED_BY_THE_ISSUE = {"pool:mssql_ssd_endurance_remaining_seconds"}
# Series only the exporter's own /metrics carries (drive health): filtered by the spec's exporter
# selector, never by the SQL Server targets' one, which cannot match them.
OWN_METRICS_PREFIX = "mssql_drive_"


def alert_lint(rule: dict[str, Any]) -> list[str]:
    problems = []
    name = rule["alert"]
    if rule.get("labels", {}).get("severity") not in SEVERITIES:
        problems.append(f"{name}: severity must be one of {sorted(SEVERITIES)}")
    annotations = rule.get("annotations", {})
    if not annotations.get("summary"):
        problems.append(f"{name}: no summary")
    if "$value" not in annotations.get("description", ""):
        problems.append(f"{name}: the description must quote $value")
    if not annotations.get("runbook_url", "").endswith(f"docs/runbooks/{name}.md"):
        problems.append(f"{name}: runbook_url must end in docs/runbooks/{name}.md")
    return problems


def expression_lint(
    expr: str, selector: str, exported: set[str], own_selector: str | None = None
) -> list[str]:
    problems = []
    for function, metric in RANGE_FUNCTION.findall(expr):
        if not metric.endswith("_total"):
            problems.append(f"{function}() over {metric}, which is not a counter (_total)")
    for match in RAW_METRIC.finditer(expr):
        metric = match.group(1)
        if metric not in exported:
            problems.append(f"{metric} is not exported by the exporter")
        rest = expr[match.end() :]
        matchers = rest[1 : rest.index("}")] if rest.startswith("{") else None
        wanted = own_selector if metric.startswith(OWN_METRICS_PREFIX) and own_selector else selector
        if matchers is None or wanted not in matchers:
            problems.append(f"{metric} is not filtered by the spec's selector {wanted}")
    return problems


def exported_metric_names() -> set[str]:
    """Names the exporter produces: golden expositions, plus the literals of collectors whose metrics
    appear only in special scenarios (tempdb, volumes, HBP, SSD pools, host)."""
    names: set[str] = set()
    for prom in GOLDEN.glob("*.prom"):
        for line in prom.read_text().splitlines():
            if line.startswith("# TYPE "):
                names.add(line.split()[2])
            elif line and not line.startswith("#"):
                names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    for source in EXPORTER_SRC.rglob("*.py"):
        names.update(re.findall(r'"(mssql_[a-z0-9_]+)"', source.read_text()))
    return names
