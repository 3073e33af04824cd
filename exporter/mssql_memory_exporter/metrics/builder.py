"""The family builder every collector writes its series into, and the exceptions that fail a collector.

Collectors (collectors/), the host collector (host/) and the exporter's own series (app/) all build their
families here: the target's constant labels come first on every series, and a reading no server can give
(a negative counter, an infinite size) fails the collector that made it instead of reaching Prometheus.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from prometheus_client.core import Metric

from .declare import MetricSpec
from .families import MISSING, FamilyShape, TargetFamily, prefix_cache


class FamilyBuilder:
    """Collects series by metric name and returns one family per name.

    Every series gets the target's constant labels first, so collectors never have to remember them:
    each series is kept as its finished line prefix, from a cache per constant-label set (families.py).
    """

    def __init__(self, const_labels: Mapping[str, str]) -> None:
        self._cache = prefix_cache(dict(const_labels))
        self._families: dict[str, TargetFamily] = {}

    def emit(self, spec: MetricSpec, value: float, labels: Mapping[str, str] | None = None) -> None:
        """A series of a declared metric: its name, type and HELP come from the declaration."""
        self._put(spec.name, spec.help, spec.type, value, labels)

    def _put(self, name: str, doc: str, kind: str, value: float, labels: Mapping[str, str] | None) -> None:
        # Runs for every series of every probe: one dict lookup finds the family, one the line prefix.
        family = self._families.get(name)
        shape = self._cache.shape(name, doc, kind) if family is None else family.shape
        if not shape.low <= value < _INF or value == _NEG_INF:
            _impossible(shape, value)  # before the family is added: a failed reading leaves no trace
        if family is None:
            family = self._families[name] = TargetFamily(shape, self._cache.const)
        if not labels:
            family.entries.append((shape.bare, (), value))
            return
        # The key holds the label pairs as they are now: it is also what `series` rebuilds them from.
        key = (shape.sample_name, *labels.items())
        try:
            prefix = self._cache.lines.get(key, MISSING)
        except TypeError:  # an unhashable label value: generate_latest will say what is wrong with it
            prefix = None
        if prefix is MISSING:
            prefix = self._cache.make(key, shape.sample_name, dict(labels))
        family.entries.append((prefix, key, value))

    def gauge(self, name: str, doc: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        """No DMV reads as infinite or not a number (a huge KB count times 1024 can overflow to inf), and
        a `_bytes` gauge is never negative: either fails the collector (ImpossibleValue)."""
        self._put(name, doc, "gauge", value, labels)

    def counter(self, name: str, doc: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        """A counter below zero or not a number would make rate() invent writes or reads; no SQL Server
        reports one, so the reading is wrong and the collector must fail rather than pass it on. The
        family is named without _total; its samples carry it (as prometheus_client does)."""
        self._put(name, doc, "counter", value, labels)

    def families(self) -> list[Metric]:
        return list(self._families.values())

    def series_count(self) -> int:
        return sum(len(family.entries) for family in self._families.values())

    def child(self) -> FamilyBuilder:
        """An empty builder with the same constant labels, to be merged back only on success."""
        child = FamilyBuilder.__new__(FamilyBuilder)
        child._cache = self._cache
        child._families = {}
        return child

    def merge(self, other: FamilyBuilder) -> None:
        for name, family in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = family
            else:
                mine.entries.extend(family.entries)


_INF = math.inf
_NEG_INF = -math.inf


def _impossible(family: FamilyShape, value: float) -> None:
    if family.type == "counter":
        what = "counters are finite and never negative"
        raise ImpossibleValue(f"{family.sample_name} would be {value!r}: {what}")
    if value != value or value in (_INF, _NEG_INF):
        raise ImpossibleValue(f"{family.name} would be {value!r}: readings are finite numbers")
    raise ImpossibleValue(f"{family.name} would be {value!r}: a size in bytes is never negative")


class MissingData(Exception):
    """A collector's section answered, but without what every SQL Server reports: the collector fails
    (its success metric goes to 0) instead of exporting nothing while claiming success."""


class ImpossibleValue(MissingData):
    """A reading no SQL Server can give (a negative counter or size): the collector fails, naming it."""
