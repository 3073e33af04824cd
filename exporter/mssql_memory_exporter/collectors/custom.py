"""A site's own queries as collectors: each one section of the one batch, with the built-in collectors'
isolation (its own TRY/CATCH), selection (`collectors:`, `collect[]`) and failure reporting.

The declarations come from the config (config/custom.py checks them at load); this module turns one
into a `CollectorRecord` and reads its answer. The site's SQL is not touched: its section runs it
through a nested sp_executesql, between two tagged marker rows, so its result set is routed by position
between the markers (connection/batch.py) and needs no tag column of its own. Around it:

- `SET LOCK_TIMEOUT`: a read that waits on a lock gives up (error 1222, the collector fails) instead of
  holding the scrape until its timeout;
- `SET ROWCOUNT row_limit + 1`: the server stops after one row more than the limit, and a collector that
  gets more than `row_limit` rows fails naming the limit, exporting none of them.

Both are SET options set inside the section's dynamic SQL, which SQL Server restores when that batch
returns, so they never reach the built-in sections. A collector with `min_interval_seconds` is sent only
with the scrape that is due; in between, the scrape leaves its section out (`due_sections`) and the
collector serves its last result, with that result's age.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec, MetricType
from .base import CollectorRecord, ScrapeContext, Section, SectionResult, number, sql_literal

TAG_PREFIX = "custom:"
BEGIN_TAG = "custom_begin"  # marker row before the site's result set: (section, custom_section)
END_TAG = "custom_end"  # and after it
DEFAULT_ROW_LIMIT = 1000
DEFAULT_LOCK_TIMEOUT_SECONDS = 5.0

RESULT_AGE = MetricSpec(
    "mssql_exporter_collector_result_age_seconds",
    "gauge",
    "Seconds since the custom collector's query last ran: it runs once per min_interval_seconds and its "
    "last result is served in between.",
    "seconds",
    "exporter: the custom collector's min_interval_seconds",
    "How old are the values a custom collector with min_interval serves?",
    (Label("collector", "the custom collector's name"),),
)


@dataclass(frozen=True)
class CustomMetric:
    """One metric a custom query exports: a series per row, its value from `value_column`."""

    name: str  # the sample name (counters end in _total)
    type: MetricType
    help: str
    value_column: str
    label_columns: tuple[str, ...] = ()
    static_labels: tuple[tuple[str, str], ...] = ()

    def spec(self) -> MetricSpec:
        labels = tuple(Label(n) for n in (*self.label_columns, *(k for k, _ in self.static_labels)))
        return MetricSpec(
            self.name,
            self.type,
            self.help,
            "as declared",
            f"custom query column `{self.value_column}`",
            labels=labels,
        )


@dataclass(frozen=True)
class CustomQuery:
    """A custom collector as the config declared it (checked there)."""

    name: str
    sql: str
    columns: tuple[str, ...]  # what the query returns; value and label columns are among them
    metrics: tuple[CustomMetric, ...]
    row_limit: int = DEFAULT_ROW_LIMIT
    lock_timeout_seconds: float = DEFAULT_LOCK_TIMEOUT_SECONDS
    min_interval_seconds: float = 0.0
    requires: tuple[str, ...] = ()  # objects checked with OBJECT_ID: where one is missing, left out
    platforms: frozenset[str] = frozenset()
    min_major_version: int = 0
    origin: str = ""  # the file that declared it, for messages
    summary: str = field(default="")

    @property
    def tag(self) -> str:
        return TAG_PREFIX + self.name


def section_sql(query: CustomQuery) -> str:
    """The section's dynamic SQL: markers around the site's query, run with its lock timeout and row cap."""
    tag = sql_literal(query.tag)
    lock_ms = max(1, round(query.lock_timeout_seconds * 1000))
    return (
        f"SELECT {sql_literal(BEGIN_TAG)} AS section, {tag} AS custom_section;\n"
        f"SET LOCK_TIMEOUT {lock_ms};\n"
        f"SET ROWCOUNT {query.row_limit + 1};\n"
        f"EXEC sys.sp_executesql {sql_literal(query.sql)};\n"
        "SET ROWCOUNT 0;\n"
        f"SELECT {sql_literal(END_TAG)} AS section, {tag} AS custom_section;"
    )


@dataclass(frozen=True)
class _Cached:
    """The last result of a collector with min_interval: when it ran (monotonic) and its samples."""

    at: float
    interval: float
    samples: tuple[tuple[MetricSpec, float, Mapping[str, str]], ...]


def _memo_key(section: Section) -> str:
    # By SQL text too: a reload that changes the query (or its limits) runs it at once.
    return f"{section.tag}:{hashlib.sha256(section.sql.encode()).hexdigest()[:16]}"


def due_sections(sections: Sequence[Section], memo: Mapping[str, object], now: float) -> tuple[Section, ...]:
    """`sections` less the custom ones whose last result is younger than their min_interval."""
    kept = []
    for section in sections:
        cached = memo.get(_memo_key(section)) if section.tag.startswith(TAG_PREFIX) else None
        if isinstance(cached, _Cached) and now - cached.at < cached.interval:
            continue
        kept.append(section)
    return tuple(kept)


def _text(value: object) -> str:
    return "" if value is None else str(value).strip()


def read_samples(
    query: CustomQuery, result: SectionResult
) -> list[tuple[MetricSpec, float, Mapping[str, str]]]:
    """The samples of one answer, or MissingData naming what is wrong with it (nothing is exported then)."""
    columns = tuple(c.lower() for c in result.columns)
    missing = [c for c in query.columns if c.lower() not in columns]
    if missing:
        raise MissingData(
            f"custom collector {query.name}: column {', '.join(missing)} declared in `columns` is not in "
            f"the query's answer (it returned: {', '.join(result.columns) or 'no columns'})"
        )
    if len(result.raw) > query.row_limit:
        raise MissingData(
            f"custom collector {query.name}: the query returned more than its row_limit of "
            f"{query.row_limit} rows; nothing exported (narrow the query or raise row_limit)"
        )
    at = {c: i for i, c in enumerate(columns)}
    samples: list[tuple[MetricSpec, float, Mapping[str, str]]] = []
    for metric in query.metrics:
        spec = metric.spec()
        value_at = at[metric.value_column.lower()]
        label_at = [(name, at[name.lower()]) for name in metric.label_columns]
        seen: set[tuple[str, ...]] = set()
        for raw in result.raw:
            value = number(raw[value_at], f"custom collector {query.name}: column {metric.value_column}")
            if value is None:
                continue  # NULL: no reading for this row
            labels = {name: _text(raw[i]) for name, i in label_at}
            key = tuple(labels.values())
            if key in seen:
                raise MissingData(
                    f"custom collector {query.name}: two rows give {metric.name} the same labels "
                    f"{labels}; make label_columns tell every row apart"
                )
            seen.add(key)
            labels.update(metric.static_labels)
            samples.append((spec, value, labels))
    return samples


def _collect(
    query: CustomQuery,
    section: Section,
    results: Mapping[str, SectionResult],
    ctx: ScrapeContext,
    out: FamilyBuilder,
) -> None:
    result = results.get(section.tag)
    key = _memo_key(section)
    now = time.monotonic()
    if result is None:  # left out of this batch: its min_interval has not passed
        cached = ctx.memo.get(key)
        if not isinstance(cached, _Cached):
            raise MissingData(f"custom collector {query.name}: no result yet")
        samples, age = cached.samples, now - cached.at
    else:
        samples, age = tuple(read_samples(query, result)), 0.0
        if query.min_interval_seconds > 0:
            for old in [k for k in ctx.memo if k.startswith(section.tag + ":") and k != key]:
                del ctx.memo[old]  # a result of the query before a reload changed it
            ctx.memo[key] = _Cached(now, query.min_interval_seconds, samples)
    for spec, value, labels in samples:
        out.emit(spec, value, labels)
    if query.min_interval_seconds > 0:
        out.emit(RESULT_AGE, age, {"collector": query.name})


@dataclass(frozen=True)
class _Collect:
    """A custom collector's collect function, equal for equal declarations: a reload that leaves the
    custom collectors as they were leaves the targets equal too (TargetConfig compares its collectors),
    so their connections and cached readings stay."""

    query: CustomQuery
    section: Section

    def __call__(self, results: Mapping[str, SectionResult], ctx: ScrapeContext, out: FamilyBuilder) -> None:
        _collect(self.query, self.section, results, ctx, out)


def record_for(query: CustomQuery) -> CollectorRecord:
    section = Section(
        tag=query.tag,
        sql=section_sql(query),
        requires=query.requires,
        # Its markers show it answered: an empty result set is an answer (no failing job, say).
        may_be_empty=True,
        optional=bool(query.requires),
    )
    specs = tuple(m.spec() for m in query.metrics)
    if query.min_interval_seconds > 0:
        specs += (RESULT_AGE,)
    return CollectorRecord(
        name=query.name,
        sections=(section.tag,),
        collect=_Collect(query, section),
        defines=(section,),
        metrics=specs,
        summary=query.summary or f"custom collector from {query.origin or 'the config'}",
        left_out_when_missing=bool(query.requires),
        platforms=query.platforms,
        min_major_version=query.min_major_version,
    )
