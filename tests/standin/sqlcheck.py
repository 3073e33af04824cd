"""Strict static check of the T-SQL the exporter sends to the SQL Server stand-in.

No real SQL Server runs in the tests, so nothing else would notice a misspelt DMV, column or
function in the exporter's batch: the stand-in would answer it and the bug would reach a
user's first scrape. This module answers the way SQL Server would, with SQL Server's error
numbers and wording:

* the batch, and every string literal handed to ``sp_executesql``, must parse as T-SQL
  (sqlfluff's ``tsql`` dialect) -- else 102/105/113;
* every object in a FROM/JOIN/APPLY must be in the catalog of documented system objects
  (``catalog.yaml``) -- else 208; views and table-valued functions must be used as such
  (215/216/313/8144);
* every column must exist on an object in scope, aliases and qualifiers resolved -- else
  207/209/4104;
* functions, procedures, data types, variables must be known or declared -- else
  195/4121/2812/243/2715/137/1087; ``sp_executesql`` needs Unicode literals -- else 214;
* a ``sql_variant`` column selected as it is (not CAST or CONVERTed) is refused with
  :data:`SQL_VARIANT_UNCAST`: SQL Server would send it, but FreeTDS 1.3 cannot fetch it, so
  the exporter's first scrape through FreeTDS would fail. This one is not a SQL Server error.

Objects and columns carry the version that introduced them; ``server_version`` makes newer
ones missing, so the stand-in can imitate an older server. Columns may also name the platforms
that have them (catalog.yaml ``platforms``); ``platform`` makes the others' columns missing (207,
with a note naming where the catalog has the column). One deliberate difference from
SQL Server: a plain (not dynamic) reference to an object the version lacks is reported even
inside an IF branch that would not run. SQL Server's deferred name resolution would let that
pass, but the design requires such objects to be reached through sp_executesql, so that a
missing object comes back as a caught error rather than an aborted batch.

Parsing costs tens of milliseconds and the exporter sends the same batch every scrape, so
the analysis of a text is cached (bounded LRU) independently of catalog and version, and the
verdict for (text, catalog, version) is cached on top of it.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .sql_analysis import BIND, PARSE, RUN, Analysis, Pos, Query, Ref, analyze
from .sql_catalog import (
    PLATFORMS,
    VERSIONS,
    Catalog,
    available,
    load_catalog,
    release_of,
    version_index,
)

# The checker's interface (the stand-in's handler and the tests import from here; the modules behind it:
# sql_catalog.py for the documented objects per release, sql_analysis.py for parsing and walking a batch).
__all__ = [
    "SQL_VARIANT_UNCAST",
    "VERSIONS",
    "BatchInfo",
    "Catalog",
    "SqlProblem",
    "batch_info",
    "check_batch",
    "check_cache_info",
    "clear_caches",
    "find_problems",
    "load_catalog",
    "parse_cache_info",
    "referenced_objects",
    "release_of",
    "version_index",
]

_CHECK_CACHE_SIZE = 512

# Not a SQL Server error number (50000 is where user-defined messages start): the stand-in's own refusal.
SQL_VARIANT_UNCAST = 50000

# Parse errors are level 15, name-resolution errors level 16; the TDS ERROR token needs it.
_SEVERITY = {102: 15, 105: 15, 113: 15, 137: 15, 195: 15, 1087: 15}

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class SqlProblem:
    """One error as SQL Server would raise it.

    ``line`` is relative to the batch that contains the error, as SQL Server reports it:
    for dynamic SQL that is the ``sp_executesql`` string, and ``exec_line`` then gives the
    line of the EXEC in the enclosing batch.
    """

    number: int
    message: str
    line: int
    severity: int = 16
    exec_line: int | None = None


@dataclass(frozen=True)
class BatchInfo:
    """What a batch reads, for the stand-in to build its answer.

    ``objects``: lower-cased ``schema.object`` names in FROM/JOIN/APPLY, dynamic SQL included.
    ``sections``: result-set tag (first column literal aliased ``section``) -> objects read by
    that SELECT. ``dynamic_sql``: unescaped ``sp_executesql``/``EXEC(...)`` strings, outermost
    first. ``object_id_args``/``serverproperty_args``: literal arguments as written; SQL Server
    answers unknown ones with NULL rather than an error, so they are recorded, not checked.
    """

    objects: frozenset[str]
    sections: Mapping[str, frozenset[str]]
    dynamic_sql: tuple[str, ...]
    object_id_args: tuple[str, ...]
    serverproperty_args: tuple[str, ...]


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True, order=True)
class _Ranked:
    phase: int
    offset: int
    problem: SqlProblem = field(compare=False)


def _problem(number: int, message: str, line: int) -> SqlProblem:
    return SqlProblem(number, message, line, _SEVERITY.get(number, 16))


class _Judge:
    def __init__(
        self, analysis: Analysis, catalog: Catalog, version: str | None, platform: str | None = None
    ) -> None:
        self.a = analysis
        self.catalog = catalog
        self.version = version
        self.platform = platform
        self.found: list[_Ranked] = []

    def add(self, phase: int, pos: Pos, number: int, message: str) -> None:
        self.found.append(_Ranked(phase, pos.offset, _problem(number, message, pos.line)))

    def run(self) -> list[_Ranked]:
        for issue in self.a.issues:
            self.add(issue.phase, issue.pos, issue.number, issue.message)
        # Columns of a source that failed to resolve are not checked: SQL Server stops at 208.
        known: list[list[frozenset[str] | None]] = [self._sources(q) for q in self.a.queries]
        for qi, q in enumerate(self.a.queries):
            for ref in q.refs:
                self._ref(ref, qi, known)
        for ref in self.a.orphan_refs:
            self.add(BIND, ref.pos, 207, self._invalid_column(ref.parts[-1], None, None))
        self._functions()
        self._procedures()
        self._types()
        for call in self.a.system_variables:
            if call.parts[0].upper() not in self.catalog.system_variables:
                self.add(BIND, call.pos, 137, f'Must declare the scalar variable "{call.parts[0]}".')
        for dyn in self.a.dynamic:
            # The dynamic batch is compiled only if and when the EXEC runs, typically
            # behind an existence check; so here it is checked against the newest catalog
            # (typos), and the stand-in checks it against its version when it runs it.
            for inner in sorted(_Judge(dyn.analysis, self.catalog, None).run()):
                p = inner.problem
                moved = SqlProblem(p.number, p.message, p.line, p.severity, dyn.pos.line)
                self.found.append(_Ranked(RUN, dyn.pos.offset, moved))
        if any(r.phase == PARSE for r in self.found):
            # A batch that does not parse is neither bound nor run: only syntax errors.
            return [r for r in self.found if r.phase == PARSE]
        return self.found

    def _sources(self, q: Query) -> list[frozenset[str] | None]:
        cols: list[frozenset[str] | None] = []
        for src in q.sources:
            if src.kind != "object":
                cols.append(src.columns if src.kind in ("derived", "cte") else None)
                continue
            obj = self.catalog.object(src.key, self.version) if len(src.parts) <= 3 else None
            if obj is None:
                self.add(RUN, src.pos, 208, f"Invalid object name '{src.written}'.")
                cols.append(None)
                continue
            if obj.kind == "view" and src.args is not None:
                self.add(
                    BIND,
                    src.pos,
                    215,
                    f"Parameters supplied for object '{src.written}' which is not a function. "
                    "If the parameters are intended as a table hint, a WITH keyword is required.",
                )
            elif obj.kind == "tvf" and src.args is None:
                self.add(
                    BIND, src.pos, 216, f"Parameters were not supplied for the function '{src.written}'."
                )
            elif obj.kind == "tvf" and src.args is not None and src.args < len(obj.params):
                self.add(
                    BIND,
                    src.pos,
                    313,
                    "An insufficient number of arguments were supplied for the procedure or function "
                    f"{src.written}.",
                )
            elif obj.kind == "tvf" and src.args is not None and src.args > len(obj.params):
                self.add(
                    BIND,
                    src.pos,
                    8144,
                    f"Procedure or function {src.written} has too many arguments specified.",
                )
            cols.append(self.catalog.columns(src.key, self.version, self.platform))
        return cols

    def _ref(self, ref: Ref, qi: int, known: list[list[frozenset[str] | None]]) -> None:
        if ref.star:
            qualifier = ".".join(ref.parts[:-1]).lower()
            if not self._bind_qualifier(qualifier, qi, known)[0]:
                self.add(
                    BIND,
                    ref.pos,
                    4104,
                    f'The multi-part identifier "{".".join(ref.parts[:-1])}" could not be bound.',
                )
            return
        column = ref.parts[-1]
        if len(ref.parts) == 1:
            self._unqualified(ref, column, qi, known)
            return
        qualifier = ".".join(ref.parts[:-1]).lower()
        bound, columns = self._bind_qualifier(qualifier, qi, known)
        if not bound:
            self.add(
                BIND, ref.pos, 4104, f'The multi-part identifier "{".".join(ref.parts)}" could not be bound.'
            )
            return
        if columns is not None and column.lower() not in columns:
            self.add(BIND, ref.pos, 207, self._invalid_column(column, qualifier, qi))
            return
        self._variant(ref, qi)

    def _bind_qualifier(
        self, qualifier: str, qi: int | None, known: list[list[frozenset[str] | None]]
    ) -> tuple[bool, frozenset[str] | None]:
        """Whether ``qualifier`` names a source in scope (inner scopes first), and its
        columns (None: not known, accept any)."""
        while qi is not None:
            q = self.a.queries[qi]
            for src, cols in zip(q.sources, known[qi], strict=True):
                if qualifier in src.exposed():
                    return True, cols
            qi = q.parent
        return False, None

    def _unqualified(self, ref: Ref, column: str, qi: int, known: list[list[frozenset[str] | None]]) -> None:
        name = column.lower()
        if ref.in_order_by and name in self.a.queries[qi].aliases:
            return
        scope: int | None = qi
        while scope is not None:
            q = self.a.queries[scope]
            cols = known[scope]
            hits = sum(1 for c in cols if c is not None and name in c)
            if hits > 1:
                self.add(BIND, ref.pos, 209, f"Ambiguous column name '{column}'.")
                return
            if hits == 1:
                self._variant(ref, qi)
                return
            if any(c is None for c in cols):
                return
            scope = q.parent
        self.add(BIND, ref.pos, 207, self._invalid_column(column, None, qi))

    def _invalid_column(self, column: str, qualifier: str | None, qi: int | None) -> str:
        """SQL Server's 207 text; where the catalog has the column on other platforms only (catalog.yaml
        `platforms`), a note saying so, so a test author sees why a documented column was refused."""
        text = f"Invalid column name '{column}'."
        while qi is not None and self.platform is not None:
            q = self.a.queries[qi]
            for src in q.sources:
                if src.kind != "object" or (qualifier and qualifier not in src.exposed()):
                    continue
                obj = self.catalog.object(src.key, self.version)
                spec = obj.columns.get(column.lower()) if obj is not None else None
                if spec is not None and not spec.on(self.platform):
                    return (
                        f"{text} (stand-in catalog: {obj.name}.{spec.name} is on"
                        f" {', '.join(sorted(spec.platforms))} only, and this server plays {self.platform})"
                    )
            qi = q.parent
        return text

    def _variant(self, ref: Ref, qi: int) -> None:
        """A sql_variant column selected bare: FreeTDS cannot fetch the value, so refuse it here."""
        if not ref.selected:
            return
        name = ref.parts[-1].lower()
        qualifier = ".".join(ref.parts[:-1]).lower()
        for src in self.a.queries[qi].sources:
            if src.kind != "object" or (qualifier and qualifier not in src.exposed()):
                continue
            obj = self.catalog.object(src.key, self.version)
            column = obj.columns.get(name) if obj is not None else None
            if column is not None and column.type.lower() == "sql_variant":
                self.add(
                    BIND,
                    ref.pos,
                    SQL_VARIANT_UNCAST,
                    f"Column '{ref.parts[-1]}' of {src.written} is sql_variant, which FreeTDS cannot fetch:"
                    " CAST it to a plain type in the SELECT (stand-in check, not a SQL Server error).",
                )
                return

    def _functions(self) -> None:
        for call in self.a.functions:
            if len(call.parts) == 1:
                spec = self.catalog.functions.get(call.parts[0].upper())
                if spec is None or not available(spec[0], spec[1], self.version):
                    self.add(
                        PARSE,
                        call.pos,
                        195,
                        f"'{call.parts[0]}' is not a recognized built-in function name.",
                    )
            elif ".".join(call.parts).upper() not in self.catalog.functions:
                self.add(
                    BIND,
                    call.pos,
                    4121,
                    f'Cannot find either column "{call.parts[0]}" or the user-defined function or aggregate '
                    f'"{".".join(call.parts)}", or the name is ambiguous.',
                )

    def _procedures(self) -> None:
        for call in self.a.procedures:
            parts = tuple(p.lower() for p in call.parts)
            candidates = {".".join(parts[-2:])} if len(parts) >= 2 else {f"sys.{parts[0]}", f"dbo.{parts[0]}"}
            if not candidates & self.catalog.procedures:
                self.add(RUN, call.pos, 2812, f"Could not find stored procedure '{'.'.join(call.parts)}'.")

    def _types(self) -> None:
        for use in self.a.type_uses:
            if len(use.parts) == 1 and use.parts[0].lower() in self.catalog.types:
                continue
            written = ".".join(use.parts)
            if use.declare_ordinal is None:
                self.add(BIND, use.pos, 243, f"Type {written} is not a defined system type.")
            else:
                self.add(
                    BIND,
                    use.pos,
                    2715,
                    f"Column, parameter, or variable #{use.declare_ordinal}: "
                    f"Cannot find data type {written}.",
                )


@functools.lru_cache(maxsize=_CHECK_CACHE_SIZE)
def _problems(
    sql: str, catalog: Catalog, server_version: str | None, platform: str | None = None
) -> tuple[SqlProblem, ...]:
    if server_version is not None:
        version_index(server_version)  # reject typos in the version early
    if platform is not None and platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; expected one of {sorted(PLATFORMS)}")
    ranked = _Judge(analyze(sql), catalog, server_version, platform).run()
    return tuple(r.problem for r in sorted(ranked))


# --------------------------------------------------------------------------- public API


def find_problems(
    sql: str, catalog: Catalog, server_version: str | None = None, platform: str | None = None
) -> list[SqlProblem]:
    """Every problem in ``sql``, in the order SQL Server would meet them."""
    return list(_problems(sql, catalog, server_version, platform))


def check_batch(
    sql: str, catalog: Catalog, server_version: str | None = None, platform: str | None = None
) -> SqlProblem | None:
    """The error SQL Server would raise first for ``sql``, or None if it would run. ``platform``
    (sql_server, azure_sql_managed_instance, azure_sql_database; None: any) refuses, with 207, a column
    the catalog lists on other platforms only.

    Dynamic SQL strings are checked against the whole catalog whatever ``server_version``
    says, because SQL Server only compiles them when they run (usually behind an existence
    check). To imitate an old server executing one of them, check the string itself (see
    :attr:`BatchInfo.dynamic_sql`) with that version.
    """
    found = _problems(sql, catalog, server_version, platform)
    return found[0] if found else None


def _collect(analysis: Analysis) -> Iterable[Analysis]:
    yield analysis
    for dyn in analysis.dynamic:
        yield from _collect(dyn.analysis)


def batch_info(sql: str) -> BatchInfo:
    """Objects, sections, dynamic SQL and literal arguments of ``sql`` (cached parse)."""
    root = analyze(sql)
    objects: set[str] = set()
    sections: dict[str, set[str]] = {}
    object_ids: list[str] = []
    properties: list[str] = []
    for a in _collect(root):
        for q in a.queries:
            objects.update(s.key for s in q.sources if s.kind == "object")
        for tag, objs in a.sections:
            sections.setdefault(tag, set()).update(objs)
        object_ids.extend(a.object_id_args)
        properties.extend(a.serverproperty_args)
    return BatchInfo(
        objects=frozenset(objects),
        sections=types.MappingProxyType({k: frozenset(v) for k, v in sections.items()}),
        dynamic_sql=tuple(d.text for a in _collect(root) for d in a.dynamic),
        object_id_args=tuple(dict.fromkeys(object_ids)),
        serverproperty_args=tuple(dict.fromkeys(properties)),
    )


def referenced_objects(sql: str) -> set[str]:
    """Lower-cased ``schema.object`` names the batch reads, dynamic SQL included."""
    return set(batch_info(sql).objects)


def parse_cache_info() -> functools._CacheInfo:
    """Hits/misses of the parse cache (keyed by SQL text only)."""
    return analyze.cache_info()


def check_cache_info() -> functools._CacheInfo:
    """Hits/misses of the verdict cache (keyed by text, catalog and version)."""
    return _problems.cache_info()


def clear_caches() -> None:
    analyze.cache_clear()
    _problems.cache_clear()
