"""Grafana dashboards (dashboards/): generated, linted, and every query run against a real Prometheus.

- The committed JSON is exactly what `python -m dashboards.generate` makes from alerts/thresholds.yml.
- Structure checks in the spirit of Grafana's dashboard-linter: datasource variable used by every panel,
  query, variable and annotation (no datasource uid of anyone's Grafana); job and instance variables used
  by every selector; `$__rate_interval` in every rate() and raw counters only through rate(); a unit and
  a description (saying what is healthy) on every panel; unique uids and panel ids; core panel types only;
  the schema version of Grafana 12.4 (the floor) and none of the options it renamed.
- No threshold is written in dashboards/ (the spec is the one place), and each one follows the spec.
- Every query, with Grafana's variables substituted, is parsed by promtool and then executed against the
  real Prometheus of the end-to-end harness (tests/e2e_stack.py) while stand-ins play the panel's
  scenario: memory-pressure and numa-4-nodes for the memory dashboard (hbp-dax for its Hybrid Buffer Pool
  panel), micron-960gb-8stream with an SSD pool and the host collector for the endurance dashboard, all
  four for the fleet. A query returning no series would show "No data" there, and fails the test.
"""

from __future__ import annotations

import ast
import copy
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts.spec import Spec, number
from alerts.spec import load as load_spec
from dashboards import fleet, frame, generate, limits, queries
from dashboards.grafana import CORE_PANEL_TYPES, DS, GRID_COLUMNS, KEEP_VALUE, SCHEMA_VERSION, override
from dashboards.panels import ANY, AT_FLOOR
from dashboards.tempdb_governance import AT_LIMIT
from tests import tools
from tests.lint.dashboards import (
    ALL_QUERIES,
    BOARDS,
    PROMQL,
    alert_names,
    coverage_minimums,
    long_window_figures,
    panels,
    recorded_names,
    substitute,
    variable_promql,
)
from tests.lint.spec import moved_number, perturbed, spec_value

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
PROVISIONING = DASHBOARDS / "provisioning"
DOCS = ROOT / "docs" / "dashboards.md"
# The dashboard schema Grafana 12.4 writes: LATEST_VERSION in its
# apps/dashboard/pkg/migration/schemaversion/migrations.go (and what a dashboard saved by 12.4 carries).
FLOOR = "12.4.0"
FLOOR_SCHEMA = 42

JOB = "mssql"  # the rules' selector job="mssql", as the production job name
HOST_JOB = "mssql-exporter"  # the scrape of the exporter's /metrics (host collector), as in the docs
FOR, WINDOW = "5s", "20s"  # every `for:` and rate window of the generated rules
# Grafana's built-in variables as Grafana would set them for a short range over 1 s scrapes.
BUILTINS = {"__rate_interval": "20s", "__interval": "1s", "__interval_ms": "1000", "__range": "5m"}
RANGE_SECONDS = 120  # range queries (time series, annotations) cover the last two minutes
DEADLINE = 100.0  # seconds from the stand-ins' start until every scenario has shown what it must
TEMPDB_VOLUME = "/var/opt/mssql/tempdb"
POOL = "nvme-tempdb"
MB = 10**6
# The override every table has: its no-data text belongs to the empty table, not to each empty cell.
EMPTY_CELLS_STAY_EMPTY = override(".*", ("noValue", ""), regex=True)


# --- generated and committed -------------------------------------------------------------------------


def test_committed_dashboards_are_not_stale():
    files = generate.render(load_spec())
    for name, text in files.items():
        path = DASHBOARDS / name
        assert path.exists(), f"dashboards/{name} is missing: run `make generate` and commit the result"
        assert path.read_text() == text, (
            f"dashboards/{name} is stale: run `make generate` and commit the result"
        )
    stray = sorted(p.name for p in DASHBOARDS.glob("*.json") if p.name not in files)
    assert not stray, f"JSON in dashboards/ that the generator does not make (provisioned too): {stray}"


def test_check_mode_notices_a_stale_file(tmp_path):
    assert generate.main(["--out", str(tmp_path)]) == 0
    assert generate.main(["--out", str(tmp_path), "--check"]) == 0
    victim = tmp_path / generate.FILES[frame.MEMORY_UID]
    victim.write_text(victim.read_text().replace('"editable": false', '"editable": true'))
    assert generate.main(["--out", str(tmp_path), "--check"]) == 1


# --- structure lint ----------------------------------------------------------------------------------


def test_uids_are_stable_and_unique():
    assert list(BOARDS) == [frame.MEMORY_UID, frame.ENDURANCE_UID, frame.FLEET_UID]
    titles = [board["title"] for board in BOARDS.values()]
    assert len(set(titles)) == len(titles)
    for uid, board in BOARDS.items():
        assert board["uid"] == uid
        assert re.fullmatch(r"[a-z0-9-]{1,40}", uid), uid  # Grafana's uid limit is 40 characters


@pytest.mark.parametrize("uid", list(BOARDS))
def test_dashboard_settings_for_grafana_12_4(uid):
    board = BOARDS[uid]
    assert SCHEMA_VERSION == FLOOR_SCHEMA
    assert board["schemaVersion"] == FLOOR_SCHEMA, "the schema Grafana 12.4 writes: no migration on load"
    assert board["editable"] is False
    assert board["id"] is None, "an id would clash with the importing Grafana's own"
    grafana = [r for r in board["__requires"] if r["type"] == "grafana"]
    assert grafana == [{"id": "grafana", "name": "Grafana", "type": "grafana", "version": FLOOR}]
    assert generate.MIN_GRAFANA_VERSION == FLOOR
    assert board["description"] and "mssql" in board["tags"]


def _renamed_by_12_4(board: dict[str, Any]) -> Iterator[str]:
    """Options of schema 37 that Grafana 12.4 renames or drops when it loads a dashboard (schema
    migrations 38-42 and the table panel's migration handler): what a dashboard saved by 12.4 never has."""
    if "style" in board:
        yield "dashboard style (gone from the 12.x model)"
    if "time_options" in board.get("timepicker", {}):
        yield "timepicker.time_options (schema 41)"
    if not isinstance(board.get("refresh"), str):
        yield "a refresh that is not a string (schema 40)"
    for panel in panels(board):
        title = panel.get("title", "?")
        field_config = panel.get("fieldConfig", {"defaults": {}, "overrides": []})
        custom = field_config["defaults"].get("custom", {})
        if panel["type"] == "table":
            if "displayMode" in custom:
                yield f"{title}: custom.displayMode (schema 38: custom.cellOptions)"
            if "footer" in panel.get("options", {}):
                yield f"{title}: options.footer (12.x: custom.footer.reducers)"
        hide_from = custom.get("hideFrom", {})
        if hide_from.get("viz") and not hide_from.get("tooltip"):
            yield f"{title}: hideFrom.viz without tooltip (schema 42)"
        for item in field_config["overrides"]:
            for prop in item["properties"]:
                if prop["id"] in ("custom.displayMode", "custom.hidden"):
                    yield f"{title}: override {prop['id']} (custom.cellOptions / custom.hideFrom.viz)"
                if prop["id"] == "custom.hideFrom" and prop["value"].get("viz") and not prop["value"].get(
                    "tooltip"
                ):
                    yield f"{title}: override hideFrom.viz without tooltip (schema 42)"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_no_option_grafana_12_4_renamed(uid):
    assert list(_renamed_by_12_4(BOARDS[uid])) == []


def test_renamed_options_are_noticed():
    """The check above on a schema-37 table and dashboard (what this bundle wrote for Grafana 9.3)."""
    old = {
        "style": "dark",
        "refresh": False,
        "timepicker": {"time_options": ["5m"]},
        "panels": [
            {
                "type": "table",
                "title": "T",
                "options": {"footer": {"show": False}},
                "fieldConfig": {
                    "defaults": {"custom": {"displayMode": "auto"}},
                    "overrides": [
                        {"matcher": {}, "properties": [{"id": "custom.hidden", "value": True}]},
                        {"matcher": {}, "properties": [{"id": "custom.hideFrom", "value": {"viz": True}}]},
                    ],
                },
            }
        ],
    }
    assert len(list(_renamed_by_12_4(old))) == 7


@pytest.mark.parametrize("uid", list(BOARDS))
def test_variables(uid):
    variables = {v["name"]: v for v in BOARDS[uid]["templating"]["list"]}
    assert list(variables)[:3] == ["datasource", "job", "instance"]
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    for name, variable in variables.items():
        if variable["type"] == "query":
            assert variable["datasource"] == DS, f"variable {name} does not use the datasource variable"
            assert variable["description"], name
            variable_promql(variable["query"])
    assert variables["job"]["type"] == variables["instance"]["type"] == "query"
    assert "$job" in variables["instance"]["query"], "instances of the chosen job only"
    assert load_spec().selector in variables["job"]["query"], "jobs the recording rules cover"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_panels(uid):
    board = BOARDS[uid]
    ids = [p["id"] for p in panels(board)]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels(board):
        title = panel.get("title")
        assert panel["type"] in CORE_PANEL_TYPES, f"{title}: {panel['type']} is not a core panel type"
        assert title, f"panel {panel['id']} has no title"
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= GRID_COLUMNS, title
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{title} overlaps {cells[(x, y)]}"
                cells[(x, y)] = title
        if panel["type"] == "row":
            continue
        description = panel.get("description", "")
        assert len(description) >= 80, f"{title}: the description must say what it shows and what is healthy"
        assert re.search(r"(?i)healthy|desired range", description), (
            f"{title}: no healthy range in {description!r}"
        )
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title}: no unit"
        assert panel["datasource"] == DS, f"{title}: datasource {panel['datasource']} is not ${{datasource}}"
        assert panel["targets"], f"{title}: no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), f"{title}: duplicate refIds"
        for target in panel["targets"]:
            assert target["datasource"] == DS, f"{title}/{target['refId']}: datasource is not ${{datasource}}"
            if panel["type"] in ("stat", "bargauge", "table"):
                assert target["instant"], (
                    f"{title}/{target['refId']}: a single-value panel runs instant queries"
                )
            else:
                assert target["range"] and not target["instant"], f"{title}/{target['refId']}"


# --- what a DBA reads in Grafana 12.4 (issue 26 item 5) ----------------------------------------------

LONG_WINDOW_QUERIES = [q for q in ALL_QUERIES if long_window_figures(q.expr)]


def test_the_long_window_rules_are_recognised():
    assert {q.where for q in LONG_WINDOW_QUERIES} >= {
        "tempdb writes (1d average)",
        "tempdb writes per volume",
        "tempdb writes per instance (1d average)",
        "Pool write rate, 1d and 7d averages",
        "Instances",
    }
    # A rule used only for its labels (`rule * 0`) is no figure; a coverage rule is not one either.
    assert long_window_figures('pool:mssql_ssd_written_bytes:rate7d{pool="x"} * 0 + 1') == []
    assert long_window_figures("instance:mssql_tempdb_written_bytes:rate1d_coverage_seconds") == []


@pytest.mark.parametrize("q", LONG_WINDOW_QUERIES, ids=str)
def test_every_long_window_figure_waits_for_the_same_coverage(q):
    """One coverage rule: a 1d or 7d figure is shown once it rests on
    endurance.projection_min_coverage_seconds of data, in a stat, a table cell or a graph alike (a
    graph drew the 1d average from the first minutes while the stat beside it waited), and its panel
    says so in its no-data text or, where other series fill the panel, in its description."""
    seconds = load_spec().endurance.projection_min_coverage_seconds
    gates = coverage_minimums(q.expr)
    assert gates and set(gates) == {int(seconds)}, f"{q}: no coverage gate of {seconds} s in\n{q.expr}"
    assert q.panel is not None
    said = q.panel["fieldConfig"]["defaults"].get("noValue", "") + " " + q.panel["description"]
    assert f"{limits.duration(seconds)} of data" in " ".join(said.split()), q


# The screen the dashboards are looked at on (make dashboards-look): 1,600 px, less Grafana's margins; a
# table's cells sit inside the panel's padding. Grafana 12.4's default column minimum (TableNG COLUMN).
SCREEN_PX, PANEL_PADDING_PX, GRAFANA_MIN_COLUMN_PX = 1600 - 32, 24, 150


def _column_widths(panel: dict[str, Any]) -> tuple[list[str], dict[str, float], dict[str, float]]:
    """A table's shown columns, and the widths and minimum widths its overrides give them."""
    organize = panel["transformations"][-1]["options"]
    excluded = {name for name, on in organize["excludeByName"].items() if on}
    props = {
        o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
        for o in panel["fieldConfig"]["overrides"]
        if o["matcher"]["id"] == "byName"
    }
    shown = [
        name
        for name in organize["indexByName"]
        if name not in excluded and not props.get(name, {}).get("custom.hideFrom.viz")
    ]
    widths = {n: props[n]["custom.width"] for n in shown if "custom.width" in props.get(n, {})}
    minimum = panel["fieldConfig"]["defaults"]["custom"].get("minWidth", GRAFANA_MIN_COLUMN_PX)
    minimums = {n: props.get(n, {}).get("custom.minWidth", minimum) for n in shown}
    return shown, widths, minimums


@pytest.mark.parametrize("uid", list(BOARDS))
def test_every_table_fits_its_panel_at_1600_px(uid):
    """Grafana 12.4 gives a column its width, or else an equal share of what the widths leave, but never
    less than its minimum (computeColWidths in TableNG): minimums above that share push the last columns
    past the right edge, out of sight ("Uptime", "In service since", "System volume" were)."""
    for panel in panels(BOARDS[uid]):
        if panel["type"] != "table":
            continue
        shown, widths, minimums = _column_widths(panel)
        room = panel["gridPos"]["w"] / GRID_COLUMNS * SCREEN_PX - PANEL_PADDING_PX
        auto = [n for n in shown if n not in widths]
        share = (room - sum(widths.values())) / len(auto)
        needed = sum(widths.values()) + sum(max(minimums[n], share) for n in auto)
        title = panel["title"]
        assert needed <= room + 1, f"{title}: {len(shown)} columns need {needed:.0f} of {room:.0f} px"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_every_regex_override_matches_a_series_as_grafana_anchors_it(uid):
    """Grafana matches a byRegexp override against the whole display name (stringToJsRegex adds ^ and $
    to a pattern without slashes): "hit ratio$" matched no series of the plan cache panel, whose hit
    ratios were drawn on the bytes axis, flat at its bottom."""
    for panel in panels(BOARDS[uid]):
        legends = [t.get("legendFormat", "") for t in panel.get("targets", [])]
        names = [re.sub(r"\{\{\s*\w+\s*\}\}", "x", legend) for legend in legends]
        for item in panel.get("fieldConfig", {}).get("overrides", []):
            if item["matcher"]["id"] != "byRegexp" or panel["type"] == "table":
                continue
            pattern = item["matcher"]["options"]
            title = panel["title"]
            assert any(re.fullmatch(pattern, name) for name in names), f"{title}: {pattern!r} {names}"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_every_axis_says_its_unit(uid):
    """A time series axis of bare numbers ("Waits for memory and I/O": seconds of wait per second?) has a
    unit that prints one, or an axis label saying what it counts."""
    bare = []
    for panel in panels(BOARDS[uid]):
        if panel["type"] != "timeseries":
            continue
        defaults = panel["fieldConfig"]["defaults"]
        if defaults["unit"] in ("", "none", "short") and not defaults["custom"].get("axisLabel"):
            bare.append(panel["title"])
    assert bare == []


@pytest.mark.parametrize("uid", list(BOARDS))
def test_every_drawn_limit_stays_on_the_axis(uid):
    """A chart with a desired range keeps its highest limit on the axis (soft maximum): with every series
    at 0 Grafana otherwise chose an axis up to 100 (10000% for a ratio) and painted it red above the
    limit."""
    for panel in panels(BOARDS[uid]):
        defaults = panel.get("fieldConfig", {}).get("defaults", {})
        if panel["type"] != "timeseries" or defaults["custom"]["thresholdsStyle"]["mode"] == "off":
            continue
        highest = max(s["value"] for s in defaults["thresholds"]["steps"] if s["value"] is not None)
        top = defaults.get("max", defaults["custom"].get("axisSoftMax"))
        assert top is not None and top >= highest, (panel["title"], top, highest)


def _datasource_refs(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield f"{path}.{key}", value
            yield from _datasource_refs(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _datasource_refs(value, f"{path}[{i}]")


@pytest.mark.parametrize("uid", list(BOARDS))
def test_no_datasource_uid_is_hard_coded(uid):
    grafana_builtin = {"type": "grafana", "uid": "-- Grafana --"}
    for path, ref in _datasource_refs(BOARDS[uid]):
        assert ref == DS or (ref == grafana_builtin and "annotations" in path), f"{path}: {ref}"
    for annotation in BOARDS[uid]["annotations"]["list"]:
        assert annotation.get("builtIn") or annotation["datasource"] == DS, annotation["name"]


_METRIC = re.compile(r"\b(mssql_[a-z0-9_]+|[a-z_]+:[a-z0-9_]+:[a-z0-9_]+|ALERTS)\b(\{[^}]*\})?")
_RATE = re.compile(r"\b(rate|irate|increase)\(\s*([a-z_:][a-z0-9_:]*)(\{[^}]*\})?\s*\[([^\]]*)\]")


@pytest.mark.parametrize("q", PROMQL, ids=str)
def test_query_lint(q):
    spec = load_spec()
    expr = q.expr
    selectors = list(_METRIC.finditer(expr))
    assert selectors, f"{q}: no metric in {expr!r}"
    for match in selectors:
        metric, matchers = match.group(1), match.group(2) or ""
        if metric.startswith(("mssql_host_", "mssql_drive_")):
            # Host and drive metrics come from the exporter's own /metrics scrape, chosen by $host.
            assert 'instance=~"$host"' in matchers, f"{q}: {metric} without the host variable"
        else:
            assert 'job=~"$job"' in matchers and 'instance=~"$instance"' in matchers, (
                f"{q}: {metric}{matchers} is not limited to the chosen job and instance"
            )
        if ":" in metric:
            assert metric in recorded_names(spec), f"{q}: {metric} is not a recording rule of alerts/rules"
    for call in _RATE.finditer(expr):
        assert call.group(4) == "$__rate_interval", f"{q}: {call.group(0)} should use [$__rate_interval]"
    counters = len(re.findall(r"\bmssql_[a-z0-9_]+_total\b", expr))
    rated = sum(1 for c in _RATE.finditer(expr) if c.group(2).endswith("_total"))
    assert counters == rated, f"{q}: a cumulative counter is plotted raw (only rate() makes sense of it)"
    for alertname in re.findall(r'alertname="([^"]+)"', expr):
        assert alertname in alert_names(spec), f"{q}: no alert named {alertname}"


def _links(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for link in board["links"]:
        yield "dashboard header", link["url"]
    for panel in panels(board):
        for link in panel.get("links", []):
            yield panel["title"], link["url"]
        for item in panel.get("fieldConfig", {}).get("overrides", []):
            for prop in item["properties"]:
                if prop["id"] == "links":
                    for link in prop["value"]:
                        yield f"{panel['title']} (data link)", link["url"]


@pytest.mark.parametrize("uid", list(BOARDS))
def test_links_lead_to_runbooks_and_dashboards_that_exist(uid):
    spec = load_spec()
    base = spec.runbook_base_url.rstrip("/")
    runbooks = 0
    for where, url in _links(BOARDS[uid]):
        if url.startswith(base + "/"):
            name = url.removeprefix(base + "/").removesuffix(".md")
            assert url == spec.runbook(name) and name in alert_names(spec), f"{where}: {url}"
            assert (ROOT / "docs" / "runbooks" / f"{name}.md").exists(), f"{where}: no runbook {name}.md"
            runbooks += 1
        elif url.rstrip("/") == base:
            continue
        else:
            target = re.fullmatch(r"/d/([a-z0-9-]+)(\?.*)?", url)
            assert target and target.group(1) in BOARDS and target.group(1) != uid, f"{where}: {url}"
    assert runbooks, "no panel links to a runbook"
    others = {link["url"] for link in BOARDS[uid]["links"]}
    assert {f"/d/{u}" for u in BOARDS if u != uid} <= others, "the header links to the other dashboards"


@pytest.mark.parametrize("uid", list(BOARDS))
def test_table_columns_are_the_ones_the_overrides_name(uid):
    for panel in panels(BOARDS[uid]):
        if panel["type"] != "table":
            continue
        ids = [t["id"] for t in panel["transformations"]]
        assert ids == ["merge", "groupBy", "organize"], f"{panel['title']}: {ids}"
        organize = panel["transformations"][2]["options"]
        refs = {t["refId"] for t in panel["targets"]}
        # The group-by keeps each value column as "Value #A (lastNotNull)" (grafana.merge_and_organize).
        renamed = {
            kept.removesuffix(f" ({KEEP_VALUE})"): name for kept, name in organize["renameByName"].items()
        }
        hidden = {name for name, on in organize["excludeByName"].items() if on}
        for value_column in renamed:
            assert value_column.removeprefix("Value #") in refs, f"{panel['title']}: {value_column}"
        assert {f"Value #{r}" for r in refs} <= set(renamed) | hidden, f"{panel['title']}: unnamed column"
        columns = set(renamed.values()) | set(organize["indexByName"])
        for item in panel["fieldConfig"]["overrides"]:
            if item == EMPTY_CELLS_STAY_EMPTY:
                continue
            assert item["matcher"]["id"] == "byName"
            assert item["matcher"]["options"] in columns, f"{panel['title']}: no column {item['matcher']}"
        for sort in panel["options"].get("sortBy", []):
            assert sort["displayName"] in columns, f"{panel['title']}: sorted by a missing column"


# --- thresholds: one place ---------------------------------------------------------------------------


def _spec_numbers(node: Any) -> Iterator[float]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _spec_numbers(value)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield float(node)


def _distinctive(spec: Spec) -> set[float]:
    """Spec numbers that cannot be anything else in the source: all but small integers (layout, 0, 1)."""
    numbers = {v for v in _spec_numbers(spec.raw) if not (v.is_integer() and abs(v) < 25)}
    pages = spec.memory.free_memory_bytes.min / spec.memory.page_life_expectancy.page_bytes
    return numbers | {pages}  # Dell's 640 pages, derived


def _durations(spec: Spec) -> set[str]:
    """The spec's windows and `for` durations. Not its evaluation intervals (`rule_groups.
    long_window_interval`, `fleet.interval`): how often an evaluator runs a group is nothing a panel
    shows, and a dashboard's own refresh of "1m" is not the fleet group's interval."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not str(key).endswith("interval"):
                    walk(value)
        elif isinstance(node, str) and re.fullmatch(r"\d+(ms|s|m|h|d|w|y)", node):
            found.add(node)

    walk(spec.raw)
    return found


def spelled_thresholds(paths: list[Path], spec: Spec, allowed: dict[float, str] | None = None) -> list[str]:
    """Spec numbers and windows written as literals in Python sources. `allowed`: numbers that are unit
    or scale constants there (with the reason), not thresholds."""
    numbers = _distinctive(spec) - set(allowed or {})
    durations = _durations(spec)
    problems = []
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant):
                continue
            shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            where = f"{shown}:{node.lineno}"
            if isinstance(node.value, int | float) and not isinstance(node.value, bool):
                if float(node.value) in numbers:
                    problems.append(f"{where}: {node.value!r}")
            elif isinstance(node.value, str):
                # A percentage is a ratio: "95%" is the spec's 0.95, "100%" only the ratio 1.
                for token, percent in re.findall(r"(?<![\w.^])(\d+(?:\.\d+)?)(%?)(?![\w.])", node.value):
                    if float(token) / (100 if percent else 1) in numbers:
                        problems.append(f"{where}: {token + percent!r} in {node.value!r}")
                # Durations, except Grafana's default time ranges ("now-7d").
                for token in re.findall(r"(?<!now-)\b\d+(?:ms|s|m|h|d|w|y)\b", node.value):
                    if token in durations:
                        problems.append(f"{where}: window {token!r} in {node.value!r}")
                if re.search(r":(ratio_)?rate\d", node.value):
                    problems.append(f"{where}: a recording-rule name with its window in {node.value!r}")
    return problems


# Unit constants of the dashboards package that happen to equal a spec number (the coverage minimums).
DASHBOARDS_UNIT_CONSTANTS = {
    "limits.py": {86400: "seconds per day", 3600: "seconds per hour"},
    "panels.py": {
        1.5: "GAUGE_HEADROOM: the share gauge's scale past its exhaustion mark (drives.disagreement_factor)",
    },
}


def test_no_threshold_or_window_is_spelled_in_the_dashboards_source():
    problems = [
        problem
        for path in sorted(DASHBOARDS.glob("*.py"))
        for problem in spelled_thresholds([path], load_spec(), DASHBOARDS_UNIT_CONSTANTS.get(path.name))
    ]
    assert not problems, "take these from alerts/thresholds.yml (alerts.spec.load()):\n" + "\n".join(problems)


MAX_MODULE_LINES = 600  # the developers' guide: no dashboards module over 600 lines


def test_every_dashboards_module_stays_small():
    """One module per dashboard and per row area (docs/architecture.md): none grows back into one file."""
    sizes = {path.name: len(path.read_text().splitlines()) for path in DASHBOARDS.glob("*.py")}
    assert {"generate.py", "memory.py", "endurance.py", "fleet.py", "grafana.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_every_alerts_module_stays_small():
    """alerts/generate.py had grown to 609 lines (issue 34): the rules are split by area as the dashboards
    are, and no module of either passes the same size."""
    sizes = {path.name: len(path.read_text().splitlines()) for path in (ROOT / "alerts").glob("*.py")}
    assert {"generate.py", "endurance.py", "diagnosis.py", "tempdb.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


# Unit and scale constants of the alerts package that happen to equal a spec number, per file.
ALERTS_UNIT_CONSTANTS = {
    "generate.py": {100: "ratio to percent"},
    "endurance.py": {100: "ratio to percent", 86400: "seconds per day"},
    "diagnosis.py": {100: "ratio to percent"},
    "smartctl_exporter.py": {100: "smartctl_exporter's percentages to ratios"},
    "tempdb.py": {3600: "seconds per hour", 1000: "seconds to milliseconds"},
    "tempdb_governance.py": {100: "ratio to percent"},
    "thanos_ruler.py": {100: "ratio to percent"},
    "spec.py": {3600: "seconds per hour", 86400: "seconds per day", 604800: "seconds per week"},
}


def test_no_threshold_or_window_is_spelled_in_the_alerts_source():
    spec = load_spec()
    sources = sorted((ROOT / "alerts").glob("*.py"))
    assert ROOT / "alerts" / "generate.py" in sources
    problems = [
        problem
        for path in sources
        for problem in spelled_thresholds([path], spec, ALERTS_UNIT_CONSTANTS.get(path.name))
    ]
    assert not problems, "take these from alerts/thresholds.yml (alerts.spec.load()):\n" + "\n".join(problems)


def test_the_literal_scan_catches_spelled_figures(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('LIMIT = 5242880\nSCALE = 100\nTEXT = "floor: 640 pages, 95% for OLTP, over 5m"\n')
    problems = spelled_thresholds([bad], load_spec(), {100: "percent"})
    assert [p.split(": ", 1)[1] for p in problems] == [
        "5242880",
        "'640' in 'floor: 640 pages, 95% for OLTP, over 5m'",
        "'95%' in 'floor: 640 pages, 95% for OLTP, over 5m'",
        "window '5m' in 'floor: 640 pages, 95% for OLTP, over 5m'",
    ]


# Where each threshold shows: its value (grants pending: a count above `max` starts at max + 1).
THRESHOLDS = {
    "memory.page_life_expectancy.floor_seconds": 0,
    "memory.free_list_stalls_per_second.max": 0,
    "memory.lazy_writes_per_second.max": 0,
    "memory.page_lookups_per_batch_request.max": 0,
    "memory.page_io_per_second.max": 0,
    "memory.free_memory_bytes.min": 0,
    "memory.buffer_cache_hit_ratio.oltp": 0,
    "memory.buffer_cache_hit_ratio.olap": 0,
    "memory.memory_grants_pending.max": 1,
    "endurance.budget_high_share": 0,
    "endurance.exhaustion_share": 0,
    "endurance.remaining_warning_seconds": 0,
    "endurance.remaining_critical_seconds": 0,
}


def _threshold_values(boards: dict[str, dict[str, Any]]) -> set[float]:
    found: set[float] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("mode") == "absolute" and "steps" in node:
                found.update(float(s["value"]) for s in node["steps"] if s["value"] is not None)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(boards)
    return found


@pytest.mark.parametrize("path", list(THRESHOLDS))
def test_each_threshold_follows_the_spec(path):
    spec = load_spec()
    before = _threshold_values(generate.build(spec))
    raw = copy.deepcopy(spec.raw)
    node = raw
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    moved = moved_number(node[leaf])  # a value no other setting has
    node[leaf] = moved
    after = _threshold_values(generate.build(Spec.parse(raw)))
    drawn = moved + THRESHOLDS[path]
    assert drawn in after and drawn not in before, f"{path} = {moved} is not drawn as a threshold"


StepKey = tuple[str, int, str | None]


def threshold_steps(boards: dict[str, dict[str, Any]]) -> dict[StepKey, list[Any]]:
    """(dashboard uid, panel id, table column or series matcher or None) -> the values of its steps.
    Panels are known by id: a title may quote a spec number."""
    found: dict[StepKey, list[Any]] = {}
    for uid, board in boards.items():
        for panel in panels(board):
            config = panel.get("fieldConfig", {})
            if "thresholds" in config.get("defaults", {}):
                steps = config["defaults"]["thresholds"]["steps"]
                found[(uid, panel["id"], None)] = [step["value"] for step in steps]
            for item in config.get("overrides", []):
                for prop in item["properties"]:
                    if prop["id"] == "thresholds":
                        key = (uid, panel["id"], item["matcher"]["options"])
                        assert key not in found, f"two threshold overrides for {key}"
                        found[key] = [step["value"] for step in prop["value"]["steps"]]
    return found


TITLES = {(uid, panel["id"]): panel["title"] for uid, board in BOARDS.items() for panel in panels(board)}

# Threshold steps that are no spec number, by (panel title, column or series): dashboards/panels.py's
# named constants. A value divided by its own floor is healthy from 100% (AT_FLOOR), one divided by its
# own limit is at it at 100% (AT_LIMIT, dashboards/tempdb_governance.py), and of a count of
# firing alerts, of minutes under pressure or of pressure signals on, one is already too many (ANY).
CONSTANT_STEPS = {
    ("Signals of pressure from outside", None): ANY,
    ("Worst PLE ÷ floor", None): AT_FLOOR,
    ("Firing alerts", None): ANY,
    ("Firing alerts", "A"): ANY,  # its query of firing (or only pending) alerts
    ("Instances", "PLE ÷ floor"): AT_FLOOR,
    ("Instances", "Under pressure"): ANY,
    ("Lowest node PLE ÷ floor, per instance", None): AT_FLOOR,
    ("Layout faults", None): ANY,
    ("Share of tempdb limit used", None): AT_LIMIT,
}


def constant_step(key: StepKey) -> float | None:
    uid, panel_id, column = key
    return CONSTANT_STEPS.get((TITLES[(uid, panel_id)], column))


def unchanged_steps(before: dict[StepKey, list[Any]], after: dict[StepKey, list[Any]]) -> list[str]:
    problems = []
    for key, steps in before.items():
        where = f"{key[0]} / {TITLES[key[:2]]!r}" + (f" / {key[2]!r}" if key[2] else "")
        if after.get(key) is None or len(after[key]) != len(steps):
            problems.append(f"{where}: steps {steps} became {after.get(key)}")
            continue
        for old, new in zip(steps, after[key], strict=True):
            if old is not None and old == new and old != constant_step(key):
                problems.append(f"{where}: step {old} does not follow the spec")
    return problems


def test_every_threshold_step_moves_with_the_spec():
    """Literal scans cannot tell a hard-coded 20, 2, 0 or 1.0 from layout numbers: move every number of
    the spec at once, and every step of every panel must move with it, save the named constants."""
    spec = load_spec()
    before = threshold_steps(generate.build(spec))
    after = threshold_steps(generate.build(Spec.parse(perturbed(spec.raw))))
    assert sum(len(steps) for steps in before.values()) > 40
    assert unchanged_steps(before, after) == []
    used = {(TITLES[key[:2]], key[2]) for key, steps in before.items() if constant_step(key) in steps[1:]}
    assert used == set(CONSTANT_STEPS), "a listed constant step no longer exists"


def test_the_perturbation_check_sees_a_hard_coded_step():
    spec = load_spec()
    before = threshold_steps(generate.build(spec))
    after = threshold_steps(generate.build(Spec.parse(perturbed(spec.raw))))
    key = next(k for k in after if TITLES[k[:2]] == "Free list stalls")
    spelled = before[key][1]
    after[key] = [None, spelled]  # a panel that spelled the spec's 2 instead of reading it
    expected = [f"mssql-memory-pressure / 'Free list stalls': step {spelled} does not follow the spec"]
    assert unchanged_steps(before, after) == expected
    # A constant may stay put, but only where it is listed.
    constant = next(k for k in before if TITLES[k[:2]] == "Firing alerts")
    assert before[constant] == after[constant] == [None, ANY]
    lazy = next(k for k in after if TITLES[k[:2]] == "Lazy writes" and k[2] is None)
    after[lazy] = [None, ANY]
    before[lazy] = [None, ANY]
    assert len(unchanged_steps(before, after)) == 2


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def test_recording_rule_names_follow_the_spec_windows():
    spec = load_spec()
    raw = copy.deepcopy(spec.raw)
    raw["rate_window"] = "10m"
    raw["tempdb"]["long_rate_window"] = "2d"
    raw["endurance"]["projection_rate_window"] = "14d"
    moved = Spec.parse(raw)
    # The strings themselves, not their JSON escapes: "(\\ninstance:..." must not read as "ninstance:...".
    text = "\n".join(_strings(generate.build(moved)))
    used = set(re.findall(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", text))
    assert used <= recorded_names(moved), sorted(used - recorded_names(moved))
    assert "rate10m" in text and "rate2d" in text and "rate14d" in text


# --- versions, provisioning, docs --------------------------------------------------------------------


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_grafana_version_file():
    text = generate.GRAFANA_VERSION_FILE.read_text()
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", text), f"one version per line, like 13.2.0: {text!r}"
    assert _version(text.strip()) >= _version(generate.MIN_GRAFANA_VERSION)


def test_provisioning_files():
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert datasources["apiVersion"] == 1
    (prometheus,) = datasources["datasources"]
    assert prometheus["type"] == "prometheus" and prometheus["url"].startswith("http")
    assert prometheus["jsonData"]["timeInterval"], "$__rate_interval needs the scrape interval"
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "mssql.yml").read_text())
    assert providers["apiVersion"] == 1
    (provider,) = providers["providers"]
    assert provider["type"] == "file" and provider["allowUiUpdates"] is False
    assert provider["options"]["path"].startswith("/")
    docs = DOCS.read_text()
    assert provider["options"]["path"] in docs, "docs/dashboards.md says where the JSON files go"


_UNIT_WORDS = {"m": "minute", "h": "hour", "d": "day", "w": "week"}


def _as_adjective(window: str) -> str:
    """ "5m" -> "5-minute", as in "the 5-minute average"."""
    match = re.fullmatch(r"(\d+)([mhdw])", window)
    assert match, window
    return f"{match.group(1)}-{_UNIT_WORDS[match.group(2)]}"


def _as_words(window: str) -> str:
    """ "7d" -> "7 days", "1d" -> "1 day"."""
    match = re.fullmatch(r"(\d+)([mhdw])", window)
    assert match, window
    count = int(match.group(1))
    return f"{count} {_UNIT_WORDS[match.group(2)]}{'' if count == 1 else 's'}"


def doc_figures(spec: Spec) -> list[str]:
    """The phrases of docs/dashboards.md that quote the spec, rebuilt from the spec."""
    lim = limits.Limits.from_spec(spec)
    num, pct = number, limits.pct
    rate_window = _as_adjective(spec.rate_window)
    mem, ple, end = spec.memory, spec.memory.page_life_expectancy, spec.endurance
    hit = mem.buffer_cache_hit_ratio
    return [
        f"free memory (against the {num(lim.free_pages)}-page = "
        f"{num(mem.free_memory_bytes.min / 2**20)} MiB floor)",
        f"buffer cache hit ratio ({pct(hit.oltp)} OLTP, {pct(hit.olap)} OLAP)",
        f"the recording rule the alert reads (the {rate_window} average)",
        f"{num(ple.seconds_per_buffer_pool_bytes)} s per {lim.step_gib} of the node's buffer pool, at least "
        f"{num(ple.floor_seconds)} s",
        f"tempdb write rate ({_as_adjective(lim.tempdb_short_window)} and "
        f"{_as_adjective(lim.tempdb_long_window)} averages)",
        f"each pool's write rate over {_as_words(lim.pool_short_window)} and "
        f"{_as_words(lim.pool_long_window)}",
        f"orange from {pct(end.budget_high_share)} (budget) and red from {pct(end.exhaustion_share)} "
        "(worn out",
        f"(orange under {limits.duration(end.remaining_warning_seconds)}, red under "
        f"{limits.duration(end.remaining_critical_seconds)})",
        f"lazy writes, free list stalls and lookups per batch ({rate_window} averages)",
        f"tempdb write rate ({_as_adjective(lim.tempdb_long_window)} average)",
        f"(`{spec.selector}` in `alerts/thresholds.yml`)",
    ]


def test_docs_quote_the_shipped_spec():
    docs = " ".join(DOCS.read_text().split())
    missing = [phrase for phrase in doc_figures(load_spec()) if phrase not in docs]
    assert not missing, "docs/dashboards.md no longer quotes the spec; update it:\n" + "\n".join(missing)
    # Each phrase depends on the spec: moved numbers and windows make every one of them stale.
    raw = perturbed(load_spec().raw)
    raw.update(rate_window="10m", selector='job=~"sql"')
    raw["tempdb"].update(short_rate_window="2m", long_rate_window="2d")
    raw["endurance"].update(short_rate_window="2d", projection_rate_window="14d")
    moved = doc_figures(Spec.parse(raw))
    assert [phrase for phrase in moved if phrase in docs] == []


def test_docs_name_the_versions_and_every_dashboard():
    docs = DOCS.read_text()
    assert generate.GRAFANA_VERSION_FILE.read_text().strip() in docs
    assert f"Grafana {FLOOR}" in docs and f"schema version {FLOOR_SCHEMA}" in docs
    for uid, board in BOARDS.items():
        assert board["title"] in docs and uid in docs, uid


# --- per-workload colours ---------------------------------------------------------------------------


def _panel(uid: str, title: str) -> dict[str, Any]:
    [panel] = [p for p in panels(BOARDS[uid]) if p["title"] == title]
    return panel


def _series_thresholds(panel: dict[str, Any], display_name: str) -> tuple[list[Any], str]:
    """The steps and threshold style Grafana uses for one series of a panel: the defaults, then the
    overrides whose name matches the series' display name."""
    defaults = panel["fieldConfig"]["defaults"]
    steps = [s["value"] for s in defaults["thresholds"]["steps"]]
    style = defaults.get("custom", {}).get("thresholdsStyle", {}).get("mode", "off")
    for item in panel["fieldConfig"]["overrides"]:
        matcher = item["matcher"]
        hit = (
            re.fullmatch(matcher["options"], display_name)
            if matcher["id"] == "byRegexp"
            else matcher["options"] == display_name
        )
        if hit:
            for prop in item["properties"]:
                if prop["id"] == "thresholds":
                    steps = [s["value"] for s in prop["value"]["steps"]]
                elif prop["id"] == "custom.thresholdsStyle":
                    style = prop["value"]["mode"]
    return steps, style


@pytest.mark.parametrize(
    ("title", "oltp", "olap"),
    [
        (
            "Buffer cache hit ratio",
            "memory.buffer_cache_hit_ratio.oltp",
            "memory.buffer_cache_hit_ratio.olap",
        ),
        ("Page lookups per batch request", "memory.page_lookups_per_batch_request.max", None),
        (
            f"Lookups/batch ({load_spec().rate_window})",
            "memory.page_lookups_per_batch_request.max",
            None,
        ),
    ],
)
def test_each_workload_is_coloured_by_its_own_range(title, oltp, olap):
    """An OLTP target is judged by the OLTP figure, an OLAP one by the OLAP figure, or by none where Dell
    and the alert give none (lookups per batch is an OLTP rule)."""
    spec = load_spec()
    panel = _panel(frame.MEMORY_UID, title)
    for target in panel["targets"]:
        assert "group_left (workload)" in target["expr"] and "{{workload}}" in target["legendFormat"], title
        for workload, key in (("oltp", oltp), ("olap", olap)):
            steps, style = _series_thresholds(panel, target["legendFormat"].replace("{{workload}}", workload))
            drawn = [value for value in steps if value is not None]
            if key is None:
                assert drawn == [] and (style == "off" or panel["type"] == "stat"), (title, workload, steps)
            else:
                assert drawn == [spec_value(spec, key)], (title, workload, steps)


def test_the_fleet_judges_lookups_per_batch_of_oltp_targets_only():
    table = _panel(frame.FLEET_UID, "Instances")
    [target] = [t for t in table["targets"] if "lookups_per_batch" in t["expr"]]
    selector = load_spec().selector
    oltp = f'mssql_target_info{{{selector}, job=~"$job", instance=~"$instance", workload="oltp"}}'
    assert oltp in target["expr"]


# --- the host variable -------------------------------------------------------------------------------


def test_the_host_variable_starts_at_none_since_nothing_ties_it_to_the_instance():
    variables = {v["name"]: v for v in BOARDS[frame.ENDURANCE_UID]["templating"]["list"]}
    host = variables["host"]
    expr, label = variable_promql(host["query"])
    assert label == "instance" and f'"{queries.NO_HOST}"' in expr
    assert host["sort"] == 1 and not host["multi"] and not host["includeAll"]
    assert (
        re.search(host["regex"].strip("/"), f'{{instance="{queries.NO_HOST}"}}').group(1) == queries.NO_HOST
    )
    # Grafana selects the first option when none is chosen: alphabetically, NO_HOST comes before any
    # exporter address (host:port, a name or a number) ...
    addresses = ["0.0.0.0:9399", "10.1.2.3:9399", "AAA:1", "db-host.example:9399", "[::1]:9399"]
    assert sorted([*addresses, queries.NO_HOST])[0] == queries.NO_HOST
    # ... and, as the panel's regex matcher (anchored, as Prometheus anchors it), matches none of them.
    assert not any(re.fullmatch(queries.NO_HOST, address) for address in addresses)
    panel = _panel(frame.ENDURANCE_UID, "Host disk writes")
    assert 'instance=~"$host"' in panel["targets"][0]["expr"]
    assert (
        "not tied to the chosen instance" in panel["description"] and queries.NO_HOST in panel["description"]
    )


def test_the_fleet_says_where_to_find_the_worst_pool():
    instances = _panel(frame.FLEET_UID, "Instances")
    pools = _panel(frame.FLEET_UID, fleet.FLEET_POOLS_TITLE)
    assert "Worst pool share" in instances["transformations"][-1]["options"]["renameByName"].values()
    assert repr(fleet.FLEET_POOLS_TITLE) in instances["description"]
    columns = pools["transformations"][-1]["options"]["indexByName"]
    assert {"instance", "pool", "Share of rating"} <= set(columns)
    assert pools["options"]["sortBy"] == [{"desc": True, "displayName": "Share of rating"}]


# --- the restart annotation --------------------------------------------------------------------------


def value_time_marks(points: list[tuple[float, float]], step_ms: float) -> list[tuple[float, float]]:
    """What Grafana draws for a Prometheus annotation with "Series value as timestamp", for one series
    of (step time, value) points: each value is a time in ms, and times no more than a step apart join
    into one mark (a region when they differ). Returned as (start, end) pairs."""
    marks: list[list[float]] = []
    for _, value in points:
        if marks and marks[-1][1] + step_ms >= value >= marks[-1][0] - step_ms:
            marks[-1] = [min(marks[-1][0], value), max(marks[-1][1], value)]
        else:
            marks.append([value, value])
    return [(start, end) for start, end in marks]


def restart_annotation() -> dict[str, Any]:
    [annotation] = [
        a for a in BOARDS[frame.MEMORY_UID]["annotations"]["list"] if a["name"] == "SQL Server restarts"
    ]
    return annotation


def test_the_restart_mark_model_merges_steps_and_separates_starts():
    day = 86_400_000.0
    steps = [(t, -day) for t in range(0, 600, 15)] + [(t, 900_000.0) for t in range(1200, 1800, 15)]
    assert value_time_marks(steps, 15_000) == [(-day, -day), (900_000.0, 900_000.0)]
    # A start time read a second apart (clock jitter) is one mark, not two.
    assert value_time_marks([(0, 5000.0), (15, 6000.0), (30, 5000.0)], 15_000) == [(5000.0, 6000.0)]


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_the_restart_mark_lands_at_the_real_start_after_a_long_scrape_gap(tmp_path, promtool):
    """A restart at 900 s inside a ten-minute scrape gap (615 to 1185 s), far longer than any
    $__rate_interval: the mark must still land at 900 s, once. A changes() over a window sees nothing.
    Under Prometheus 2.42 and 3.13.3 (the release compose pins): their lookback and range windows differ
    at the edges."""
    tools.check_binary(promtool)
    annotation = restart_annotation()
    assert annotation["useValueForTime"] is True
    assert "changes(" not in annotation["expr"]
    expr = substitute(annotation["expr"], {**PLACEHOLDERS, "job": "mssql", "instance": "db"})
    labels = '{job="mssql",instance="db"}'
    before, after, restart = -86400, 900, 900  # start times (s): up a day, then restarted at 900 s

    def at(eval_s: int, value_ms: float | None) -> dict[str, Any]:
        samples = [] if value_ms is None else [{"labels": labels, "value": value_ms}]
        return {"expr": expr, "eval_time": f"{eval_s}s", "exp_samples": samples}

    cases = [at(0, before * 1000), at(600, before * 1000), at(1000, None)]  # 1000 s: inside the gap
    cases += [at(t, after * 1000) for t in (1200, 1215, 1500, 1800)]
    # The old form of the annotation, for contrast: the first scrape after the gap shows no change.
    cases.append(
        {
            "expr": f"changes(mssql_start_time_seconds{labels}[75s]) > 0",
            "eval_time": "1200s",
            "exp_samples": [],
        }
    )
    test_file = tmp_path / "restart-gap.test.yml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": [],
                "evaluation_interval": "15s",
                "tests": [
                    {
                        "interval": "15s",
                        "input_series": [
                            {
                                "series": f"mssql_start_time_seconds{labels}",
                                "values": f"{before}x40 _x39 {after}x40",
                            }
                        ],
                        "promql_expr_test": cases,
                    }
                ],
            }
        )
    )
    result = subprocess.run(
        [promtool.path, "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    # What Grafana makes of every 15 s step of that half hour: Prometheus answers each step with the
    # latest sample of the last 5 minutes (its lookback), Grafana turns the values into marks.
    samples = {s: before if s <= 600 else after for s in range(0, 1801, 15) if not 600 < s < 1200}

    def answer(t: int) -> float | None:
        last = max(s for s in samples if s <= t)
        return samples[last] * 1000 if t - last <= 300 else None

    points = [(t, value) for t in range(0, 1801, 15) if (value := answer(t)) is not None]
    assert len(points) < 121, "the gap must leave steps without a value"
    marks = value_time_marks(points, 15_000)
    assert marks == [(before * 1000, before * 1000), (restart * 1000, restart * 1000)]


# --- PromQL: parsed by promtool ----------------------------------------------------------------------

PLACEHOLDERS = {"job": JOB, "instance": "pressure", "pool": ".+", "host": "127.0.0.1:9399", **BUILTINS}

needs_prometheus = tools.needs(tools.PROMETHEUS, tools.ALERTMANAGER, tools.PROMTOOL)


@pytest.mark.parametrize("promtool", tools.promtool_versions(), ids=str)
def test_promtool_parses_every_query(tmp_path, promtool):
    # Grafana sends the queries to whichever Prometheus the user runs: 2.42 (Debian) or 3.13.3 (compose).
    tools.check_binary(promtool)
    rules = []
    for i, q in enumerate(ALL_QUERIES):
        expr = substitute(q.expr, PLACEHOLDERS)
        if q.kind == "variable":
            expr = variable_promql(expr)[0]
        rules.append({"record": f"dashboard_query_{i}", "expr": expr})
    path = tmp_path / "dashboards.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}, sort_keys=False))
    result = subprocess.run(
        [promtool.path, "check", "rules", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("q", ALL_QUERIES, ids=str)
def test_queries_use_only_their_dashboards_variables(q):
    # The end-to-end run substitutes every variable for every dashboard, so a query that names a variable
    # its own dashboard lacks passed there while Grafana left "$pool" in the PromQL and found nothing (the
    # fleet's per-pool bargauge, seen rendered).
    defined = {v["name"] for v in BOARDS[q.board]["templating"]["list"]}
    undefined = {
        n for n in re.findall(r"\$\{?([A-Za-z_]\w*)", q.expr) if n not in defined and not n.startswith("__")
    }
    assert not undefined, f"{q}: uses {sorted(undefined)}, which the dashboard does not define"
