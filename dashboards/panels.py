"""Panel helpers and constants shared by the dashboards: a top-row stat, per-workload thresholds, the
stacking of reference lines, the threshold steps that are no spec number."""

from __future__ import annotations

from .grafana import Json, Link, Panel, Query, Thresholds, override

GAUGE_HEADROOM = 1.5  # the share gauge's scale ends this far past the exhaustion mark

# The only threshold steps that are not spec numbers (tests/unit/test_dashboards.py lists where each is used):
AT_FLOOR = 1  # a value divided by its own floor is healthy from 100%, whatever the floor is

ANY = 1  # a count of firing alerts or of minutes under pressure: one is already too many

UNIT_PAGES = "suffix: pages/s"

# A top-row stat: a quarter of the row. At an eighth (200 px at 1,600) Grafana 12.4's description and link
# icons left "Target...", "Grants..." of the titles.
NOW_WIDTH = 6

UNIT_STALLS = "suffix: stalls/s"  # not "reqps": Grafana would call free list stalls HTTP requests

# A reference line over a stacked panel (target, total, physical memory): not stacked and not filled, or
# its fill tints every area under it.
UNSTACKED = (
    ("custom.stacking", {"group": "A", "mode": "none"}),
    ("custom.fillOpacity", 0),
    ("custom.lineWidth", 2),
)
STACKED = {"stacking": {"group": "A", "mode": "normal"}, "fillOpacity": 60, "lineWidth": 1}


def per_workload(legend: str, thresholds: dict[str, Thresholds | None]) -> list[Json]:
    """Overrides giving each workload's series (legend containing "{{workload}} target") its own
    thresholds; None: no desired range for that workload, so none is drawn."""
    items = []
    for workload, limits in thresholds.items():
        name = legend.replace("{{workload}}", workload)
        if limits is None:
            props: list[tuple[str, object]] = [
                ("thresholds", Thresholds.neutral().json()),
                ("custom.thresholdsStyle", {"mode": "off"}),
            ]
        else:
            props = [("thresholds", limits.json())]
        items.append(override(name, *props))
    return items


def now_stat(
    title: str,
    description: str,
    unit: str,
    expr: str,
    thresholds: Thresholds | None = None,
    links: list[Link] | None = None,
    *,
    no_value: str,
) -> Panel:
    """One figure of a dashboard's top row: the latest value of `expr`, a quarter of the row wide."""
    return Panel(
        "stat",
        title,
        description,
        unit,
        [Query(expr, instant=True)],
        width=NOW_WIDTH,
        height=4,
        thresholds=thresholds,
        links=links or [],
        no_value=no_value,
    )
