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
# Another exporter's series: only the optional smartctl_exporter rules may read them, filtered by the spec's
# smartctl_exporter_selector, and only names prometheus-community/smartctl_exporter exports (0.14.0; the
# per-device names have not changed since 0.9.0). A quoted "smartctl_..." is a label value, not a metric.
FOREIGN_METRIC = re.compile(r'(?<![\w:"])(smartctl_\w+)(?![\w:"])')
SMARTCTL_EXPORTER_METRICS = frozenset(
    {
        "smartctl_version",
        "smartctl_exporter_build_info",
        "smartctl_devices",
        "smartctl_device",
        "smartctl_device_capacity_blocks",
        "smartctl_device_capacity_bytes",
        "smartctl_device_nvme_capacity_bytes",
        "smartctl_device_block_size",
        "smartctl_device_interface_speed",
        "smartctl_device_attribute",
        "smartctl_device_power_on_seconds",
        "smartctl_device_rotation_rate",
        "smartctl_device_temperature",
        "smartctl_device_power_cycle_count",
        "smartctl_device_percentage_used",
        "smartctl_device_available_spare",
        "smartctl_device_available_spare_threshold",
        "smartctl_device_critical_warning",
        "smartctl_device_media_errors",
        "smartctl_device_num_err_log_entries",
        "smartctl_device_bytes_read",
        "smartctl_device_bytes_written",
        "smartctl_device_smart_status",
        "smartctl_device_smartctl_exit_status",
        "smartctl_device_state",
        "smartctl_device_statistics",
        "smartctl_device_error_log_count",
        "smartctl_device_self_test_log_count",
        "smartctl_device_self_test_log_error_count",
        "smartctl_device_erc_seconds",
    }
)


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
    expr: str,
    selector: str,
    exported: set[str],
    own_selector: str | None = None,
    smartctl_selector: str | None = None,
) -> list[str]:
    """Problems of one rule expression. `smartctl_selector` is given for the optional smartctl_exporter
    rules only: everywhere else a smartctl_exporter series is a mistake."""
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
    for match in FOREIGN_METRIC.finditer(expr):
        metric = match.group(1)
        if smartctl_selector is None:
            problems.append(f"{metric} is smartctl_exporter's: only its optional rules may read it")
            continue
        if metric not in SMARTCTL_EXPORTER_METRICS:
            problems.append(f"{metric} is not exported by smartctl_exporter")
        rest = expr[match.end() :]
        matchers = rest[1 : rest.index("}")] if rest.startswith("{") else None
        if matchers is None or smartctl_selector not in matchers:
            problems.append(f"{metric} is not filtered by the spec's selector {smartctl_selector}")
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
    # The shipped collector files' metrics (collectors/shipped/*.yml), which the optional alerts read.
    for shipped in EXPORTER_SRC.rglob("shipped/*.yml"):
        names.update(re.findall(r"name: (mssql_custom_[a-z0-9_]+)", shipped.read_text()))
    return names
