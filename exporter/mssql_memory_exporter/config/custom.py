"""Custom collectors: a site's own queries, declared in the config (`custom_collectors:`) or in collector
files it names (`collector_files:`, globs relative to the config's directory), checked at load.

Every problem is one line naming the file, the collector and the field, as the rest of the config's
errors: an invalid name, a metric name without the prefix or taken by a built-in metric or another custom
collector, a reserved label, a value or label column not among the query's declared `columns`, a `GO`
separator (a client-side batch separator: SQL Server answers it with a syntax error). What only the
server can tell (a declared column missing from the answer) fails that collector at scrape time.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError

from ..collectors import COLLECTORS
from ..collectors.base import CollectorRecord
from ..collectors.custom import (
    DEFAULT_LOCK_TIMEOUT_SECONDS,
    DEFAULT_ROW_LIMIT,
    RESULT_AGE,
    CustomMetric,
    CustomQuery,
    record_for,
)
from ..scrape.scrape_metrics import SCRAPE_METRICS
from .errors import ConfigError, to_config_error
from .fields import PROMETHEUS_TARGET_LABELS, Strict, control_character
from .yaml_loading import read_yaml

DEFAULT_PREFIX = "mssql_custom_"
# Collector files shipped in the package (wheel and image alike), named in collector_files as shipped:NAME.
SHIPPED = "shipped:"
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "collectors" / "shipped"
METRIC_NAME = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
NAME = r"^[a-z][a-z0-9_]*$"  # collector names, as the built-in ones
COLUMN = r"^[A-Za-z_][A-Za-z0-9_]*$"  # a label column's name becomes the label's name
# A line holding only GO (optionally a count): sqlcmd and SSMS split batches there; the server does not.
GO_LINE = re.compile(r"^[ \t]*go(?:[ \t]+\d+)?[ \t]*;?[ \t]*$", re.IGNORECASE | re.MULTILINE)
# SQL Server's major version by the release a collector names in min_version.
MAJOR_OF_RELEASE = {2016: 13, 2017: 14, 2019: 15, 2022: 16, 2025: 17}
PLATFORM_NAMES = Literal["sql_server", "azure_sql_managed_instance", "azure_sql_database"]
BUILT_IN_METRICS = frozenset(
    spec.family for spec in (*SCRAPE_METRICS, RESULT_AGE, *(s for r in COLLECTORS for s in r.metrics))
)
# Labels a custom metric may not have: Prometheus' target labels (it would rename them exported_*) and the
# bucket and quantile labels its histograms and summaries read. A target's constant labels are checked
# against the config's targets (label_clashes).
CUSTOM_RESERVED = PROMETHEUS_TARGET_LABELS | {"le", "quantile"}
BUILT_IN_NAMES = frozenset(record.name for record in COLLECTORS)


def _plain_text(value: str) -> str:
    found = control_character(value.replace("\n", " ").replace("\t", " ").replace("\r", " "))
    if found is not None:
        raise ValueError(f"contains a control character ({found})")
    return value


Text = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(_plain_text)]
ColumnName = Annotated[str, Field(pattern=COLUMN, max_length=128)]


class CustomMetricConfig(Strict):
    name: Annotated[str, Field(pattern=METRIC_NAME, max_length=200)]
    type: Literal["gauge", "counter"]
    help: Text
    value_column: ColumnName
    label_columns: list[ColumnName] = Field(default_factory=list)
    static_labels: dict[ColumnName, Annotated[str, Field(strict=False)]] = Field(default_factory=dict)


class CustomCollectorConfig(Strict):
    name: Annotated[str, Field(pattern=NAME, max_length=64)]
    help: Text | None = None  # what the collector tells, for the docs and --check-target
    query: Annotated[str, Field(min_length=1, max_length=100_000)]
    columns: Annotated[list[ColumnName], Field(min_length=1)]
    metrics: Annotated[list[CustomMetricConfig], Field(min_length=1)]
    row_limit: Annotated[int, Field(ge=1, le=100_000)] = DEFAULT_ROW_LIMIT
    lock_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = DEFAULT_LOCK_TIMEOUT_SECONDS
    min_interval_seconds: Annotated[float, Field(ge=0, le=86_400)] = 0.0
    requires: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_#.\[\]]+$", max_length=400)]] = Field(
        default_factory=list
    )
    platforms: list[PLATFORM_NAMES] | None = None
    min_version: Literal[2016, 2017, 2019, 2022, 2025] | None = None


class CollectorFile(Strict):
    """A collector file: `collectors:`, a list like the config's `custom_collectors:`."""

    collectors: Annotated[list[CustomCollectorConfig], Field(min_length=1)]


def _problems(model: CustomCollectorConfig, prefix: str) -> Iterable[tuple[tuple[str | int, ...], str]]:
    """(field path, problem) of one collector's declarations that no single field can see."""
    if GO_LINE.search(model.query):
        yield (
            ("query",),
            "holds a GO line: GO separates batches in sqlcmd and SSMS, SQL Server refuses it; give one batch",
        )
    declared = {c.lower() for c in model.columns}
    if len(declared) != len(model.columns):
        yield ("columns",), "names a column twice (columns are compared without case)"
    for index, metric in enumerate(model.metrics):
        at: tuple[str | int, ...] = ("metrics", index)
        allowed = (DEFAULT_PREFIX, prefix)
        if not metric.name.startswith(allowed):
            wanted = " or ".join(sorted({repr(p) for p in allowed}))
            yield (*at, "name"), f"{metric.name} does not start with {wanted} (custom_metric_prefix)"
        if metric.type == "counter" and not metric.name.endswith("_total"):
            yield (*at, "name"), f"{metric.name} is a counter: its name must end in _total"
        if metric.type == "gauge" and metric.name.endswith("_total"):
            yield (*at, "name"), f"{metric.name} ends in _total, which Prometheus reads as a counter"
        if metric.value_column.lower() not in declared:
            yield (*at, "value_column"), f"{metric.value_column} is not among the query's columns"
        labels = [*metric.label_columns, *metric.static_labels]
        for where, name in [
            *(("label_columns", n) for n in metric.label_columns),
            *(("static_labels", n) for n in metric.static_labels),
        ]:
            if where == "label_columns" and name.lower() not in declared:
                yield (*at, where), f"{name} is not among the query's columns"
            if name.startswith("__") or name in CUSTOM_RESERVED:
                yield (*at, where), f"label {name} is reserved (Prometheus gives it a meaning of its own)"
            if labels.count(name) > 1:
                yield (*at, where), f"label {name} is given twice"
        if metric.value_column in metric.label_columns:
            yield (*at, "value_column"), f"{metric.value_column} is also a label column"


def _query(model: CustomCollectorConfig, origin: str) -> CustomQuery:
    return CustomQuery(
        name=model.name,
        sql=model.query.strip(),
        columns=tuple(model.columns),
        metrics=tuple(
            CustomMetric(
                m.name,
                m.type,
                m.help,
                m.value_column,
                tuple(m.label_columns),
                tuple(sorted(m.static_labels.items())),
            )
            for m in model.metrics
        ),
        row_limit=model.row_limit,
        lock_timeout_seconds=model.lock_timeout_seconds,
        min_interval_seconds=model.min_interval_seconds,
        requires=tuple(model.requires),
        platforms=frozenset(model.platforms or ()),
        min_major_version=MAJOR_OF_RELEASE.get(model.min_version or 0, 0),
        origin=origin,
        summary=model.help or "",
    )


def shipped_file(name: str) -> Path | None:
    """The collector file shipped with the exporter under that name (`shipped:agent_jobs`), if any."""
    path = SHIPPED_DIR / f"{name}.yml"
    return path if re.fullmatch(r"[a-z0-9_]+", name) and path.is_file() else None


def _files(patterns: Sequence[object], source: str, base_dir: str) -> tuple[list[str], list[str]]:
    """The files `collector_files` names, sorted per pattern, and the error lines of patterns."""
    found: list[str] = []
    errors: list[str] = []
    for index, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            errors.append(f"{source}: collector_files.{index}: must be a file name or a glob")
            continue
        if pattern.startswith(SHIPPED):
            shipped = shipped_file(pattern.removeprefix(SHIPPED))
            if shipped is None:
                known = ", ".join(SHIPPED + p.stem for p in sorted(SHIPPED_DIR.glob("*.yml")))
                errors.append(
                    f"{source}: collector_files.{index}: no shipped file {pattern!r}; shipped: {known}"
                )
            elif str(shipped) not in found:
                found.append(str(shipped))
            continue
        matches = sorted(glob.glob(os.path.join(base_dir, pattern)))
        if not matches:
            errors.append(f"{source}: collector_files.{index}: {pattern!r} matches no file")
        found += [m for m in matches if m not in found]
    return found, errors


def load_custom(data: Mapping[str, Any], source: str, base_dir: str) -> tuple[CustomQuery, ...]:
    """The custom collectors the config declares, checked; ConfigError lists every problem."""
    prefix = data.get("custom_metric_prefix", DEFAULT_PREFIX)
    if not isinstance(prefix, str) or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*_", prefix):
        raise ConfigError(f"{source}: custom_metric_prefix: must be a metric name start ending in _")
    declared: list[tuple[str, str, object]] = []  # (origin, path prefix, raw collector list)
    inline = data.get("custom_collectors")
    errors: list[str] = []
    if inline is not None and inline != []:  # an empty list (a template's placeholder) declares nothing
        declared.append((source, "custom_collectors", inline))
    patterns = data.get("collector_files") or []
    if not isinstance(patterns, list):
        raise ConfigError(f"{source}: collector_files: must be a list of file names or globs")
    files, errors = _files(patterns, source, base_dir)
    for path in files:
        try:
            raw = read_yaml(path)
        except ConfigError as exc:
            errors += exc.lines
            continue
        declared.append((path, "collectors", raw.get("collectors") if isinstance(raw, Mapping) else raw))
    queries: list[CustomQuery] = []
    owner: dict[str, str] = {}  # metric or collector name -> where it was declared
    for origin, path, raw in declared:
        try:
            models = CollectorFile.model_validate({"collectors": raw}).collectors
        except ValidationError as exc:
            errors += [_named(line, origin, path, raw) for line in to_config_error(origin, exc).lines]
            continue
        for index, model in enumerate(models):
            where = f"{origin}: {path}.{index} ({model.name})"
            problems = list(_problems(model, prefix))
            if model.name in BUILT_IN_NAMES:
                problems.append((("name",), f"{model.name} is a built-in collector's name"))
            elif model.name in owner:
                problems.append((("name",), f"{model.name} is already declared in {owner[model.name]}"))
            for m_index, metric in enumerate(model.metrics):
                family = metric.name.removesuffix("_total") if metric.type == "counter" else metric.name
                if family in BUILT_IN_METRICS:
                    problems.append((("metrics", m_index, "name"), f"{metric.name} is a built-in metric"))
                elif "metric " + family in owner:
                    other = owner["metric " + family]
                    problems.append(
                        (("metrics", m_index, "name"), f"{metric.name} is already declared in {other}")
                    )
                owner["metric " + family] = where
            owner.setdefault(model.name, where)
            errors += [f"{where}: {'.'.join(str(p) for p in field)}: {text}" for field, text in problems]
            queries.append(_query(model, origin))
    if errors:
        raise ConfigError(errors)
    return tuple(queries)


def _named(line: str, origin: str, path: str, raw: object) -> str:
    """A field error's line with the collector's name after its index, as the other checks write it."""
    match = re.match(re.escape(f"{origin}: collectors.") + r"(\d+)\.", line)
    if match is None or not isinstance(raw, list):
        return line.replace(f"{origin}: collectors", f"{origin}: {path}", 1)
    index = int(match[1])
    body = raw[index] if index < len(raw) else None
    name = body.get("name") if isinstance(body, Mapping) else None
    return f"{origin}: {path}.{index} ({name if isinstance(name, str) else '?'}): {line[match.end() :]}"


def records_of(queries: Sequence[CustomQuery]) -> tuple[CollectorRecord, ...]:
    return tuple(record_for(q) for q in queries)


def label_clashes(queries: Sequence[CustomQuery], target_labels: Mapping[str, Iterable[str]]) -> list[str]:
    """A custom label with the name of a target's constant label would put that label on a series twice."""
    lines = []
    for query in queries:
        for metric in query.metrics:
            names = {*metric.label_columns, *(k for k, _ in metric.static_labels)}
            for target, labels in target_labels.items():
                for clash in sorted(names & set(labels)):
                    lines.append(
                        f"{query.origin}: custom collector {query.name}: metric {metric.name}: label {clash} "
                        f"is also a constant label of target {target} (targets.{target}.labels)"
                    )
    return lines
