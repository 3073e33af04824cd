"""The shared performance-counter section and the declarative mapping from counters to metrics.

All perf-counter collectors read one scan of sys.dm_os_performance_counters, filtered to the objects
they declare: the DMV is materialised on every read, so one scan per scrape is the cheap way.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..metrics.builder import FamilyBuilder, MissingData
from ..metrics.declare import Label, MetricSpec
from .base import ObjectRead, ScrapeContext, Section, SectionResult, sql_literal
from .perfcounters import CounterKind, PerfIndex, PerfRow, parse_perf_rows, parse_perf_table

log = logging.getLogger(__name__)

PERF_TAG = "perf"


def perf_object(name: str, counters: tuple[str, ...] = ()) -> ObjectRead:
    """A perf object a collector reads (its record's `reads`), e.g. "Buffer Manager" without the instance
    prefix; `counters` limits the rows sent when only a few are wanted."""
    return ObjectRead(PERF_TAG, name, counters)


def objects_named(reads: Iterable[ObjectRead]) -> list[str]:
    """The names of the perf objects among a record's reads (for the docs tables)."""
    return [obj.name for obj in reads if obj.section == PERF_TAG]


@dataclass(frozen=True)
class PerfMetric:
    counter: str  # counter_name as SQL Server reports it
    metric: str
    doc: str
    kind: CounterKind  # what the metric name promises: GAUGE or CUMULATIVE
    scale: float = 1.0  # e.g. 1024 for "(KB)" counters, so metrics are in bytes
    # Every supported SQL Server (2016 and later) reports a required counter, so its absence or a
    # cntr_type contradicting the metric means the filter or the server is wrong: the collector fails
    # rather than succeed with a hole. Optional ones (features some editions or platforms lack) are
    # skipped.
    required: bool = True
    unit: str = ""  # for the docs; by default read from the name (_bytes, _seconds, _pages)
    question: str = ""  # what a reader learns from it, for the docs

    @property
    def name(self) -> str:
        """The metric's name, as MetricSpec.name: what the rule and dashboard generators import."""
        return self.metric


UNITS_BY_SUFFIX = (
    ("_bytes", "bytes"),
    ("_seconds", "seconds"),
    ("_pages", "pages (8 KiB)"),
    ("_ratio", "ratio 0..1"),
)
NODE = Label("node", "the NUMA node number as in sys.dm_os_memory_nodes (SQL Server's `000` is `0`)")
OPTIONAL = "where the edition or platform lacks the counter"
TIMES = "\u00d7"  # the multiplication sign the docs write


def unit_of(metric: str) -> str:
    """The docs' unit of a metric whose declaration gives none, from its name's suffix."""
    for suffix, unit in UNITS_BY_SUFFIX:
        if metric.removesuffix("_total").endswith(suffix):
            return unit
    return ""


def declare(
    obj: str, metrics: Sequence[PerfMetric], labels: tuple[Label, ...] = (), conditional: str = ""
) -> tuple[MetricSpec, ...]:
    """The declarations of an object's counter metrics, read from its PerfMetric table (nothing twice)."""
    return tuple(
        MetricSpec(
            name=m.metric,
            type="counter" if m.kind is CounterKind.CUMULATIVE else "gauge",
            help=m.doc,
            unit=m.unit or unit_of(m.metric),
            source=f"`{obj}` `{m.counter}`" + (f" {TIMES} {m.scale:g}" if m.scale != 1.0 else ""),
            question=m.question,
            labels=labels,
            conditional=conditional or ("" if m.required else OPTIONAL),
        )
        for m in metrics
    )


def perf_section(objects: Iterable[ObjectRead]) -> Section:
    """One SELECT for all declared objects.

    The object filter is a LIKE with a trailing `%`: object_name is nchar(128), blank-padded, and LIKE
    (unlike `=`) does not ignore that padding. The leading `%:` skips the instance prefix, which differs
    between default (`SQLServer:`) and named (`MSSQL$NAME:`) instances.
    """
    merged: dict[str, set[str] | None] = {}
    for obj in objects:
        if obj.name in merged and merged[obj.name] is None:
            continue
        merged[obj.name] = None if not obj.items else (merged.get(obj.name) or set()) | set(obj.items)
    clauses = []
    for name in sorted(merged):
        like = f"pc.object_name LIKE {sql_literal('%:' + name + '%')}"
        counters = merged[name]
        if counters:
            names = ", ".join(sql_literal(c) for c in sorted(counters))
            clauses.append(f"({like} AND pc.counter_name IN ({names}))")
        else:
            clauses.append(like)
    where = "\n   OR ".join(clauses)
    sql = (
        f"SELECT {sql_literal(PERF_TAG)} AS section, RTRIM(pc.object_name) AS object_name,"
        " RTRIM(pc.counter_name) AS counter_name, RTRIM(pc.instance_name) AS instance_name,"
        " pc.cntr_value, pc.cntr_type\n"
        "FROM sys.dm_os_performance_counters AS pc\n"
        f"WHERE {where};"
    )
    return Section(tag=PERF_TAG, sql=sql, requires=("sys.dm_os_performance_counters",))


def perf_rows(results: Mapping[str, SectionResult], obj: str) -> list[PerfRow]:
    """The rows of one object. Every instance reports all the objects we read, so none at all means the
    filter or the server is wrong, not that there is nothing to say."""
    rows = _by_object(results).get(obj.casefold(), [])
    if not rows:
        raise MissingData(f"no rows for perf object {obj!r}")
    return rows


def _by_object(results: Mapping[str, SectionResult]) -> dict[str, list[PerfRow]]:
    """The perf section parsed once per scrape and grouped by object: four collectors read it."""
    result = results.get(PERF_TAG)
    if result is None:
        return {}
    parsed = result.parsed.get("perf_by_object")
    if isinstance(parsed, dict):
        return parsed
    grouped: dict[str, list[PerfRow]] = {}
    rows = parse_perf_table(result.columns, result.raw) if result.raw else parse_perf_rows(result.rows)
    for row in rows:
        grouped.setdefault(row.object.casefold(), []).append(row)
    result.parsed["perf_by_object"] = grouped
    return grouped


def export(
    out: FamilyBuilder,
    ctx: ScrapeContext,
    index: PerfIndex,
    metrics: Sequence[PerfMetric],
    instance: str = "",
    labels: Mapping[str, str] | None = None,
) -> None:
    """Export each declared counter, typed by the row's cntr_type.

    A row whose cntr_type contradicts what the metric name promises is never exported under a name that
    lies (a `_total` gauge breaks rate(), a gauge that is really a cumulative count plots as an
    ever-rising line). A required counter missing or mistyped raises MissingData naming every such
    counter; an optional one is skipped, with a warning when it is mistyped.
    """
    problems: list[str] = []
    where = f" of instance {instance!r}" if instance else ""
    for spec in metrics:
        row = index.get(spec.counter, instance)
        if row is None:
            if spec.required:
                problems.append(f"counter {spec.counter!r}{where} missing")
            continue
        if row.kind is not spec.kind:
            if spec.required:
                problems.append(
                    f"counter {spec.counter!r}{where} has type {row.kind.value}, expected {spec.kind.value}"
                )
            else:
                log.warning(
                    "counter type does not match metric",
                    extra={
                        "target": target_name(ctx),
                        "counter": spec.counter,
                        "instance": instance,
                        "expected": spec.kind.value,
                        "got": row.kind.value,
                    },
                )
            continue
        value = row.value * spec.scale
        if spec.kind is CounterKind.CUMULATIVE:
            out.counter(spec.metric, spec.doc, value, labels)
        else:
            out.gauge(spec.metric, spec.doc, value, labels)
    if problems:
        raise MissingData("; ".join(problems))


def target_name(ctx: ScrapeContext) -> str:
    return ctx.target.name


def node_label(instance_name: str) -> str:
    """SQL Server names nodes "000", "001"; the label is the plain number, as in sys.dm_os_memory_nodes."""
    return str(int(instance_name)) if instance_name.isdigit() else instance_name


def export_per_node(
    out: FamilyBuilder,
    ctx: ScrapeContext,
    results: Mapping[str, SectionResult],
    obj: ObjectRead,
    metrics: Sequence[PerfMetric],
) -> None:
    """Export an object with one instance per NUMA node (Buffer Node, Memory Node), labelled `node`."""
    index = PerfIndex(perf_rows(results, obj.name))
    for instance in index.instances():
        export(out, ctx, index, metrics, instance=instance, labels={"node": node_label(instance)})

