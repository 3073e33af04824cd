"""Capacity review pieces beside the capacity rules (alerts/capacity.py): memory changes marked on the
time series, and tempdb's writes against the buffer pool over weeks."""

from __future__ import annotations

from .grafana import PURPLE, Json, Panel, Query, Row, override, prometheus_annotation
from .limits import Limits, duration, pct
from .pools import enough_instance_data, shown_after
from .queries import m

# The panel's own range: what the bundle's smallest store keeps. compose's single Prometheus keeps 30 days
# (--storage.tsdb.retention.time=30d); tests/integration/test_scaling.py holds every panel's range to the
# store behind
# it, so a panel never asks for weeks its store has already deleted. Longer reviews read Thanos through
# the capacity report (docs/scaling.md).
REVIEW_RANGE = "4w"
REVIEW_RANGE_TEXT = "4 weeks"


def memory_change_annotation(lim: Limits) -> Json:
    """Marks where max server memory, physical memory or target memory changed: Micron's brief shows
    tempdb writes rising when memory is added, so the change belongs next to the write rate."""
    share = pct(lim.spec.tempdb.memory_change_target_share)
    return prometheus_annotation(
        "Memory changes",
        m(lim.rule("memory_sizing_change")),
        PURPLE,
        "{{memory}} changed",
        f"{{{{instance}}}}: {{{{memory}}}} changed within {lim.window} (max server memory or physical "
        f"memory: any change; target memory: more than {share}). Compare tempdb's writes before and after.",
        "instance,memory",
    )


def endurance_row_capacity(lim: Limits) -> list[Panel | Row]:
    """tempdb's writes against the buffer pool over weeks, with memory changes marked (Micron)."""
    long_w = lim.tempdb_long_window
    tempdb_legend = f"tempdb writes ({long_w} average)"
    pool_legend = f"buffer pool ({long_w} average)"
    return [
        Row("Capacity review: tempdb writes and memory"),
        Panel(
            "timeseries",
            f"tempdb writes against the buffer pool, last {REVIEW_RANGE_TEXT}",
            f"tempdb's write rate ({lim.rule('tempdb_long')}, left axis) and the buffer pool's size "
            f"(Database Cache Memory, {lim.rule('buffer_pool_long')}, right axis), both averaged over "
            f"{long_w}, for the last {REVIEW_RANGE_TEXT} whatever the dashboard's range (what a single "
            "Prometheus keeps; the capacity report reads years from Thanos). The purple marks are memory "
            "changes. Micron measured tempdb writes rising when SQL Server got more memory: after a mark, "
            "a higher write rate with a larger buffer pool is that effect, and it shortens the SSDs' life "
            "(see the pools below). No healthy range: compare before and after. Over 4 weeks Grafana "
            "plots a point every 15 minutes or more, so a Prometheus younger than that shows nothing here "
            "yet; the tempdb rows above cover the dashboard's own range. Both averages are drawn once they "
            f"rest on {duration(lim.endurance.projection_min_coverage_seconds)} of data.",
            "Bps",
            [
                Query(enough_instance_data(lim, m(lim.rule("tempdb_long"))), tempdb_legend),
                Query(enough_instance_data(lim, m(lim.rule("buffer_pool_long"))), pool_legend),
            ],
            width=24,
            min=0,
            overrides=[override(pool_legend, ("unit", "bytes"), ("custom.axisPlacement", "right"))],
            time_from=REVIEW_RANGE,
            no_value=shown_after(lim),
        ),
    ]
