"""Checks of what a collector emits against what it declares (metrics/declare.py), for the per-collector
test modules and test_declarations.py."""

from __future__ import annotations

from collections.abc import Iterable

from mssql_memory_exporter.collectors.base import CollectorRecord
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import exposition

# Labels every target series may carry on top of its declared ones: the target's own constant labels.
TARGET_LABELS: frozenset[str] = frozenset()


def emitted(families: list) -> dict[str, tuple[str, set[frozenset[str]]]]:
    """Family name -> (type, the label-name sets its samples carry), as Prometheus parses the exposition."""
    out: dict[str, tuple[str, set[frozenset[str]]]] = {}
    for family in text_string_to_metric_families(exposition(families)):
        labels = {frozenset(s.labels) for s in family.samples if not s.name.endswith("_created")}
        out[family.name] = (family.type, labels)
    return out


def undeclared(record: CollectorRecord, families: list, const_labels: Iterable[str] = ()) -> list[str]:
    """What the collector emitted that its declarations do not say: unknown names, other types or labels."""
    declared = {spec.family: spec for spec in record.metrics}
    const = frozenset(const_labels)
    problems = []
    for name, (kind, label_sets) in emitted(families).items():
        spec = declared.get(name)
        if spec is None:
            problems.append(f"{name}: emitted by {record.name} but not declared")
            continue
        if kind != spec.type:
            problems.append(f"{name}: emitted as {kind}, declared {spec.type}")
        want = frozenset(spec.label_names) | const
        for labels in label_sets:
            if labels != want:
                problems.append(f"{name}: emitted with labels {sorted(labels)}, declared {sorted(want)}")
    return problems
