"""docs/permissions.md's tables of what each collector reads and what each object needs, written from the
collectors' records and generators/permissions.py between markers (`reference.py` runs it with the metric
tables: `make generate`, `--check`). The text around the markers is prose, written by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from mssql_memory_exporter.collectors import COLLECTORS
from mssql_memory_exporter.collectors.base import CollectorRecord
from mssql_memory_exporter.collectors.perf import objects_named

from .generated_section import replace_between
from .permissions import (
    BY_NAME,
    OBJECTS,
    VAD,
    VSS,
    ObjectPermission,
    label_lookups,
    needing,
    objects_read,
    undeclared,
)

DOCS = Path("docs/permissions.md")
COLLECTORS_TABLE = "collectors"
OBJECTS_TABLE = "objects"
DENIED_LIST = "denied"
NONE = "none"
OLDER = "SQL Server 2016\N{EN DASH}2019, Managed Instance"
NEWER = "SQL Server 2022 and later"


def begin(name: str) -> str:
    return f"<!-- BEGIN generated permissions {name}: from the collectors' sections, `make generate` -->"


def end(name: str) -> str:
    return f"<!-- END generated permissions {name} -->"


def _union(names: Iterable[tuple[str, ...]]) -> str:
    found = dict.fromkeys(p for perms in names for p in perms)
    return ", ".join(f"`{p}`" for p in found) or NONE


def _reads(record: CollectorRecord, collectors: Sequence[CollectorRecord]) -> str:
    own = objects_read(record, collectors, lookups=False, needed=False)
    cells = []
    for name in own:
        text = f"`{name}`"
        objects = objects_named(record.reads)
        if name == "sys.dm_os_performance_counters" and objects:
            text += f" (object {', '.join(f'`{o}`' for o in objects)})"
        cells.append(text)
    reads = ", ".join(cells) or "no view (`SERVERPROPERTY()`)"
    through = [o for o in objects_read(record, collectors, lookups=False) if o not in own]
    if through:
        needed = ", ".join(f"`{n}`" for n in record.needs)
        reads += f"; through {needed}: " + ", ".join(f"`{o}`" for o in through)
    lookups = label_lookups(record, collectors)
    if lookups:
        reads += "; for the volume label of Windows paths only: " + ", ".join(f"`{o}`" for o in lookups)
    return reads


def collectors_table(collectors: Sequence[CollectorRecord]) -> str:
    lines = [
        f"| Collector | Reads | {OLDER} | {NEWER} |",
        "|---|---|---|---|",
    ]
    for record in collectors:
        objects = objects_read(record, collectors, lookups=False)
        needs = [BY_NAME[o] for o in objects]
        reads = _reads(record, collectors)
        lines.append(
            f"| `{record.name}` | {reads} | {_union(n.before_2022 for n in needs)} "
            f"| {_union(n.from_2022 for n in needs)} |"
        )
    return "\n".join(lines) + "\n"


def denied_list(collectors: Sequence[CollectorRecord]) -> str:
    """Who fails or loses series without each server-level permission ("When a permission is missing")."""

    def names(found: list[str]) -> str:
        return ", ".join(f"`{n}`" for n in found) or NONE

    return (
        f"- without `{VSS}` (2016\N{EN DASH}2019): {names(needing(VSS, collectors))};\n"
        f"- without `{VAD}`: {names(needing(VAD, collectors))}.\n"
    )


def _object_row(obj: ObjectPermission) -> str:
    page = f"[Microsoft's page]({obj.page})" if obj.page else ""
    note = "; ".join(part for part in (obj.note, page) if part)
    return f"| `{obj.name}` | {_union([obj.before_2022])} | {_union([obj.from_2022])} | {note or '—'} |"


def objects_table(collectors: Sequence[CollectorRecord]) -> str:
    read = {o for record in collectors for o in objects_read(record, collectors)}
    lines = [
        f"| Object | {OLDER} | {NEWER} | Notes |",
        "|---|---|---|---|",
    ]
    lines += [_object_row(o) for o in OBJECTS if o.name in read]
    return "\n".join(lines) + "\n"


def render(text: str, collectors: Sequence[CollectorRecord] = COLLECTORS) -> str:
    """The page with both tables rewritten between their markers."""
    missing = undeclared(collectors)
    if missing:
        raise LookupError(
            "no permission declared in generators/permissions.py OBJECTS for what these collectors read: "
            + "; ".join(f"{name}: {', '.join(objs)}" for name, objs in sorted(missing.items()))
        )
    tables = (
        (COLLECTORS_TABLE, collectors_table),
        (OBJECTS_TABLE, objects_table),
        (DENIED_LIST, denied_list),
    )
    for name, body in tables:
        hint = f"docs/permissions.md has no markers for its {name} table: add\n{begin(name)}\n{end(name)}"
        text = replace_between(text, begin(name), end(name), body(collectors), hint)
    return text
