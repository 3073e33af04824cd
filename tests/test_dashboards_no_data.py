"""Every panel says why it is empty, in the place Grafana 12.4 shows it (issue 26).

What 12.4.0 shows when a panel's queries return nothing (rendered with ../shared/tools/grafana-modern
against an instance with no data, and read in its source):

- time series and table: the panel's error view with `fieldConfig.defaults.noValue` in it, "No data"
  without one (PanelDataErrorView);
- stat and bar gauge: `noValue` as the value's text (so not on a stat that shows names only);
- a table of several queries: no text at all. When every query is empty the Prometheus datasource still
  gives the table its "Value #A", "Value #B" columns (transformDFToTable), and a table with columns and no
  rows draws its header only. The builder puts a group-by on the table's label columns between merge and
  organize (grafana.merge_and_organize): it keeps a row per label set, and drops a frame that has no label
  column, so the empty table shows its text;
- the gauge drew nothing in the Grafana we render in, with data or without (it draws with flot, which
  that build lacks; 12.4's source marks it deprecated): the builder makes bar gauges instead.

A panel fed by a collector that can be turned off (`collectors:` in the exporter's config,
mssql_exporter_collector_enabled{collector} 0) names that collector in its text.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from mssql_memory_exporter.collectors import COLLECTORS, server_properties

from dashboards.grafana import Panel, Query, merge_and_organize
from tests.lint.dashboards import BOARDS, panels

# The panel types whose no-data text 12.4 shows, and where it reads it.
SHOWS_NO_VALUE = {"timeseries", "stat", "bargauge", "table"}
GRAFANA_DEFAULT = "no data"
# Each raw metric name, to the collector that exports it (its declaration, metrics/declare.py).
COLLECTOR_OF = {spec.name: record.name for record in COLLECTORS for spec in record.metrics}
# A raw metric name; not the middle of a recording rule's name (level:metric:operations).
# Metrics a query joins for a label (the target's workload), not for data: they never empty a panel.
LABEL_JOINS = {server_properties.TARGET_INFO.name}
# Panels whose collectors cannot empty them, and why.
NOT_EMPTIED_BY_A_COLLECTOR = {"Instances": "a row per scraped instance: any of its columns fills it"}
METRIC = re.compile(r"(?<![:\w])mssql_[a-z0-9_]+(?![:\w])")


def _drawn(board: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in panels(board) if p["type"] != "row"]


@pytest.mark.parametrize("uid", list(BOARDS))
def test_every_panel_says_why_it_is_empty(uid):
    for panel in _drawn(BOARDS[uid]):
        title = panel["title"]
        assert panel["type"] in SHOWS_NO_VALUE, f"{title}: 12.4 shows no no-data text on a {panel['type']}"
        # 12.4 shows a stat's no-data text as its value: a stat of names only shows nothing (it did).
        assert panel["options"].get("textMode") != "name", f"{title}: its no-data text would not show"
        text = panel["fieldConfig"]["defaults"].get("noValue")
        assert isinstance(text, str) and text.strip(), f"{title}: no no-data text of its own"
        assert text.strip().lower() != GRAFANA_DEFAULT, f"{title}: {text!r} says nothing Grafana does not"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_an_empty_table_shows_its_text_and_an_empty_cell_stays_empty(uid):
    for panel in (p for p in _drawn(BOARDS[uid]) if p["type"] == "table"):
        title = panel["title"]
        steps = [t["id"] for t in panel.get("transformations", [])]
        if len(panel["targets"]) > 1:
            assert steps == ["merge", "groupBy", "organize"], f"{title}: {steps}"
            fields = panel["transformations"][1]["options"]["fields"]
            keys = [name for name, how in fields.items() if how["operation"] == "groupby"]
            kept = [name for name, how in fields.items() if how["operation"] == "aggregate"]
            # A frame of only "Time" and "Value #X" columns (every query empty) has none of the keys.
            assert keys and not any(k == "Time" or k.startswith("Value #") for k in keys), f"{title}: {keys}"
            values = {f"Value #{t['refId']}" for t in panel["targets"]}
            assert kept and set(kept) <= values, f"{title}: {kept}"
        blank = [
            o
            for o in panel["fieldConfig"]["overrides"]
            if o["matcher"] == {"id": "byRegexp", "options": ".*"}
            and {"id": "noValue", "value": ""} in o["properties"]
        ]
        assert blank, f"{title}: its no-data text would fill every empty cell"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_a_panel_fed_by_a_collector_says_it_may_be_off(uid):
    """Where every raw metric of a panel comes from declared collectors, the text names one of them."""
    for panel in _drawn(BOARDS[uid]):
        exprs = " ".join(t["expr"] for t in panel["targets"])
        names = set(METRIC.findall(exprs)) - LABEL_JOINS
        collectors = {COLLECTOR_OF[n] for n in names if n in COLLECTOR_OF}
        if not collectors or panel["title"] in NOT_EMPTIED_BY_A_COLLECTOR:
            continue
        text = panel["fieldConfig"]["defaults"]["noValue"]
        assert any(re.search(rf"\b{c}\b", text) for c in collectors), (
            f"{panel['title']}: fed by {sorted(collectors)}, its text {text!r} names none"
        )


def _panel(**changes: Any) -> Panel:
    fields: dict[str, Any] = {
        "type": "timeseries",
        "title": "A panel",
        "description": "What it shows; healthy range.",
        "unit": "s",
        "queries": [Query("up")],
        "no_value": "No data: collector x off or failing",
    }
    fields.update(changes)
    return Panel(**fields)


def test_the_builder_makes_no_panel_without_a_reason_to_be_empty():
    assert _panel().json(1, 0, 0)["fieldConfig"]["defaults"]["noValue"].startswith("No data: collector")
    with pytest.raises(TypeError, match="no_value"):
        Panel("stat", "A stat", "What it shows; healthy range.", "s", [Query("up")])  # type: ignore[call-arg]
    for said in ("", "   ", "No data", "no data"):
        with pytest.raises(ValueError, match="no_value must say why"):
            _panel(no_value=said)
    with pytest.raises(ValueError, match="'gauge' is not one the builder makes"):
        _panel(type="gauge")
    with pytest.raises(ValueError, match="never shows its no-data text"):
        _panel(type="stat", options={"textMode": "name"})


def test_a_table_without_a_label_column_cannot_say_why_it_is_empty():
    with pytest.raises(ValueError, match="label column"):
        merge_and_organize({"Value #A": "Size"}, ["Size"])
    steps = merge_and_organize({"Value #A": "Size"}, ["pool", "Size"])
    assert steps[1]["options"]["fields"] == {
        "pool": {"operation": "groupby"},
        "Value #A": {"aggregations": ["lastNotNull"], "operation": "aggregate"},
    }
    assert steps[2]["options"]["renameByName"] == {"Value #A (lastNotNull)": "Size"}
