"""Each rule file split by where its groups are evaluated (`rule_groups.evaluators` in the spec).

Groups evaluated by each shard's Prometheus stay at their file's path under alerts/rules/, which every
shard loads (`rules/*.rules.yml`); a file left with no such group is not written. Groups evaluated by
Thanos Ruler go to the same file name under `thanos-ruler/`, a directory no shard loads, each with
`partial_response_strategy: abort` (a Thanos extension of the rule-file format, which Prometheus refuses:
`thanos tools rules-check` checks these files). Abort is not a setting: under `warn` the ruler records a
sum over the shards that answered, which reads as a fleet that shrank.
"""

from __future__ import annotations

from typing import Any

from .group_names import PROMETHEUS
from .spec import Spec

RULER_DIR = "thanos-ruler"
PARTIAL_RESPONSE_STRATEGY = "abort"
RULER_HEADER = (
    "# Evaluated by Thanos Ruler through Thanos Query (docs/scaling.md, \"Where rules run\"): no shard's\n"
    "# Prometheus loads this directory. `thanos tools rules-check --rules=FILE` checks it (promtool refuses\n"
    "# the Thanos-only partial_response_strategy).\n"
)


def ruler_group(group: dict[str, Any]) -> dict[str, Any]:
    """The group as Thanos Ruler reads it: its keys in the usual order, the strategy before the rules."""
    out = {key: value for key, value in group.items() if key != "rules"}
    out["partial_response_strategy"] = PARTIAL_RESPONSE_STRATEGY
    out["rules"] = group["rules"]
    return out


def split(spec: Spec, files: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{path: {"groups": [...]}} -> the same with every Thanos Ruler group moved under thanos-ruler/."""
    out: dict[str, dict[str, Any]] = {}
    for path, data in files.items():
        on_shard = [spec.rule_groups.evaluator(g["name"]) == PROMETHEUS for g in data["groups"]]
        shard = [g for g, here in zip(data["groups"], on_shard, strict=True) if here]
        ruler = [ruler_group(g) for g, here in zip(data["groups"], on_shard, strict=True) if not here]
        if shard:
            out[path] = {"groups": shard}
        if ruler:
            out[f"{RULER_DIR}/{path}"] = {"groups": ruler}
    return out


def is_ruler_file(path: str) -> bool:
    return path.startswith(f"{RULER_DIR}/")
