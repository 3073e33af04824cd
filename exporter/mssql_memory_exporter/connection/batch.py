"""The one T-SQL batch a scrape sends, and the routing of its result sets back to sections.

Each section runs through sp_executesql behind an OBJECT_ID check, inside its own TRY/CATCH: a missing
object in plain T-SQL aborts the whole batch at compile time (Msg 208), which TRY/CATCH at the same
level cannot catch. This way a missing DMV or a denied permission comes back as an ordinary, tagged
result set and every other section still answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from ..collectors.base import (
    CollectorRecord,
    ObjectRead,
    Row,
    Section,
    SectionError,
    SectionResult,
    sql_literal,
)
from ..collectors.custom import BEGIN_TAG, END_TAG, TAG_PREFIX
from ..collectors.perf import PERF_TAG, perf_section

ERROR_TAG = "section_error"
# The sections several collectors share, each built once from the objects every collector reads of it.
SHARED_SECTIONS: dict[str, Callable[[Iterable[ObjectRead]], Section]] = {PERF_TAG: perf_section}
UNAVAILABLE_TAG = "section_unavailable"


def _error_select(tag: str, number: str, message: str, marker: str = ERROR_TAG) -> str:
    return (
        f"SELECT {sql_literal(marker)} AS section, {sql_literal(tag)} AS failed_section,"
        f" {number} AS error_number, {message} AS error_message;"
    )


def render_section(section: Section) -> str:
    run = f"EXEC sys.sp_executesql {sql_literal(section.sql)};"
    body = f"    {run}"
    if section.requires or section.requires_columns:
        checks = [f"OBJECT_ID({sql_literal(obj)}) IS NULL" for obj in section.requires]
        checks += [
            f"COL_LENGTH({sql_literal(obj)}, {sql_literal(col)}) IS NULL"
            for obj, col in section.requires_columns
        ]
        missing = " OR ".join(checks)
        needed = [*section.requires, *(f"{obj}.{col}" for obj, col in section.requires_columns)]
        message = sql_literal(f"{', '.join(needed)} not available")
        absent = _error_select(section.tag, "208", message, marker=UNAVAILABLE_TAG)
        body = f"    IF {missing}\n        {absent}\n    ELSE\n        {run}"
    caught = _error_select(section.tag, "ERROR_NUMBER()", "ERROR_MESSAGE()")
    return f"BEGIN TRY\n{body}\nEND TRY\nBEGIN CATCH\n    {caught}\nEND CATCH;"


def sections_of(collectors: Iterable[CollectorRecord]) -> list[Section]:
    """Sections in collector order; a shared section (all perf objects share one) sits where the first
    collector that reads it needs it."""
    sections: dict[str, Section] = {}
    reads: list[ObjectRead] = []
    for record in collectors:
        for obj in record.reads:
            reads.append(obj)
            sections.setdefault(obj.section, Section(tag=obj.section, sql=""))  # placeholder keeps the order
        for section in record.defines:
            sections.setdefault(section.tag, section)
    sections.update(shared_sections(reads))
    return list(sections.values())


def shared_sections(reads: Iterable[ObjectRead]) -> dict[str, Section]:
    """The shared sections these objects are read from, by tag, each built once from all its objects."""
    grouped: dict[str, list[ObjectRead]] = {}
    for obj in reads:
        grouped.setdefault(obj.section, []).append(obj)
    return {tag: SHARED_SECTIONS[tag](objects) for tag, objects in grouped.items()}


def render_batch(sections: Sequence[Section]) -> str:
    parts = ["SET NOCOUNT ON;", *(render_section(s) for s in sections)]
    return "\n".join(parts) + "\n"


@dataclass(frozen=True)
class ResultSet:
    columns: tuple[str, ...]
    rows: list[tuple[object, ...]]


class BatchShapeError(Exception):
    """The server answered with a result set we cannot route: the batch and its answer disagree."""


def route(result_sets: Iterable[ResultSet], sections: Iterable[Section]) -> dict[str, SectionResult]:
    """Group result sets by the tag in their first column. A section that sent neither rows nor an error
    is given an error of its own (unless it may be empty): silence must not read as success."""
    by_tag = {s.tag: s for s in sections}
    results: dict[str, SectionResult] = {}
    custom: str | None = None  # the custom section whose answer the result sets now are (custom.py)
    for rs in result_sets:
        if custom is not None:
            if _marker(rs, END_TAG) == custom:
                if custom not in results:
                    results[custom] = SectionResult(error=SectionError(0, "the query returned no result set"))
                custom = None
                continue
            if _marker(rs, ERROR_TAG) is None:  # the site's own result set, whatever its columns
                if custom in results:
                    results[custom].error = SectionError(0, "the query returned more than one result set")
                    results[custom].clear()
                else:
                    results[custom] = SectionResult(columns=rs.columns)
                    results[custom].raw.extend(rs.rows)
                continue
            custom = None  # the query failed: its CATCH row ends its answer
        if (began := _marker(rs, BEGIN_TAG)) is not None:
            if began not in by_tag:
                raise BatchShapeError(f"result set for unknown section {began!r}")
            custom = began
            continue
        if not rs.columns or rs.columns[0] != "section":
            raise BatchShapeError(f"result set without a leading section column: {list(rs.columns)[:3]}")
        if not rs.rows:
            continue
        tag = str(rs.rows[0][0])
        if tag in (ERROR_TAG, UNAVAILABLE_TAG):
            for raw in rs.rows:
                _route_failure(dict(zip(rs.columns, raw, strict=True)), by_tag, results)
            continue
        if tag not in by_tag:
            raise BatchShapeError(f"result set for unknown section {tag!r}")
        if any(raw[0] != tag for raw in rs.rows):
            raise BatchShapeError(f"result set of section {tag!r} mixes in rows of other sections")
        result = results.setdefault(tag, SectionResult(columns=rs.columns))
        if result.error is not None or result.unavailable:
            continue  # the section already failed: rows after its error are no answer, nor a shape error
        if result.columns != rs.columns:
            raise BatchShapeError(f"section {tag!r} answered with two different column lists")
        result.raw.extend(rs.rows)
    for tag, section in by_tag.items():
        result = results.setdefault(tag, SectionResult())
        if (
            not result.has_rows()
            and result.error is None
            and not result.unavailable
            and (not section.may_be_empty or (tag.startswith(TAG_PREFIX) and not result.columns))
        ):
            result.error = SectionError(0, "section returned no rows")
    return results


def _marker(rs: ResultSet, marker: str) -> str | None:
    """The section a custom marker row (or, for ERROR_TAG, an error row) names, else None."""
    if len(rs.columns) < 2 or rs.columns[0] != "section" or len(rs.rows) != 1 or rs.rows[0][0] != marker:
        return None
    return str(rs.rows[0][1])


def _route_failure(row: Row, by_tag: dict[str, Section], results: dict[str, SectionResult]) -> None:
    failed = str(row.get("failed_section"))
    section = by_tag.get(failed)
    if row["section"] == UNAVAILABLE_TAG:
        if section is not None and section.optional:
            results[failed] = SectionResult(unavailable=True)
        else:
            results[failed] = SectionResult(error=SectionError(208, str(row.get("error_message") or "")))
        return
    number = row.get("error_number")
    result = results.setdefault(failed, SectionResult())
    result.error = SectionError(
        int(number) if isinstance(number, int) else 0, str(row.get("error_message") or "")
    )
    # Rows sent before the error are a partial answer; keep none of them.
    result.clear()
