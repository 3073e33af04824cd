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
from .families import SeriesFamily


class FamilyBuilder:
    """Collects series by metric name and returns one family per name.

    Every series gets the target's constant labels first, so collectors never have to remember them.
    """

    def __init__(self, const_labels: Mapping[str, str]) -> None:
        self._const = dict(const_labels)
        self._families: dict[str, SeriesFamily] = {}

    def emit(self, spec: MetricSpec, value: float, labels: Mapping[str, str] | None = None) -> None:
        """A series of a declared metric: its name, type and HELP come from the declaration."""
        if spec.type == "counter":
            self.counter(spec.name, spec.help, value, labels)
        else:
            self.gauge(spec.name, spec.help, value, labels)

    def gauge(self, name: str, doc: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        # No DMV reads as infinite or not a number (a huge KB count times 1024 can overflow to inf).
        if not -math.inf < value < math.inf:
            raise ImpossibleValue(f"{name} would be {value!r}: readings are finite numbers")
        if value < 0 and name.endswith("_bytes"):
            raise ImpossibleValue(f"{name} would be {value!r}: a size in bytes is never negative")
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = SeriesFamily(name, doc, "gauge")
        # Series without labels of their own share the constant labels' dict (nothing mutates it).
        family.series.append(({**self._const, **labels} if labels else self._const, value))

    def counter(self, name: str, doc: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        # A counter below zero or not a number would make rate() invent writes or reads; no SQL Server
        # reports one, so the reading is wrong and the collector must fail rather than pass it on.
        if not value >= 0 or value == math.inf:
            raise ImpossibleValue(f"{name} would be {value!r}: counters are finite and never negative")
        family = self._families.get(name)
        if family is None:
            # The family is named without _total; its samples carry it (as prometheus_client does).
            family = self._families[name] = SeriesFamily(name.removesuffix("_total"), doc, "counter")
        family.series.append(({**self._const, **labels} if labels else self._const, value))

    def families(self) -> list[Metric]:
        return list(self._families.values())

    def series_count(self) -> int:
        return sum(len(family.series) for family in self._families.values())

    def child(self) -> FamilyBuilder:
        """An empty builder with the same constant labels, to be merged back only on success."""
        child = FamilyBuilder.__new__(FamilyBuilder)
        child._const = self._const  # shared, never mutated: saves a copy per collector
        child._families = {}
        return child

    def merge(self, other: FamilyBuilder) -> None:
        for name, family in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = family
            else:
                mine.series.extend(family.series)


class MissingData(Exception):
    """A collector's section answered, but without what every SQL Server reports: the collector fails
    (its success metric goes to 0) instead of exporting nothing while claiming success."""


class ImpossibleValue(MissingData):
    """A reading no SQL Server can give (a negative counter or size): the collector fails, naming it."""
