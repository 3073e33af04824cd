"""What a collector declares about each metric it exports, once, on its record (CollectorRecord.metrics).

The docs' metric reference tables, the tests that check what a collector emits, and the names the rule
and dashboard generators use are all read from these declarations, so a metric's name, type, labels and
meaning are written in one place: its collector's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricType = Literal["gauge", "counter"]


@dataclass(frozen=True)
class Label:
    name: str
    meaning: str = ""  # what its values are, for the docs' Labels column


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric. `name` is the sample name (counters end in `_total`)."""

    name: str
    type: MetricType
    help: str  # the HELP line, as exported
    unit: str  # bytes, seconds, ratio 0..1, pages (8 KiB), 0/1, ...: for the docs
    source: str  # the DMV column, perf counter or computation it comes from
    question: str = ""  # what a reader learns from it
    labels: tuple[Label, ...] = ()
    # Empty when every stand-in scenario where the collector succeeds shows the metric; otherwise why it
    # may be absent (a feature that is off, a NULL column): the emitted-versus-declared test reads this.
    conditional: str = ""
    # The columns of its sections' answers it reads a count or a size from: never negative, so a negative
    # one (a wrapped counter, a mangled sign) is no reading. tests/test_fuzz.py sends each of them negative
    # and expects the collector to fail rather than export it. Empty for perf counters: their column is the
    # perf section's `cntr_value`, which that test takes from the perf objects among the record's `reads`.
    columns: tuple[str, ...] = ()

    @property
    def label_names(self) -> tuple[str, ...]:
        return tuple(label.name for label in self.labels)

    @property
    def family(self) -> str:
        """The family name Prometheus' client and the exposition use (counters without `_total`)."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name
