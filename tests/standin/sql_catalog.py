"""The documented SQL Server catalog the stand-in checks batches against: which objects and columns each
release has (catalog.yaml), and release order by ProductVersion."""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

DEFAULT_CATALOG = Path(__file__).with_name("catalog.yaml")

# Oldest first. "2008 R2 SP1" is in the list because two objects arrived with that service
# pack; "2012 SP4" is not, because features it gained skipped 2014 and a linear order
# cannot express that (see the notes in catalog.yaml).
VERSIONS: tuple[str, ...] = (
    "2005",
    "2008",
    "2008 R2",
    "2008 R2 SP1",
    "2012",
    "2014",
    "2016",
    "2016 SP1",
    "2016 SP2",
    "2017",
    "2019",
    "2022",
    "2025",
)
_VERSION_INDEX = {v: i for i, v in enumerate(VERSIONS)}


def version_index(version: str) -> int:
    """Position of ``version`` in :data:`VERSIONS`; raises ``ValueError`` for unknown ones."""
    try:
        return _VERSION_INDEX[version]
    except KeyError:
        raise ValueError(f"unknown SQL Server version {version!r}; expected one of {VERSIONS}") from None


# SERVERPROPERTY('ProductVersion') major.minor -> release, with the first build of each
# service pack the catalog distinguishes (columns arrived in 2008 R2 SP1, 2016 SP1, SP2).
_RELEASES: dict[tuple[int, int], tuple[tuple[int, str], ...]] = {
    (9, 0): ((0, "2005"),),
    (10, 0): ((0, "2008"),),
    (10, 50): ((0, "2008 R2"), (2500, "2008 R2 SP1")),
    (11, 0): ((0, "2012"),),
    (12, 0): ((0, "2014"),),
    (13, 0): ((0, "2016"), (4001, "2016 SP1"), (5026, "2016 SP2")),
    (14, 0): ((0, "2017"),),
    (15, 0): ((0, "2019"),),
    (16, 0): ((0, "2022"),),
    (17, 0): ((0, "2025"),),
}


def release_of(product_version: str) -> str | None:
    """The :data:`VERSIONS` entry for a ProductVersion such as ``13.0.5026.0`` ("2016 SP2").

    None for releases newer than the catalog knows, which :func:`check_batch` treats as
    the newest server. Raises ``ValueError`` for text that is not a version number.
    """
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.(\d+))?(?:\.\d+)?\s*", product_version)
    if match is None:
        raise ValueError(f"not a SQL Server ProductVersion: {product_version!r}")
    major, minor, build = int(match[1]), int(match[2]), int(match[3] or 0)
    if major > max(m for m, _ in _RELEASES):
        return None
    steps = _RELEASES.get((major, minor))
    if steps is None:
        raise ValueError(f"unknown SQL Server release {product_version!r}")
    return [name for first_build, name in steps if build >= first_build][-1]


def available(since: str | None, until: str | None, version: str | None) -> bool:
    # No version means "the newest server": everything that was not removed.
    if version is None:
        return until is None
    v = version_index(version)
    if since is not None and v < version_index(since):
        return False
    return until is None or v <= version_index(until)


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    type: str
    nullable: bool | None = None
    since: str | None = None
    until: str | None = None
    # Platforms whose page lists the column; empty: every platform its object is on.
    platforms: frozenset[str] = frozenset()

    def on(self, platform: str | None) -> bool:
        """Whether the column exists on `platform` (None: any platform, as the version-only checks ask)."""
        return platform is None or not self.platforms or platform in self.platforms


@dataclass(frozen=True)
class CatalogObject:
    name: str
    kind: Literal["view", "tvf"]
    columns: Mapping[str, CatalogColumn]
    params: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    doc: str = ""
    # Platforms whose pages list the object ("Applies to"); empty: every platform the catalog plays.
    platforms: frozenset[str] = frozenset()


@dataclass(frozen=True, eq=False)
class Catalog:
    """Documented system objects and language elements. Hashed by identity (cache key)."""

    objects: Mapping[str, CatalogObject]
    functions: Mapping[str, tuple[str | None, str | None]]
    serverproperty: frozenset[str]
    procedures: frozenset[str]
    system_variables: frozenset[str]
    types: frozenset[str]

    def object(self, name: str, version: str | None = None) -> CatalogObject | None:
        obj = self.objects.get(name.lower())
        if obj is None or not available(obj.since, obj.until, version):
            return None
        return obj

    def columns(self, name: str, version: str | None = None, platform: str | None = None) -> frozenset[str]:
        """Lower-cased column names of ``name`` that exist on ``version`` and, if given, ``platform``."""
        obj = self.object(name, version)
        if obj is None:
            return frozenset()
        return frozenset(
            k for k, c in obj.columns.items() if available(c.since, c.until, version) and c.on(platform)
        )


def _opt_version(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    text = str(raw)
    if text not in _VERSION_INDEX:
        raise ValueError(f"{where}: unknown version {text!r}")
    return text


PLATFORMS = frozenset({"sql_server", "azure_sql_managed_instance", "azure_sql_database"})


def _platforms(raw: Any, where: str) -> frozenset[str]:
    found = frozenset(str(p) for p in raw or ())
    if found - PLATFORMS:
        raise ValueError(
            f"{where}: unknown platform(s) {sorted(found - PLATFORMS)}; known: {sorted(PLATFORMS)}"
        )
    return found


def load_catalog(path: str | Path = DEFAULT_CATALOG) -> Catalog:
    """Read ``catalog.yaml`` (format documented at its top) into a :class:`Catalog`."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    objects: dict[str, CatalogObject] = {}
    for name, spec in (data.get("objects") or {}).items():
        kind = spec.get("kind", "view")
        if kind not in ("view", "tvf"):
            raise ValueError(f"{name}: kind must be view or tvf, not {kind!r}")
        object_platforms = _platforms(spec.get("platforms"), name)
        cols: dict[str, CatalogColumn] = {}
        for col, cspec in (spec.get("columns") or {}).items():
            col_platforms = _platforms(cspec.get("platforms"), f"{name}.{col}")
            if object_platforms and col_platforms - object_platforms:
                raise ValueError(
                    f"{name}.{col}: platforms {sorted(col_platforms - object_platforms)} lack the object"
                    f" itself (it is on {sorted(object_platforms)})"
                )
            cols[col.lower()] = CatalogColumn(
                name=col,
                type=str(cspec["type"]),
                nullable=cspec.get("nullable"),
                since=_opt_version(cspec.get("since"), f"{name}.{col}"),
                until=_opt_version(cspec.get("until"), f"{name}.{col}"),
                platforms=col_platforms,
            )
        objects[name.lower()] = CatalogObject(
            name=name,
            kind=kind,
            columns=types.MappingProxyType(cols),
            params=tuple(p["name"] for p in spec.get("params") or ()),
            since=_opt_version(spec.get("since"), name),
            until=_opt_version(spec.get("until"), name),
            doc=spec.get("doc", ""),
            platforms=object_platforms,
        )
    funcs: dict[str, tuple[str | None, str | None]] = {}
    for entry in data.get("functions") or ():
        if isinstance(entry, str):
            funcs[entry.upper()] = (None, None)
        else:
            fname = str(entry["name"])
            funcs[fname.upper()] = (
                _opt_version(entry.get("since"), fname),
                _opt_version(entry.get("until"), fname),
            )
    return Catalog(
        objects=types.MappingProxyType(objects),
        functions=types.MappingProxyType(funcs),
        serverproperty=frozenset(str(p) for p in data.get("serverproperty") or ()),
        procedures=frozenset(str(p).lower() for p in data.get("procedures") or ()),
        system_variables=frozenset(str(v).upper() for v in data.get("system_variables") or ()),
        types=frozenset(str(t).lower() for t in data.get("types") or ()),
    )
