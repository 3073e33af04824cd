"""Reading scenario files: `extends:`, `delete:` and a check of every key.

Every scenario extends `scenarios/base.yml`, a complete, healthy SQL Server 2022 (each counter, database
file and property the exporter reads), and states only what it tests. The rules:

- `extends: NAME` reads `scenarios/NAME.yml` first (which may extend another; a cycle is an error).
- These mappings merge key by key: the top level, `server`, `server.properties`, `counters`, each
  object under `counters`, `volumes`, `noise`, `views` and each single-row view under `views` (a view
  given as a list of rows is replaced whole; a keyed view, dm_os_memory_clerks or dm_os_wait_stats,
  merges by clerk type or wait type, each type's rows replaced whole). A scenario that sets
  `counters.Buffer Manager.Lazy writes/sec` keeps every other Buffer Manager counter of its parent.
- Everything else replaces the parent's value whole: numbers, strings, lists (`databases`, `restarts`,
  a per-node list) and the other mappings, in particular one counter's spec (`{rate: 2}` over a parent's
  `{gauge: 5}` must not become both).
- `delete: [dotted.path, ...]` removes inherited keys before the merge, e.g.
  `counters.Memory Manager.Free Memory (KB)` for a server that does not report it. A path that the
  parent does not have is an error (a typo would otherwise delete nothing).
- `moments: {failover: 300}` names scenario times that view cells' `steps` may use instead of a number
  (`steps: [[failover, 2]]`); a schedule (schedule.py `--moment failover@40`) can bring one forward.
  The mapping merges key by key, so a child moves its parent's moment by naming it.
- `name` and `description` are never inherited: a scenario is named after its file unless it says
  otherwise.
- A key the stand-in does not know, at the top or under `server`, is an error naming the file and the
  key: a misspelt `numa_node` must not silently leave the parent's value in place.
- What an older version lacks needs no `delete`: the stand-in answers a view or column from
  `catalog.yaml` only when its `since` / `until` admit the scenario's `ProductVersion` (for example
  the Hybrid Buffer Pool views before 2019).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

SCENARIO_DIR = Path(__file__).parent / "scenarios"

TOP_LEVEL_KEYS = frozenset(
    {
        "name",
        "description",
        "extends",
        "delete",
        "server",
        "numa_nodes",
        "counters",
        "restarts",
        "noise",
        "databases",
        "platform",
        "volumes",
        "volume_lookup_fails",
        "volume_space",
        "hybrid_buffer_pool",
        "buffer_pool_extension",
        "workload",
        "views",
        "moments",
        "custom_queries",
    }
)
SERVER_KEYS = frozenset({"object_prefix", "uptime_seconds", "properties", "pad"})
NOT_INHERITED = ("name", "description")


class ScenarioError(ValueError):
    """A scenario file that cannot be read as written; the message names the file and the key."""


def scenario_path(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    return SCENARIO_DIR / f"{name_or_path}.yml" if not path.suffix else path


def read_scenario(name_or_path: str | Path) -> dict[str, Any]:
    """The scenario's raw mapping with its parents merged in, as if it had been written out whole."""
    return _read(scenario_path(name_or_path), ())


def _read(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    if path in chain:
        raise ScenarioError(f"{path.name}: extends itself through {' -> '.join(p.name for p in chain)}")
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict):
        raise ScenarioError(f"{path.name}: a scenario is a mapping, not {type(doc).__name__}")
    _check_keys(path, doc)
    parent_name = doc.pop("extends", None)
    deletes = doc.pop("delete", []) or []
    if parent_name is None:
        if deletes:
            raise ScenarioError(f"{path.name}: delete without extends: there is nothing to delete from")
        return doc
    parent = _read(scenario_path(str(parent_name)), (*chain, path))
    for key in NOT_INHERITED:
        parent.pop(key, None)
    for dotted in deletes:
        _delete(parent, str(dotted), path)
    merged = _merge(parent, doc, ())
    merged.setdefault("name", path.stem)
    return merged


def _check_keys(path: Path, doc: dict[str, Any]) -> None:
    for key in doc:
        if key not in TOP_LEVEL_KEYS:
            raise ScenarioError(
                f"{path.name}: unknown key {key!r} (known: {', '.join(sorted(TOP_LEVEL_KEYS))})"
            )
    server = doc.get("server") or {}
    if not isinstance(server, dict):
        raise ScenarioError(f"{path.name}: server must be a mapping")
    for key in server:
        if key not in SERVER_KEYS:
            raise ScenarioError(
                f"{path.name}: unknown key 'server.{key}' (known: {', '.join(sorted(SERVER_KEYS))})"
            )
    if not isinstance(doc.get("delete", []) or [], list):
        raise ScenarioError(f"{path.name}: delete must be a list of dotted paths")


def _delete(tree: dict[str, Any], dotted: str, path: Path) -> None:
    *parents, last = dotted.split(".")
    node: Any = tree
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or last not in node:
        raise ScenarioError(f"{path.name}: delete {dotted!r}: the scenario it extends has no such key")
    del node[last]


# Where mappings merge (a "*" stands for any key); everywhere else the child's value replaces the parent's.
MERGED = frozenset(
    {
        (),
        ("server",),
        ("server", "properties"),
        ("counters",),
        ("counters", "*"),
        ("volumes",),
        ("volume_space",),
        ("noise",),
        ("views",),
        ("views", "*"),
        ("moments",),
        ("custom_queries",),
    }
)


def _merges(at: tuple[str, ...]) -> bool:
    return at in MERGED or (len(at) == 2 and (at[0], "*") in MERGED)


def _merge(parent: dict[str, Any], child: dict[str, Any], at: tuple[str, ...]) -> dict[str, Any]:
    merged = copy.deepcopy(parent)
    for key, value in child.items():
        here = (*at, str(key))
        if _merges(here) and isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value, here)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
