"""The memory dashboard's row for the shipped collector files (issue 40): SQL Server Agent jobs, backup
age, blocking. Collapsed (the files are off by default), fed by the metric names the shipped files
declare, drawn against the opt-in alerts' limits from the spec, and saying, when empty, which file
switches it on. Fails on the code before it: no such row, no panel on any mssql_custom_ series."""

from __future__ import annotations

import re
from typing import Any

import pytest

from alerts.shipped_collectors import shipped_files
from alerts.spec import duration_seconds
from alerts.spec import load as load_spec
from dashboards import frame, shipped
from tests.lint.dashboards import BOARDS, panels

CUSTOM = re.compile(r"\bmssql_custom_[a-z0-9_]+\b")
TITLES = [
    "SQL Agent jobs",
    "Backup age per database",
    "Longest blocked wait",
    "Blocked requests and head blockers",
    "Deadlocks",
]


def _row() -> dict[str, Any]:
    [row] = [p for p in BOARDS[frame.MEMORY_UID]["panels"] if p.get("title") == shipped.ROW_TITLE]
    return row


def _panel(title: str) -> dict[str, Any]:
    [panel] = [p for p in _row()["panels"] if p["title"] == title]
    return panel


def _exprs(panel: dict[str, Any]) -> str:
    return " ".join(t["expr"] for t in panel.get("targets", []))


def test_the_row_is_collapsed_and_holds_every_panel_on_the_shipped_files():
    row = _row()
    assert row["type"] == "row" and row["collapsed"] is True
    assert [p["title"] for p in row["panels"]] == TITLES
    # Nowhere else: a site without the files sees the row's one line, not five empty panels.
    fed = [p["title"] for b in BOARDS.values() for p in panels(b) if CUSTOM.search(_exprs(p))]
    assert sorted(fed) == sorted(p["title"] for p in row["panels"])


def test_every_shipped_file_has_a_panel_and_every_metric_is_one_a_file_declares():
    declared = shipped_files()
    used: set[str] = set()
    for panel in _row()["panels"]:
        names = set(CUSTOM.findall(_exprs(panel)))
        assert names and names <= set(declared), f"{panel['title']}: {sorted(names - set(declared))}"
        used |= names
    assert {declared[name] for name in used} == set(declared.values())
    # What the DBA asked for: failed jobs and long runs, backup age, blocked wait and count, deadlocks.
    assert {
        "mssql_custom_agent_job_last_run_failed",
        "mssql_custom_agent_job_running_seconds",
        "mssql_custom_backup_age_seconds",
        "mssql_custom_blocked_wait_longest_seconds",
        "mssql_custom_blocked_requests",
        "mssql_custom_head_blockers",
        "mssql_custom_deadlocks_total",
    } <= used


@pytest.mark.parametrize("title", TITLES)
def test_an_empty_panel_says_its_file_is_off_by_default_and_how_to_switch_it_on(title):
    panel = _panel(title)
    text = panel["fieldConfig"]["defaults"]["noValue"]
    files = sorted({shipped_files()[name] for name in CUSTOM.findall(_exprs(panel))})
    assert "off by default" in text, text
    assert f"collector_files: [{', '.join(files)}]" in text, text
    assert "docs/custom-collectors.md" in text and "failing" in text, text


def _steps(panel: dict[str, Any], column: str | None = None) -> list[Any]:
    if column is None:
        return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    [steps] = [
        p["value"]["steps"]
        for o in panel["fieldConfig"]["overrides"]
        if o["matcher"]["options"] == column
        for p in o["properties"]
        if p["id"] == "thresholds"
    ]
    return [s["value"] for s in steps]


def test_each_panel_is_drawn_against_its_alerts_limit():
    s = load_spec().shipped_collectors
    assert _steps(_panel("SQL Agent jobs"), "Running for") == [None, duration_seconds(s.agent_job_max_run)]
    backups = _panel("Backup age per database")
    assert _steps(backups, "Full") == [None, duration_seconds(s.backup_full_max_age)]
    assert _steps(backups, "Log") == [None, duration_seconds(s.backup_log_max_age)]
    assert _steps(_panel("Longest blocked wait")) == [None, duration_seconds(s.blocked_wait_max)]
    # One query per backup type, each its own column, so each is judged by its own limit.
    kinds = re.findall(r'backup_type="(\w+)"', _exprs(backups))
    assert kinds == ["full", "differential", "log"]

