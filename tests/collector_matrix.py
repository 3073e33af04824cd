"""What the collectors' records say they read, for the tests that cover every collector without a table of
their own: the failure matrix (tests/integration/test_failing_sections.py) and the whole-scrape fuzz
(tests/unit/test_fuzz.py).

Each record names the sections it reads (`CollectorRecord.sections`) and brings their SQL (`defines`);
generators/permissions.py finds the server objects each section's SQL reads (the same list that writes
docs/permissions.md), and the stand-in's own T-SQL analysis must agree with it (`analysed_objects`). So a
new collector is in the matrix and the fuzz the moment it is listed in COLLECTORS.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import CollectorRecord, Section
from mssql_memory_exporter.connection.batch import sections_of

from generators import permissions
from tests.standin.sql_analysis import Analysis, analyze

SECTIONS: dict[str, Section] = {section.tag: section for section in sections_of(COLLECTORS)}


@functools.cache
def objects_read(tag: str) -> frozenset[str]:
    """The server objects a section's SQL reads, lower-cased as written (`tempdb.sys.database_files`)."""
    return frozenset(name.lower() for name in permissions.objects_in(SECTIONS[tag]))


def _analyses(analysis: Analysis) -> Iterator[Analysis]:
    yield analysis
    for dynamic in analysis.dynamic:
        yield from _analyses(dynamic.analysis)


def analysed_objects(tag: str) -> frozenset[str]:
    """The same, as the stand-in's parse of the SQL finds them (dynamic SQL included): a cross-check of
    the exporter's pattern, which a view named in an unusual way could slip past."""
    return frozenset(
        source.written.lower()
        for analysis in _analyses(analyze(SECTIONS[tag].sql))
        for query in analysis.queries
        for source in query.sources
        if source.kind == "object"
    )


def readers(view: str, *, missing: bool = False) -> frozenset[str]:
    """Collectors that read `view` through a section of theirs: an error there fails the collector. When
    the object is `missing`, an optional section that checks for it first answers "not on this server"
    instead, which fails no one."""

    def fails(tag: str) -> bool:
        section = SECTIONS[tag]
        tolerated = missing and section.optional and view in {r.lower() for r in section.requires}
        return view in objects_read(tag) and not tolerated

    return frozenset(record.name for record in COLLECTORS for tag in record.sections if fails(tag))


@dataclass(frozen=True)
class FailureCase:
    """A server object the batch reads, made to fail one way, and the collectors that must fail then."""

    view: str
    fault: str  # "denied 229", "denied 300" (a DENY, a missing VIEW SERVER STATE) or "missing" (Msg 208)
    failing: frozenset[str]

    @property
    def id(self) -> str:
        return f"{self.view}-{self.fault.replace(' ', '')}"


def failure_cases() -> list[FailureCase]:
    """Every object a collector reads, denied both ways and missing."""
    views = sorted({view for record in COLLECTORS for tag in record.sections for view in objects_read(tag)})
    cases = []
    for view in views:
        cases += [FailureCase(view, f"denied {error}", readers(view)) for error in (229, 300)]
        cases.append(FailureCase(view, "missing", readers(view, missing=True)))
    return cases


def declared_names(record: CollectorRecord) -> frozenset[str]:
    """The sample names the collector declares (counters with `_total`)."""
    return frozenset(spec.name for spec in record.metrics)
