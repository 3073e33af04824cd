"""What every collector module shares: the SQL section it reads, the rows it gets, the families it makes."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..metrics.builder import FamilyBuilder, ImpossibleValue
from ..metrics.declare import MetricSpec
from .view import NO_TARGET, HostView, TargetView

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
class ObjectRead:
    """One object a collector reads out of a section it shares with other collectors: the batch builds
    that section once, from every collector's objects. The performance counters are such a section (one
    scan of sys.dm_os_performance_counters for all their objects: perf.py)."""

    section: str  # the shared section's tag
    name: str  # the object in it, e.g. "Buffer Manager" (without an instance prefix)
    items: tuple[str, ...] = ()  # the rows wanted, when only a few are (counter names); empty: all


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
    # Objects it reads out of sections several collectors share (its perf object, if it reads counters).
    reads: tuple[ObjectRead, ...] = ()
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
    # Where it runs (platform.py names: sql_server, azure_sql_managed_instance, azure_sql_database);
    # empty: everywhere. Elsewhere the scrape leaves it out, as it does what a platform lacks.
    platforms: frozenset[str] = frozenset()
    # SQL Server's major version it needs (13 is 2016, 17 is 2025); 0: any. Checked on SQL Server only
    # (Azure reports a fixed 12.x whatever its engine).
    min_major_version: int = 0


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
