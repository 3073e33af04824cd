"""A small, typed builder for Grafana dashboard JSON for Grafana 12.4 and later.

Only what the three dashboards use: the core panel types (timeseries, stat, bar gauge, table, text;
rows to group them), Prometheus queries through a datasource template variable, thresholds, overrides,
links and annotations, in the JSON model of dashboard schema 42, the one Grafana 12.4 writes: tables
colour cells through `custom.cellOptions` and hide a column with `custom.hideFrom.viz` (schema 37's
`displayMode` and `custom.hidden`), and have no `footer` option; dashboards have no `style`.

No threshold lives here: callers pass every number, read from the spec.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

# The tables' transformations, where the modules have always imported them from.
from .tables import KEEP_VALUE as KEEP_VALUE
from .tables import kept_value as kept_value
from .tables import merge_and_organize as merge_and_organize

# The dashboard JSON schema Grafana 12.4 writes and migrates every older dashboard to: LATEST_VERSION in
# apps/dashboard/pkg/migration/schemaversion/migrations.go and DASHBOARD_SCHEMA_VERSION in
# public/app/features/dashboard/state/DashboardMigrator.ts of the 12.4.0 source (both 42), as in the
# dashboards it saves (devenv/dev-dashboards/panel-table/table_footer.json).
SCHEMA_VERSION = 42
GRID_COLUMNS = 24
DATASOURCE_VARIABLE = "datasource"
# Every panel, query, variable and annotation names the datasource through the template variable:
# no datasource uid of anyone's Grafana is written into the JSON.
DS: dict[str, str] = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
CORE_PANEL_TYPES = frozenset({"timeseries", "stat", "bargauge", "table", "text", "row"})

# No "gauge": 12.4's gauge draws with flot, which the Grafana build we render in lacks (every gauge came
# out blank there, with data or without, so nobody has seen one), and 12.4's own source marks that gauge
# deprecated, to be removed in 13.0. A bar gauge shows the same figure against the same thresholds in React.
PanelType = Literal["timeseries", "stat", "bargauge", "table"]
Json = dict[str, Any]

# Grafana's named palette colors, so the JSON reads the same in every theme.
GREEN, ORANGE, RED, BLUE, PURPLE = "green", "orange", "red", "blue", "purple"
# Grafana's own names: the theme's text colour (no verdict) and no paint at all.
TEXT, TRANSPARENT = "text", "transparent"


# --- thresholds -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    color: str
    value: float | None  # None: the base step (from minus infinity)


@dataclass(frozen=True)
class Thresholds:
    """Absolute thresholds. Grafana colors a value with the last step whose value it reaches."""

    steps: tuple[Step, ...]

    @classmethod
    def healthy_below(cls, limit: float, warn: float | None = None) -> Thresholds:
        """Desired range: under `limit` (red from there; orange from `warn` if given)."""
        steps = [Step(GREEN, None)]
        if warn is not None:
            steps.append(Step(ORANGE, warn))
        steps.append(Step(RED, limit))
        return cls(tuple(steps))

    @classmethod
    def healthy_above(cls, floor: float, warn: float | None = None) -> Thresholds:
        """Desired range: at or over `floor` (red under it; orange under `warn` if given)."""
        steps = [Step(RED, None), Step(GREEN if warn is None else ORANGE, floor)]
        if warn is not None:
            steps.append(Step(GREEN, warn))
        return cls(tuple(steps))

    @classmethod
    def neutral(cls) -> Thresholds:
        """No desired range: values in the text colour, since any colour reads as a verdict."""
        return cls((Step(TEXT, None),))

    def json(self, *, paint_healthy: bool = True) -> Json:
        """`paint_healthy=False` for time series: the healthy side stays unpainted and only the unhealthy
        side is shaded, so a limit never looks like a (green) series and a lower limit is not drawn in the
        colour of the first series."""
        steps = [
            {"color": TRANSPARENT if (s.color == GREEN and not paint_healthy) else s.color, "value": s.value}
            for s in self.steps
        ]
        return {"mode": "absolute", "steps": steps}


# --- queries and links ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One Prometheus query of a panel. `instant` queries return one value per series (stat, bar gauge and
    table panels); `table` asks for Grafana's table format, one column per label."""

    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False

    def json(self, ref_id: str) -> Json:
        return {
            "datasource": dict(DS),
            "editorMode": "code",
            "exemplar": False,
            "expr": self.expr,
            "format": "table" if self.table else "time_series",
            "instant": self.instant,
            "legendFormat": self.legend,
            "range": not self.instant,
            "refId": ref_id,
        }


@dataclass(frozen=True)
class Link:
    title: str
    url: str
    new_tab: bool = True

    def json(self) -> Json:
        return {"title": self.title, "url": self.url, "targetBlank": self.new_tab}


def dashboard_link(title: str, uid: str, tooltip: str) -> Json:
    """A link in the dashboard's header to another dashboard, carrying the time range and variables."""
    return {
        "asDropdown": False,
        "icon": "dashboard",
        "includeVars": True,
        "keepTime": True,
        "tags": [],
        "targetBlank": False,
        "title": title,
        "tooltip": tooltip,
        "type": "link",
        "url": f"/d/{uid}",
    }


def external_link(title: str, url: str, tooltip: str) -> Json:
    return {
        "asDropdown": False,
        "icon": "doc",
        "includeVars": False,
        "keepTime": False,
        "tags": [],
        "targetBlank": True,
        "title": title,
        "tooltip": tooltip,
        "type": "link",
        "url": url,
    }


# --- overrides ---------------------------------------------------------------------------------------


def override(name: str, *properties: tuple[str, Any], regex: bool = False) -> Json:
    """Field override by display name (or by a regex over display names). Grafana anchors a regex at both
    ends ("hit ratio$" matches only "hit ratio"): it must match a whole name (".* hit ratio")."""
    return {
        "matcher": {"id": "byRegexp" if regex else "byName", "options": name},
        "properties": [{"id": key, "value": value} for key, value in properties],
    }


def override_query(ref_id: str, *properties: tuple[str, Any]) -> Json:
    """Field override for the series of one query (its refId): two queries of one panel judged apart."""
    return {
        "matcher": {"id": "byFrameRefID", "options": ref_id},
        "properties": [{"id": key, "value": value} for key, value in properties],
    }


def cell_colour(background: bool) -> tuple[str, Json]:
    """A table column coloured by its thresholds: the whole cell (a verdict column) or only its text."""
    if background:
        return ("custom.cellOptions", {"type": "color-background", "mode": "basic"})
    return ("custom.cellOptions", {"type": "color-text"})


# A column kept in the frame (the links read it) but not shown.
HIDDEN_COLUMN: tuple[str, Any] = ("custom.hideFrom.viz", True)


def value_map(mapping: dict[int, tuple[str, str]]) -> list[Json]:
    """Value-to-text mappings: {value: (text, color)}."""
    options = {
        str(value): {"color": color, "index": i, "text": text}
        for i, (value, (text, color)) in enumerate(sorted(mapping.items()))
    }
    return [{"options": options, "type": "value"}]


# --- panels ------------------------------------------------------------------------------------------


@dataclass
class Panel:
    type: PanelType
    title: str
    description: str  # what it shows and what range is healthy
    unit: str
    queries: list[Query]
    width: int = 12
    height: int = 8
    thresholds: Thresholds | None = None
    min: float | None = None
    max: float | None = None
    decimals: int | None = None
    overrides: list[Json] = field(default_factory=list)
    mappings: list[Json] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    transformations: list[Json] = field(default_factory=list)
    options: Json = field(default_factory=dict)  # merged over the type's defaults
    custom: Json = field(default_factory=dict)  # fieldConfig.defaults.custom, merged over the defaults
    # What the panel says instead of "No data": why it is empty (a collector off, a platform without it,
    # a feature not configured, data too young, no event yet). Required: no panel is built without one.
    no_value: str = field(kw_only=True)
    time_from: str | None = None  # its own relative range ("8w"), whatever the dashboard's range

    def __post_init__(self) -> None:
        if self.type not in _DEFAULT_OPTIONS:
            raise ValueError(f"{self.title}: panel type {self.type!r} is not one the builder makes")
        if not self.no_value.strip() or self.no_value.strip().lower() == "no data":
            raise ValueError(f"{self.title}: no_value must say why the panel is empty, not {self.no_value!r}")
        if self.options.get("textMode") == "name":
            raise ValueError(f"{self.title}: a stat that shows only names never shows its no-data text")

    def json(self, panel_id: int, x: int, y: int) -> Json:
        if len(self.queries) > 26:
            raise ValueError(f"{self.title}: more queries than refIds A..Z")
        defaults: Json = {
            "color": {"mode": "palette-classic" if self.type == "timeseries" else "thresholds"},
            "custom": _deep_merge(_DEFAULT_CUSTOM.get(self.type, {}), self.custom),
            "mappings": copy.deepcopy(self.mappings),
            "thresholds": (self.thresholds or Thresholds.neutral()).json(
                paint_healthy=self.type != "timeseries"
            ),
            "unit": self.unit,
        }
        overrides = copy.deepcopy(self.overrides)
        if self.type == "timeseries":
            mode = "line+area" if self.thresholds is not None else "off"
            defaults["custom"]["thresholdsStyle"] = {"mode": mode}
            steps = self.thresholds.steps if self.thresholds else ()
            limits = [step.value for step in steps if step.value is not None]
            if limits and self.max is None and "axisSoftMax" not in self.custom:
                # The highest limit is always on the axis (a soft maximum: higher values still widen it).
                # Without it, a chart of zeros got an axis up to 100 (10000% for a ratio) painted red above
                # its limit.
                defaults["custom"]["axisSoftMax"] = max(limits)
            # Per-series ranges too: only the unhealthy side is painted.
            ranges = [p for o in overrides for p in o.get("properties", []) if p.get("id") == "thresholds"]
            for step in (step for prop in ranges for step in prop["value"]["steps"]):
                step["color"] = TRANSPARENT if step["color"] == GREEN else step["color"]
        # Shown by 12.4 in place of the panel when its queries return nothing: the timeseries and table
        # panels (PanelDataErrorView), the stat and the bar gauge (as the value's text).
        defaults["noValue"] = self.no_value
        if self.type == "table":
            # A table also prints noValue in every empty cell: the reason belongs to the empty table, an
            # empty cell stays empty.
            overrides.append(override(".*", ("noValue", ""), regex=True))
            # An empty cell of a coloured column (no value for this row) stays unpainted, not a solid green
            # block that reads as healthy.
            defaults["mappings"].append(
                {
                    "type": "special",
                    "options": {"match": "null+nan", "result": {"color": TRANSPARENT, "index": 99}},
                }
            )
        if self.type in ("stat", "bargauge"):
            # An empty panel says why in the text colour: without this Grafana paints the text in the
            # thresholds' base colour, a large red or green "No data" that reads as a verdict.
            defaults["mappings"].append(
                {"type": "special", "options": {"match": "null+nan", "result": {"color": TEXT, "index": 99}}}
            )
        for key, value in (("min", self.min), ("max", self.max), ("decimals", self.decimals)):
            if value is not None:
                defaults[key] = value
        panel: Json = {
            "datasource": dict(DS),
            "description": self.description,
            "fieldConfig": {"defaults": defaults, "overrides": overrides},
            "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "id": panel_id,
            "links": [link.json() for link in self.links],
            "options": _deep_merge(_DEFAULT_OPTIONS[self.type], self.options),
            "targets": [q.json(chr(ord("A") + i)) for i, q in enumerate(self.queries)],
            "title": self.title,
            "type": self.type,
        }
        if self.transformations:
            panel["transformations"] = copy.deepcopy(self.transformations)
        if self.time_from is not None:
            panel["timeFrom"] = self.time_from
        return panel


@dataclass(frozen=True)
class Row:
    """A row header. `collapsed`: its panels (up to the next row) are nested in it, hidden until a user
    opens it: a row whose series exist only where a site switched something on (the shipped collector
    files) takes one line of the dashboard where they do not."""

    title: str
    collapsed: bool = False


_REDUCE_LAST = {"calcs": ["lastNotNull"], "fields": "", "values": False}
_DEFAULT_OPTIONS: dict[str, Json] = {
    "timeseries": {
        "legend": {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    },
    "stat": {
        "colorMode": "value",
        "graphMode": "none",
        "justifyMode": "auto",
        "orientation": "auto",
        "reduceOptions": _REDUCE_LAST,
        "textMode": "auto",
    },
    # Bars of a fixed height (12.4's manual sizing): one bar, or none beside the no-data text, filled the
    # whole panel. Names above the bars, the panel's width: beside them "nvme0n1 Micron_7300..." was cut.
    "bargauge": {
        "displayMode": "gradient",
        "maxVizHeight": 40,
        "minVizHeight": 10,
        "minVizWidth": 0,
        "namePlacement": "top",
        "orientation": "horizontal",
        "reduceOptions": _REDUCE_LAST,
        "showUnfilled": True,
        "sizing": "manual",
    },
    "table": {"cellHeight": "sm", "showHeader": True},
}
_DEFAULT_CUSTOM: dict[str, Json] = {
    "timeseries": {
        "axisLabel": "",
        "axisPlacement": "auto",
        "drawStyle": "line",
        "fillOpacity": 10,
        "gradientMode": "none",
        "hideFrom": {"legend": False, "tooltip": False, "viz": False},
        "lineInterpolation": "linear",
        "lineWidth": 1,
        "pointSize": 5,
        "scaleDistribution": {"type": "linear"},
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "none"},
    },
    # A header wider than its column wraps: right-aligned headers were clipped on the left ("azy writes").
    # A column is at least 80 px, which fits the widest value of each numeric column: at Grafana's own
    # 150 px the fleet's 14 columns, the pool table's 12 and the 6 of "tempdb layout" (half the row) ran
    # past the right edge at 1,600 px, out of sight.
    "table": {
        "align": "auto",
        "minWidth": 80,
        "cellOptions": {"type": "auto"},
        "filterable": False,
        "inspect": False,
        "wrapHeaderText": True,
    },
}


def _deep_merge(base: Json, extra: Json) -> Json:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- variables and annotations -----------------------------------------------------------------------


def datasource_variable() -> Json:
    return {
        "current": {},
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": DATASOURCE_VARIABLE,
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
        "type": "datasource",
    }


def pin_datasource(node: Any, uid: str) -> Any:
    """`node` (a dashboard's JSON) with every reference to the Data source variable replaced by the
    Prometheus datasource `uid`: a site that names its datasource (alerts/thresholds.yml grafana.
    datasource_uid) needs no variable."""
    if node == DS:
        return {"type": DS["type"], "uid": uid}
    if isinstance(node, dict):
        return {key: pin_datasource(value, uid) for key, value in node.items()}
    if isinstance(node, list):
        return [pin_datasource(value, uid) for value in node]
    return node


def query_variable(
    name: str,
    label: str,
    query: str,
    description: str,
    multi: bool = False,
    all_value: str | None = None,
    regex: str = "",
    sort: int = 1,
) -> Json:
    """A variable filled from Prometheus with `label_values(...)` (or `query_result(...)` and a `regex`
    that picks the value out of each result line), refreshed when the time range changes. Multi-value
    variables offer "All", which matches with `all_value` (a regex) instead of a long list. `sort` 1 is
    alphabetical; 0 keeps the query's own order (the first option is the default)."""
    variable: Json = {
        "current": {},
        "datasource": dict(DS),
        "definition": query,
        "description": description,
        "hide": 0,
        "includeAll": multi,
        "label": label,
        "multi": multi,
        "name": name,
        "options": [],
        "query": query,
        "refresh": 2,
        "regex": regex,
        "skipUrlSync": False,
        "sort": sort,
        "type": "query",
    }
    if multi and all_value is not None:
        variable["allValue"] = all_value
    return variable


def builtin_annotation() -> Json:
    """Grafana's own annotations (added by hand or by Grafana alerting), as every new dashboard has."""
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def prometheus_annotation(
    name: str, expr: str, color: str, title: str, text: str, tags: str, value_is_time: bool = False
) -> Json:
    """An annotation from a Prometheus query: one mark (or region) where the query returns a series.
    With `value_is_time`, the series' value is the mark's time (Unix milliseconds), wherever it was seen:
    steps that return the same value make one mark ("Series value as timestamp" in Grafana)."""
    return {
        "datasource": dict(DS),
        "enable": True,
        "expr": expr,
        "hide": False,
        "iconColor": color,
        "name": name,
        "tagKeys": tags,
        "textFormat": text,
        "titleFormat": title,
        "useValueForTime": value_is_time,
    }


# --- the dashboard -----------------------------------------------------------------------------------


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    tags: list[str]
    items: list[Panel | Row]
    variables: list[Json]
    annotations: list[Json]
    links: list[Json]
    time_from: str = "now-6h"
    refresh: str = ""
    requires_grafana: str = "12.4.0"

    def json(self) -> Json:
        panels, types = self._layout()
        requires = [{"id": "grafana", "name": "Grafana", "type": "grafana", "version": self.requires_grafana}]
        requires.append({"id": "prometheus", "name": "Prometheus", "type": "datasource", "version": "1.0.0"})
        requires += [
            {"id": t, "name": t, "type": "panel", "version": ""} for t in sorted(types) if t != "row"
        ]
        return {
            "__requires": requires,
            "annotations": {"list": [builtin_annotation(), *copy.deepcopy(self.annotations)]},
            "description": self.description,
            "editable": False,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": copy.deepcopy(self.links),
            "liveNow": False,
            "panels": panels,
            "refresh": self.refresh,
            "schemaVersion": SCHEMA_VERSION,
            "tags": list(self.tags),
            "templating": {"list": copy.deepcopy(self.variables)},
            "time": {"from": self.time_from, "to": "now"},
            "timepicker": {},
            "timezone": "",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }

    def _layout(self) -> tuple[list[Json], set[str]]:
        """Left to right, wrapping at 24 columns; a row starts on a new line. Ids count from 1."""
        panels: list[Json] = []
        types: set[str] = set()
        x = y = line_height = 0
        into = panels  # where the next panel goes: the dashboard, or a collapsed row's own list
        for panel_id, item in enumerate(self.items, start=1):
            if isinstance(item, Row):
                if x:
                    y, x = y + line_height, 0
                row: Json = {
                    "collapsed": item.collapsed,
                    "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": y},
                    "id": panel_id,
                    "panels": [],
                    "title": item.title,
                    "type": "row",
                }
                panels.append(row)
                # A collapsed row carries its panels, laid out where they show once it is opened.
                into = row["panels"] if item.collapsed else panels
                types.add("row")
                y, line_height = y + 1, 0
                continue
            if not 0 < item.width <= GRID_COLUMNS:
                raise ValueError(f"{item.title}: width {item.width} outside 1..{GRID_COLUMNS}")
            if x + item.width > GRID_COLUMNS:
                y, x, line_height = y + line_height, 0, 0
            into.append(item.json(panel_id, x, y))
            types.add(item.type)
            x += item.width
            line_height = max(line_height, item.height)
        return panels, types
