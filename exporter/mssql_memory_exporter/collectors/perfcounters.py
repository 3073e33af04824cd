"""Rows of sys.dm_os_performance_counters: normalisation and the meaning of cntr_type.

Names are nchar(128), so they arrive padded with blanks; the object name carries the instance prefix
(`SQLServer:` on a default instance, `MSSQL$NAME:` on a named one). We match on the part after the
colon, stripped, so neither the prefix nor the padding can silently drop a row.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import NamedTuple


class CounterKind(enum.Enum):
    """How a counter's value is to be read, from the Windows performance counter type in cntr_type."""

    GAUGE = "gauge"  # PERF_COUNTER_LARGE_RAWCOUNT: the value as it is now
    CUMULATIVE = "counter"  # PERF_COUNTER_BULK_COUNT: "/sec" counters are totals since start
    FRACTION = "fraction"  # PERF_LARGE_RAW_FRACTION: value / its base row
    FRACTION_BASE = "fraction_base"  # PERF_LARGE_RAW_BASE: the denominator of a fraction
    AVERAGE = "average"  # PERF_AVERAGE_BULK: delta value / delta base, between two samples
    AVERAGE_BASE = "average_base"  # PERF_AVERAGE_BASE
    UNKNOWN = "unknown"


CNTR_TYPES: dict[int, CounterKind] = {
    65792: CounterKind.GAUGE,
    272696576: CounterKind.CUMULATIVE,
    537003264: CounterKind.FRACTION,
    1073939712: CounterKind.FRACTION_BASE,
    1073874176: CounterKind.AVERAGE,
    1073939458: CounterKind.AVERAGE_BASE,
}


def kind_of(cntr_type: int | None) -> CounterKind:
    if cntr_type is None:
        return CounterKind.UNKNOWN
    return CNTR_TYPES.get(int(cntr_type), CounterKind.UNKNOWN)


def object_suffix(object_name: str | None) -> str:
    """`MSSQL$SQL2019:Buffer Manager    ` -> `Buffer Manager`."""
    if not object_name:
        return ""
    suffix = _suffixes.get(object_name)
    if suffix is None:
        name = object_name.strip()
        _, colon, rest = name.partition(":")
        suffix = rest.strip() if colon else name
        if len(_suffixes) >= 256:  # a handful of objects per server; bounded whatever a server sends
            _suffixes.clear()
        _suffixes[object_name] = suffix
    return suffix


# Every row of an object repeats the same padded name, scrape after scrape.
_suffixes: dict[str, str] = {}


class PerfRow(NamedTuple):
    # A named tuple rather than a frozen dataclass: some 40 are made per scrape, at a third of the cost.
    object: str  # without instance prefix and padding
    counter: str  # stripped
    instance: str  # stripped; "" where SQL Server reports none
    value: int
    kind: CounterKind


def parse_perf_rows(rows: Iterable[Mapping[str, object]]) -> list[PerfRow]:
    """Normalise raw result rows; rows with a NULL value are dropped (SQL Server never sends them,
    but a value we cannot read must not become a zero)."""
    parsed: list[PerfRow] = []
    for row in rows:
        value = row.get("cntr_value")
        if value is None:
            continue
        counter = row.get("counter_name")
        instance = row.get("instance_name")
        parsed.append(
            PerfRow(
                object=object_suffix(_text(row.get("object_name"))),
                counter=(_text(counter) or "").strip(),
                instance=(_text(instance) or "").strip(),
                value=int(value),  # type: ignore[call-overload]
                kind=kind_of(row.get("cntr_type")),  # type: ignore[arg-type]
            )
        )
    return parsed


def parse_perf_table(columns: tuple[str, ...], raw: Iterable[tuple[object, ...]]) -> list[PerfRow]:
    """parse_perf_rows over the driver's tuples, without a dict per row: the section is read every scrape
    by four collectors (perf.py), and its rows are the larger part of a typical scrape's."""
    at = {name: i for i, name in enumerate(columns)}
    obj, counter, instance, value, kind = (
        at["object_name"], at["counter_name"], at["instance_name"], at["cntr_value"], at["cntr_type"]
    )
    parsed: list[PerfRow] = []
    for row in raw:
        number = row[value]
        if number is None:
            continue
        c, i, t = row[counter], row[instance], row[kind]
        parsed.append(
            PerfRow(
                object_suffix(None if row[obj] is None else str(row[obj])),
                "" if c is None else str(c).strip(),
                "" if i is None else str(i).strip(),
                int(number),  # type: ignore[call-overload]
                CNTR_TYPES.get(int(t), CounterKind.UNKNOWN) if t is not None else CounterKind.UNKNOWN,  # type: ignore[call-overload]
            )
        )
    return parsed


def _text(value: object) -> str | None:
    return None if value is None else str(value)


class PerfIndex:
    """Rows of one perf object, looked up by (counter, instance) ignoring case.

    SQL Server's own capitalisation has changed between versions ("Page lookups/sec" vs "Page Lookups/sec"
    in documentation), so lookups are case-insensitive.
    """

    def __init__(self, rows: Iterable[PerfRow]) -> None:
        self._rows: dict[tuple[str, str], PerfRow] = {}
        for row in rows:
            self._rows[(row.counter.casefold(), row.instance.casefold())] = row

    def get(self, counter: str, instance: str = "") -> PerfRow | None:
        return self._rows.get((counter.casefold(), instance.casefold()))

    def instances(self) -> list[str]:
        return sorted({row.instance for row in self._rows.values()})

    def ratio(self, counter: str, base: str, instance: str = "") -> float | None:
        """value/base of a fraction counter; None where the base is 0 (no lookups yet) or a row is missing."""
        num = self.get(counter, instance)
        den = self.get(base, instance)
        if num is None or den is None or den.value == 0:
            return None
        if num.kind is not CounterKind.FRACTION or den.kind is not CounterKind.FRACTION_BASE:
            return None
        return min(max(num.value / den.value, 0.0), 1.0)
