"""What every collector module shares: the SQL section it reads, the rows it gets, the families it makes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from ..metrics.families import MISSING, FamilyShape, TargetFamily, prefix_cache
from .declare import MetricSpec
from .view import NO_TARGET, HostView, TargetView

if TYPE_CHECKING:  # perf builds on this module
    from .perf import PerfObject

Row = Mapping[str, object]
# SQL Server reports sizes in KB (KiB): every *_kb column and (KB) counter times this is bytes.
KIB = 1024.0

# Keys a collector may set in its target's memo to steer the next batch.
FORCE_SLOW = "force_slow"  # True: send the slow sections with the next scrape
EXTRA_SECTIONS = "extra_slow_sections"  # Sections to add to the next slow refresh


def sql_literal(text: str) -> str:
    """An nvarchar literal for T-SQL: the only quoting the batch needs (names and SQL are ours)."""
    return "N'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Section:
    """One SELECT of the scrape batch. Its first column must be `N'<tag>' AS section` so the result set
    can be routed without relying on its position; `requires` are the objects checked with OBJECT_ID
    first, so a server that lacks them answers with a tagged error row instead of aborting the batch."""

    tag: str
    sql: str
    requires: tuple[str, ...] = ()
    # Columns that arrived after their view (object, column): checked with COL_LENGTH next to the
    # OBJECT_ID checks, so an older server answers "unavailable" instead of Msg 207 (invalid column).
    requires_columns: tuple[tuple[str, str], ...] = ()
    # An empty answer cannot carry its tag, so by default it counts as a failure; sections where
    # "no rows" is a true answer (e.g. no database has a feature on) say so here.
    may_be_empty: bool = False
    # Objects that only newer versions have: their absence is an answer ("not on this server"), not
    # a failure, so the collector still succeeds (and, say, reports the feature as not configured).
    optional: bool = False
    # Slow sections (file names, volume lookups) are sent only every `volume_refresh_seconds`; their
    # collectors keep what they learnt between refreshes.
    slow: bool = False


@dataclass(frozen=True)
class SectionError:
    number: int
    message: str


class SectionResult:
    """The rows one section sent, kept as the driver's tuples: a 10,000-file section costs a dict per row
    only if a collector asks for `rows`; hot paths read `raw` through `index`."""

    def __init__(
        self,
        rows: list[Row] | None = None,
        error: SectionError | None = None,
        unavailable: bool = False,
        columns: tuple[str, ...] = (),
    ) -> None:
        self.error = error
        self.unavailable = unavailable  # an optional section whose objects this server lacks
        self.columns = columns
        self.raw: list[tuple[object, ...]] = []
        self._rows = rows
        self.parsed: dict[str, object] = {}  # per-scrape memo for collectors that share a parse

    @property
    def rows(self) -> list[Row]:
        if self._rows is None:
            self._rows = [dict(zip(self.columns, r, strict=True)) for r in self.raw]
        return self._rows

    def has_rows(self) -> bool:
        return bool(self._rows) or bool(self.raw)

    def clear(self) -> None:
        self.raw = []
        self._rows = []

    def index(self, column: str) -> int:
        return self.columns.index(column)


@dataclass
class ScrapeContext:
    """Per-target facts a collector may need beyond its rows."""

    now: float  # unix time of the scrape, from the exporter's clock
    workload: str
    memo: dict[str, object]  # survives between scrapes of the same target
    target: TargetView = NO_TARGET  # the target's config, seen through what collectors read
    host: HostView | None = None  # the exporter's host when it is the target's host, else None


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


CollectFn = Callable[[Mapping[str, "SectionResult"], ScrapeContext, FamilyBuilder], None]


@dataclass(frozen=True)
class CollectorRecord:
    """What one collector module declares, once, as its `COLLECTOR`: the batch and the scrape read these
    records and nothing else of the module.

    `collect` turns the rows of its sections into families. It must not raise for odd data it can skip;
    if it raises anyway, the scrape marks only this collector as failed and the others still export.
    """

    name: str  # the `collector` label of mssql_exporter_collector_success
    sections: tuple[str, ...]  # tags of the sections it reads: an error in one of them fails it
    collect: CollectFn
    # SQL sections it brings to the batch; two collectors may bring the same one (first one wins).
    defines: tuple[Section, ...] = ()
    # Its object in the one shared performance-counter section, if it reads perf counters.
    perf_object: PerfObject | None = None
    # Collectors whose work this one reads (their sections' rows, or what they left in the memo this
    # scrape); each must come earlier in COLLECTORS. When a needed collector is off, the scrape still
    # sends its sections and runs it, but exports nothing of it (selection.py).
    needs: tuple[str, ...] = ()
    # Every metric it exports (declare.py): the docs' tables, the contract tests and the generators'
    # names are read from here. Never empty (tests/test_declarations.py).
    metrics: tuple[MetricSpec, ...] = ()
    # What the collector as a whole tells a reader, the heading of its docs table.
    summary: str = ""
    # True: when every one of its sections answers "unavailable" (the server lacks the object: an older
    # release, a platform option that is off), the scrape leaves it out, logged once, as it does for what
    # an engine edition lacks (platform.py), until SQL Server restarts (an upgrade does) and it looks again.
    left_out_when_missing: bool = False


def number(value: object, what: str) -> float | None:
    """A DMV cell as a float: None for NULL (the metric is left out), ImpossibleValue for anything that is
    not a finite number (bytes, text, NaN, infinity: no SQL Server sends those in a numeric column)."""
    if value is None:
        return None
    if isinstance(value, bytes | str):
        raise ImpossibleValue(f"{what} is {value!r}, not a number")
    try:
        result = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ImpossibleValue(f"{what} is {value!r}, not a number") from None
    if not math.isfinite(result):
        raise ImpossibleValue(f"{what} is {value!r}, not a finite number")
    return result


def rows_of(results: Mapping[str, SectionResult], tag: str) -> Iterable[Row]:
    result = results.get(tag)
    return result.rows if result is not None else ()
