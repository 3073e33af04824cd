"""A table's transformations: its queries merged into one row per label set, its columns named, ordered
and hidden, and the empty table made to say why it is empty (dashboards/grafana.py re-exports these)."""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]

# What the group-by step calls a value column it keeps: "Value #A" becomes "Value #A (lastNotNull)".
KEEP_VALUE = "lastNotNull"
_FRAME_COLUMNS = ("Time", "__name__")  # Grafana's time column and the metric name: never a row's key


def kept_value(column: str) -> str:
    return f"{column} ({KEEP_VALUE})"


def merge_and_organize(
    renames: dict[str, str], order: list[str], hide: tuple[str, ...] = _FRAME_COLUMNS
) -> list[Json]:
    """Table transformations: instant queries in table format joined on their shared labels (one row per
    label set), then columns renamed, ordered and hidden. `renames` maps Grafana's value columns
    ("Value #A", one per query) to their headers; `order` and `hide` name every label column the queries
    return (a label named in neither is dropped).

    Between the two, a group-by on the label columns that keeps each value column as it is (one row per
    label set already: the identity). It is there for the empty table: with no series, Grafana 12.4 still
    gives a multi-query table its "Value #A", "Value #B" columns, and a table with columns and no rows
    shows no text at all, not its no-data text. With no label column in the frame the group-by drops the
    frame, and the panel says why it is empty."""
    index = {name: i for i, name in enumerate(order)}
    # "Value #A"...: the value columns of several queries; "Value": the one of a single query.
    labels = [c for c in (*order, *hide) if c not in renames.values() and not c.startswith("Value")]
    keys = [c for c in dict.fromkeys(labels) if c not in _FRAME_COLUMNS]
    if not keys:
        raise ValueError(f"a table needs a label column to group its rows by: {order}")
    fields: Json = {name: {"operation": "groupby"} for name in keys}
    fields.update({column: {"aggregations": [KEEP_VALUE], "operation": "aggregate"} for column in renames})
    return [
        {"id": "merge", "options": {}},
        {"id": "groupBy", "options": {"fields": fields}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {name: True for name in hide},
                "indexByName": index,
                "renameByName": {kept_value(column): header for column, header in renames.items()},
            },
        },
    ]
