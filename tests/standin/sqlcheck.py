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
  195/4121/2812/243/2715/137/1087; ``sp_executesql`` needs Unicode literals -- else 214.

Objects and columns carry the version that introduced them; ``server_version`` makes newer
ones missing, so the stand-in can imitate an older server. One deliberate difference from
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
import re
import threading
import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml
from sqlfluff.core import FluffConfig, Linter
from sqlfluff.core.parser import BaseSegment

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
)
_VERSION_INDEX = {v: i for i, v in enumerate(VERSIONS)}

_PARSE_CACHE_SIZE = 256
_CHECK_CACHE_SIZE = 512

# Parse errors are level 15, name-resolution errors level 16; the TDS ERROR token needs it.
_SEVERITY = {102: 15, 105: 15, 113: 15, 137: 15, 195: 15, 1087: 15}

# SQL Server reports errors in this order: the whole batch is parsed (phase 1) and bound
# (phase 2) before anything runs; missing tables (deferred name resolution), unknown
# procedures and dynamic SQL fail only when their statement executes (phase 3).
_PARSE, _BIND, _RUN = 1, 2, 3


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


def _available(since: str | None, until: str | None, version: str | None) -> bool:
    # No version means "the newest server": everything that was not removed.
    if version is None:
        return until is None
    v = version_index(version)
    if since is not None and v < version_index(since):
        return False
    return until is None or v <= version_index(until)


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


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True)
class CatalogColumn:
    name: str
    type: str
    nullable: bool | None = None
    since: str | None = None
    until: str | None = None


@dataclass(frozen=True)
class CatalogObject:
    name: str
    kind: Literal["view", "tvf"]
    columns: Mapping[str, CatalogColumn]
    params: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    doc: str = ""


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
        if obj is None or not _available(obj.since, obj.until, version):
            return None
        return obj

    def columns(self, name: str, version: str | None = None) -> frozenset[str]:
        """Lower-cased column names of ``name`` that exist on ``version``."""
        obj = self.object(name, version)
        if obj is None:
            return frozenset()
        return frozenset(k for k, c in obj.columns.items() if _available(c.since, c.until, version))


def _opt_version(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    text = str(raw)
    if text not in _VERSION_INDEX:
        raise ValueError(f"{where}: unknown version {text!r}")
    return text


def load_catalog(path: str | Path = DEFAULT_CATALOG) -> Catalog:
    """Read ``catalog.yaml`` (format documented at its top) into a :class:`Catalog`."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    objects: dict[str, CatalogObject] = {}
    for name, spec in (data.get("objects") or {}).items():
        kind = spec.get("kind", "view")
        if kind not in ("view", "tvf"):
            raise ValueError(f"{name}: kind must be view or tvf, not {kind!r}")
        cols: dict[str, CatalogColumn] = {}
        for col, cspec in (spec.get("columns") or {}).items():
            cols[col.lower()] = CatalogColumn(
                name=col,
                type=str(cspec["type"]),
                nullable=cspec.get("nullable"),
                since=_opt_version(cspec.get("since"), f"{name}.{col}"),
                until=_opt_version(cspec.get("until"), f"{name}.{col}"),
            )
        objects[name.lower()] = CatalogObject(
            name=name,
            kind=kind,
            columns=types.MappingProxyType(cols),
            params=tuple(p["name"] for p in spec.get("params") or ()),
            since=_opt_version(spec.get("since"), name),
            until=_opt_version(spec.get("until"), name),
            doc=spec.get("doc", ""),
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


# --------------------------------------------------------------------------- analysis model
# The analysis of a text depends on nothing but the text, so it can be cached once and
# judged against any catalog and version cheaply.


@dataclass(frozen=True)
class _Pos:
    line: int
    offset: int


@dataclass(frozen=True)
class _Issue:
    """A problem found without the catalog (syntax, undeclared variables)."""

    phase: int
    pos: _Pos
    number: int
    message: str


@dataclass(frozen=True)
class _Source:
    kind: Literal["object", "derived", "cte", "temp", "tablevar"]
    parts: tuple[str, ...]  # as written, unquoted
    alias: str | None
    pos: _Pos
    columns: frozenset[str] | None = None  # derived/CTE output columns, None = unknown
    args: int | None = None  # number of arguments when called like a function

    @property
    def written(self) -> str:
        return ".".join(self.parts)

    @property
    def key(self) -> str:
        # Three-part names (master.sys.x) resolve like two-part ones for system objects.
        parts = self.parts[-2:] if len(self.parts) >= 2 else self.parts
        return ".".join(parts).lower()

    def exposed(self) -> frozenset[str]:
        """Names by which a column of this source may be qualified."""
        if self.alias is not None:
            return frozenset({self.alias.lower()})
        names = {".".join(self.parts[i:]).lower() for i in range(len(self.parts))}
        return frozenset(names)


@dataclass(frozen=True)
class _Ref:
    parts: tuple[str, ...]
    pos: _Pos
    in_order_by: bool = False
    star: bool = False


@dataclass(frozen=True)
class _Query:
    sources: tuple[_Source, ...]
    refs: tuple[_Ref, ...]
    aliases: frozenset[str]
    parent: int | None


@dataclass(frozen=True)
class _Call:
    parts: tuple[str, ...]
    pos: _Pos


@dataclass(frozen=True)
class _TypeUse:
    parts: tuple[str, ...]
    pos: _Pos
    declare_ordinal: int | None  # set inside DECLARE (Msg 2715), None in CAST/CONVERT (243)


@dataclass(frozen=True)
class _Dynamic:
    pos: _Pos
    text: str
    analysis: _Analysis


@dataclass(frozen=True)
class _Analysis:
    issues: tuple[_Issue, ...]
    queries: tuple[_Query, ...]
    orphan_refs: tuple[_Ref, ...]  # column names outside any query (e.g. IF col = 1)
    functions: tuple[_Call, ...]
    procedures: tuple[_Call, ...]
    system_variables: tuple[_Call, ...]
    type_uses: tuple[_TypeUse, ...]
    dynamic: tuple[_Dynamic, ...]
    sections: tuple[tuple[str, frozenset[str]], ...]
    object_id_args: tuple[str, ...]
    serverproperty_args: tuple[str, ...]


# --------------------------------------------------------------------------- parsing

_linter_lock = threading.Lock()


@functools.cache
def _linter() -> Linter:
    # raw templater: the default (jinja) would rewrite "{{ ... }}" inside T-SQL strings.
    # No size limit: sqlfluff otherwise skips texts over 20 kB, which would pass unchecked.
    return Linter(
        config=FluffConfig(overrides={"dialect": "tsql", "templater": "raw", "large_file_skip_byte_limit": 0})
    )


def _parse(sql: str) -> tuple[BaseSegment | None, list[Any]]:
    # sqlfluff keeps per-parse state on the linter; the stand-in may serve several
    # connections from threads.
    with _linter_lock:
        parsed = _linter().parse_string(sql)
    return parsed.tree, list(parsed.violations)


_NOISE = frozenset(
    {"whitespace", "newline", "comment", "inline_comment", "block_comment", "indent", "dedent"}
)


def _kids(seg: BaseSegment) -> list[BaseSegment]:
    return [c for c in seg.segments if not c.is_meta and not c.is_type(*_NOISE)]


def _pos(seg: BaseSegment) -> _Pos:
    marker = seg.pos_marker
    assert marker is not None
    return _Pos(marker.line_no, marker.source_slice.start)


def _unquote_ident(raw: str) -> str:
    if raw.startswith("[") and raw.endswith("]"):
        return raw[1:-1].replace("]]", "]")
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        return raw[1:-1].replace('""', '"')
    return raw


def _literal_value(raw: str) -> tuple[str, bool]:
    """Text of a string literal and whether it was Unicode (N'...')."""
    unicode = raw[:1] in ("N", "n")
    body = raw[1:] if unicode else raw
    return body[1:-1].replace("''", "'"), unicode


def _name_parts(seg: BaseSegment) -> tuple[str, ...]:
    """Identifier parts of a dotted name segment, unquoted; keywords count as names."""
    return tuple(_unquote_ident(k.raw) for k in _kids(seg) if not k.is_type("dot"))


def _first_token(seg: BaseSegment) -> BaseSegment | None:
    for raw in seg.raw_segments:
        if not raw.is_meta and not raw.is_type(*_NOISE) and raw.raw.strip():
            return raw
    return None


def _sole_literal(expr: BaseSegment, kind: str = "quoted_literal") -> BaseSegment | None:
    """The quoted literal (or other ``kind``) an argument consists of, if it is nothing else."""
    node = expr
    while True:
        if node.is_type(kind):
            return node
        kids = [k for k in _kids(node) if not k.is_type("start_bracket", "end_bracket")]
        if len(kids) != 1:
            return None
        node = kids[0]


def _executesql_name(parts: tuple[str, ...]) -> bool:
    low = tuple(p.lower() for p in parts)
    return low[-1:] == ("sp_executesql",) and low[:-1] in ((), ("sys",), ("master", "sys"), ("master", ""))


_PARAM_NAME = re.compile(r"@[A-Za-z_#@$][\w#@$]*")


@dataclass
class _QueryBuilder:
    parent: int | None
    index: int = -1
    sources: list[_Source] = field(default_factory=list)
    refs: list[_Ref] = field(default_factory=list)
    aliases: set[str] = field(default_factory=set)
    output: list[str] | None = field(default_factory=list)  # None once a * is selected


@dataclass(frozen=True)
class _Ctx:
    query: _QueryBuilder | None = None
    ctes: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    in_order_by: bool = False
    lenient: bool = False  # inside INSERT/UPDATE/DELETE/MERGE, whose targets are not modelled
    first_statement: bool = False


class _Walker:
    """Turns a sqlfluff tree into the catalog-independent :class:`_Analysis`."""

    def __init__(self, sql: str, declared: frozenset[str]) -> None:
        self.sql = sql
        self.issues: list[_Issue] = []
        self.queries: list[_QueryBuilder] = []
        self.orphans: list[_Ref] = []
        self.functions: list[_Call] = []
        self.procedures: list[_Call] = []
        self.sysvars: list[_Call] = []
        self.type_uses: list[_TypeUse] = []
        self.dynamic: list[_Dynamic] = []
        self.sections: list[tuple[str, frozenset[str]]] = []
        self.object_id_args: list[str] = []
        self.serverproperty_args: list[str] = []
        # Variables must be declared textually before use; sp_executesql parameters are
        # declared before the first character of the dynamic batch.
        self.declared: dict[str, int] = {name.lower(): -1 for name in declared}
        # Assignments to variables, so that EXEC sp_executesql @sql can be followed to the
        # string: (offset, literal or None when assigned something else).
        self.assigned: dict[str, list[tuple[int, BaseSegment | None]]] = {}

    # ----------------------------------------------------------------- entry

    def run(self, tree: BaseSegment | None, violations: list[Any]) -> _Analysis:
        if tree is not None:
            self._file(tree)
        if violations and not any(i.number in (102, 105, 113) for i in self.issues):
            # A parse failure sqlfluff did not attach to a segment: report where it says.
            v = violations[0]
            line = int(getattr(v, "line_no", 1) or 1)
            self._issue(_PARSE, _Pos(line, 0), 102, f"Incorrect syntax near '{self._near_line(line)}'.")
        return _Analysis(
            issues=tuple(self.issues),
            queries=tuple(
                _Query(tuple(q.sources), tuple(q.refs), frozenset(q.aliases), q.parent) for q in self.queries
            ),
            orphan_refs=tuple(self.orphans),
            functions=tuple(self.functions),
            procedures=tuple(self.procedures),
            system_variables=tuple(self.sysvars),
            type_uses=tuple(self.type_uses),
            dynamic=tuple(self.dynamic),
            sections=tuple(self.sections),
            object_id_args=tuple(self.object_id_args),
            serverproperty_args=tuple(self.serverproperty_args),
        )

    def _near_line(self, line: int) -> str:
        lines = self.sql.splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        return text.split()[0] if text else ""

    def _issue(self, phase: int, pos: _Pos, number: int, message: str) -> None:
        self.issues.append(_Issue(phase, pos, number, message))

    # ----------------------------------------------------------------- structure

    def _file(self, tree: BaseSegment) -> None:
        # sqlfluff splits at GO, but GO is a client-tool separator: over TDS the server gets
        # one batch and reads GO as a syntax error (go_statement handler).
        first = True
        for seg in _kids(tree):
            for k in _kids(seg) if seg.is_type("batch") else [seg]:
                is_statement = k.is_type("statement")
                self._visit(k, _Ctx(first_statement=first and is_statement))
                first = first and not is_statement

    def _visit(self, seg: BaseSegment, ctx: _Ctx) -> None:
        t = seg.get_type()
        handler = _HANDLERS.get(t)
        if handler is not None:
            handler(self, seg, ctx)
            return
        if seg.is_type("update_statement", "delete_statement", "insert_statement", "merge_statement"):
            ctx = replace(ctx, lenient=True)
        # Only the statement itself can be "first in the batch", never what it contains.
        ctx = replace(ctx, first_statement=False)
        for k in _kids(seg):
            self._visit(k, ctx)

    def _statement(self, seg: BaseSegment, ctx: _Ctx) -> None:
        kids = _kids(seg)
        if kids and kids[0].is_type("select_statement", "with_compound_statement", "set_expression"):
            self._record_section(kids[0])
        for n, k in enumerate(kids):
            self._visit(k, ctx if n == 0 else replace(ctx, first_statement=False))

    def _record_section(self, seg: BaseSegment) -> None:
        # The tag is the first column of the statement's own SELECT, not of a CTE in it.
        query = seg
        if query.is_type("with_compound_statement"):
            mains = [k for k in _kids(query) if k.is_type("select_statement", "set_expression")]
            if not mains:
                return
            query = mains[-1]
        if query.is_type("set_expression"):
            query = next((k for k in _kids(query) if k.is_type("select_statement")), query)
        clause = next((k for k in _kids(query) if k.is_type("select_clause")), None)
        first = (
            next((k for k in _kids(clause) if k.is_type("select_clause_element")), None) if clause else None
        )
        if first is None:
            return
        kids = _kids(first)
        alias = next((k for k in kids if k.is_type("alias_expression")), None)
        value = next((k for k in kids if k.is_type("quoted_literal")), None)
        if alias is None or value is None:
            return
        # Both "N'x' AS section" and "section = N'x'" spell the alias.
        idents = [k for k in _kids(alias) if k.is_type("naked_identifier", "quoted_identifier")]
        if not idents or _unquote_ident(idents[-1].raw).lower() != "section":
            return
        tag, _ = _literal_value(value.raw)
        self.sections.append((tag, frozenset(self._objects_in(seg))))

    def _objects_in(self, seg: BaseSegment) -> Iterator[str]:
        ctes = {
            _unquote_ident(_kids(c)[0].raw).lower() for c in seg.recursive_crawl("common_table_expression")
        }
        for te in seg.recursive_crawl("table_expression"):
            kids = _kids(te)
            if not kids:
                continue
            head = kids[0]
            if head.is_type("table_reference"):
                parts = _name_parts(head)
            elif head.is_type("function"):
                parts = _name_parts(_kids(head)[0])
            else:
                continue
            if not parts or parts[0][:1] in ("#", "@"):
                continue
            if len(parts) == 1 and parts[0].lower() in ctes:
                continue
            yield ".".join(parts[-2:]).lower()

    # ----------------------------------------------------------------- errors in the text

    def _unparsable(self, seg: BaseSegment, ctx: _Ctx) -> None:
        located = self._locate(seg)
        if located is None:
            return
        raw, pos = located
        rest = self.sql[pos.offset :]
        if rest[:1] == "'" or rest[:2].upper() == "N'":
            body = rest[2:] if rest[:1] in "Nn" else rest[1:]
            if not _closes(body):
                self._issue(_PARSE, pos, 105, f"Unclosed quotation mark after the character string '{body}'.")
                return
        if rest.startswith("/*") and "*/" not in rest:
            self._issue(_PARSE, pos, 113, "Missing end comment mark '*/'.")
            return
        self._issue(_PARSE, pos, 102, f"Incorrect syntax near '{raw}'.")

    def _locate(self, seg: BaseSegment) -> tuple[str, _Pos] | None:
        """The token SQL Server would complain about in an unparsable section.

        sqlfluff gives up on a whole compound statement (a TRY block with one broken
        SELECT in it is unparsable from its BEGIN), so the section is cut at ';' and at the
        block keywords and each piece is parsed alone: the first piece that fails holds the
        error. Only runs for broken batches.
        """
        tokens = [t for t in seg.raw_segments if not t.is_meta and not t.is_type(*_NOISE) and t.raw.strip()]
        if not tokens:
            return None
        first = tokens[0]
        pieces: list[list[BaseSegment]] = [[]]
        case_depth = 0  # ELSE and END also belong to CASE expressions, which must stay whole
        for t in tokens:
            word = t.raw.upper()
            if word == "CASE":
                case_depth += 1
            elif word == "END" and case_depth:
                case_depth -= 1
                pieces[-1].append(t)
                continue
            if t.raw == ";" or (word in _BLOCK_WORDS and not (case_depth and word == "ELSE")):
                pieces.append([])
            else:
                pieces[-1].append(t)
        if len(pieces) == 1:
            return first.raw, _pos(first)  # nothing to cut: re-parsing would fail the same way
        for piece in pieces:
            if not piece:
                continue
            start = _pos(piece[0]).offset
            end = _pos(piece[-1]).offset + len(piece[-1].raw)
            tree, _ = _parse(self.sql[start:end])
            bad = next(tree.recursive_crawl("unparsable"), None) if tree is not None else None
            token = _first_token(bad) if bad is not None else None
            if token is not None:
                offset = start + _pos(token).offset
                return token.raw, _Pos(self.sql.count("\n", 0, offset) + 1, offset)
        return first.raw, _pos(first)

    def _go(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._issue(_PARSE, _pos(seg), 102, "Incorrect syntax near 'GO'.")

    # ----------------------------------------------------------------- queries

    def _new_query(self, ctx: _Ctx) -> _QueryBuilder:
        qb = _QueryBuilder(parent=ctx.query.index if ctx.query is not None else None)
        qb.index = len(self.queries)
        self.queries.append(qb)
        return qb

    def _select(self, seg: BaseSegment, ctx: _Ctx) -> _QueryBuilder:
        qb = self._new_query(ctx)
        inner = _Ctx(qb, ctx.ctes, False, ctx.lenient)
        kids = _kids(seg)
        # Sources first: the select list may name them before FROM appears in the text.
        for k in kids:
            if k.is_type("from_clause"):
                self._from_clause(k, inner, qb)
        for k in kids:
            if k.is_type("from_clause", "into_table_clause", "option_clause"):
                continue
            if k.is_type("select_clause"):
                self._select_clause(k, inner, qb)
            elif k.is_type("orderby_clause"):
                self._visit_children(k, _Ctx(qb, ctx.ctes, True, ctx.lenient))
            else:
                self._visit(k, inner)
        return qb

    def _select_handler(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._select(seg, ctx)

    def _visit_children(self, seg: BaseSegment, ctx: _Ctx) -> None:
        for k in _kids(seg):
            self._visit(k, ctx)

    def _select_clause(self, seg: BaseSegment, ctx: _Ctx, qb: _QueryBuilder) -> None:
        for element in _kids(seg):
            if not element.is_type("select_clause_element"):
                self._visit(element, ctx)  # TOP (n), DISTINCT ...
                continue
            kids = _kids(element)
            alias = next((k for k in kids if k.is_type("alias_expression")), None)
            name: str | None = None
            if alias is not None:
                idents = [k for k in _kids(alias) if k.is_type("naked_identifier", "quoted_identifier")]
                if idents:
                    name = _unquote_ident(idents[-1].raw)
                    qb.aliases.add(name.lower())
            body = [k for k in kids if k is not alias]
            if name is None and len(body) == 1 and body[0].is_type("column_reference"):
                name = _name_parts(body[0])[-1]
            if len(body) == 1 and body[0].is_type("wildcard_expression"):
                qb.output = None
            if name is not None and qb.output is not None:
                qb.output.append(name.lower())
            for k in body:
                self._visit(k, ctx)

    def _from_clause(self, seg: BaseSegment, ctx: _Ctx, qb: _QueryBuilder) -> None:
        for k in _kids(seg):
            if k.is_type("from_expression_element"):
                self._from_element(k, ctx, qb)
            elif k.is_type("from_expression", "join_clause"):
                self._from_clause(k, ctx, qb)
            elif k.is_type("join_on_condition"):
                self._visit_children(k, ctx)
            elif k.is_type("keyword", "comma"):
                continue
            else:
                self._visit(k, ctx)

    def _from_element(self, seg: BaseSegment, ctx: _Ctx, qb: _QueryBuilder) -> None:
        kids = _kids(seg)
        alias_seg = next((k for k in kids if k.is_type("alias_expression")), None)
        alias = None
        if alias_seg is not None:
            idents = [k for k in _kids(alias_seg) if k.is_type("naked_identifier", "quoted_identifier")]
            alias = _unquote_ident(idents[-1].raw) if idents else None
        table = next((k for k in kids if k.is_type("table_expression")), None)
        if table is None:
            self._visit_children(seg, ctx)
            return
        head = _kids(table)[0]
        if head.is_type("table_reference"):
            parts = _name_parts(head)
            pos = _pos(head)
            if parts[0].startswith("#"):
                qb.sources.append(_Source("temp", parts, alias, pos))
            elif parts[0].startswith("@"):
                self._use_variable(parts[0], pos, table_variable=True)
                qb.sources.append(_Source("tablevar", parts, alias, pos))
            elif len(parts) == 1 and parts[0].lower() in ctx.ctes:
                qb.sources.append(_Source("cte", parts, alias, pos, columns=ctx.ctes[parts[0].lower()]))
            else:
                qb.sources.append(_Source("object", parts, alias, pos))
        elif head.is_type("function"):
            fkids = _kids(head)
            parts = _name_parts(fkids[0])
            args = self._call_args(head)
            qb.sources.append(_Source("object", parts, alias, _pos(head), args=len(args)))
            for arg in args:
                self._visit(arg, ctx)
        elif head.is_type("bracketed"):
            inner = next((k for k in _kids(head) if k.is_type("select_statement", "set_expression")), None)
            if inner is None:
                self._visit_children(head, ctx)
                return
            sub = self._query_expression(inner, ctx)
            qb.sources.append(
                _Source(
                    "derived",
                    (alias or "",),
                    alias,
                    _pos(head),
                    columns=frozenset(sub.output) if sub.output is not None else None,
                )
            )
        else:
            self._visit_children(table, ctx)
        for k in kids:
            if k is not table and not k.is_type("alias_expression", "post_table_expression"):
                self._visit(k, ctx)

    def _query_expression(self, seg: BaseSegment, ctx: _Ctx) -> _QueryBuilder:
        """A SELECT or a UNION of them; the first branch names the columns."""
        if seg.is_type("select_statement"):
            return self._select(seg, ctx)
        first: _QueryBuilder | None = None
        for k in _kids(seg):
            if k.is_type("select_statement"):
                qb = self._select(k, ctx)
                first = first or qb
            elif k.is_type("orderby_clause") and first is not None:
                self._visit_children(k, _Ctx(first, ctx.ctes, True, ctx.lenient))
            else:
                self._visit(k, ctx)
        return first if first is not None else self._new_query(ctx)

    def _set_expression(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._query_expression(seg, ctx)

    def _with(self, seg: BaseSegment, ctx: _Ctx) -> None:
        ctes: dict[str, frozenset[str] | None] = dict(ctx.ctes)
        for k in _kids(seg):
            if k.is_type("common_table_expression"):
                ckids = _kids(k)
                name = _unquote_ident(ckids[0].raw).lower()
                listed = next((c for c in ckids if c.is_type("cte_column_list")), None)
                # A recursive CTE may name itself; its columns are not known yet.
                ctes[name] = None
                body = next((c for c in ckids if c.is_type("bracketed")), None)
                sub = None
                if body is not None:
                    inner = next(
                        (c for c in _kids(body) if c.is_type("select_statement", "set_expression")), None
                    )
                    if inner is not None:
                        sub = self._query_expression(inner, _Ctx(ctx.query, types.MappingProxyType(ctes)))
                if listed is not None:
                    ctes[name] = frozenset(
                        _unquote_ident(i.raw).lower()
                        for i in listed.recursive_crawl("naked_identifier", "quoted_identifier")
                    )
                elif sub is not None and sub.output is not None:
                    ctes[name] = frozenset(sub.output)
            elif k.is_type("keyword"):
                continue
            else:
                self._visit(k, _Ctx(ctx.query, types.MappingProxyType(ctes), ctx.in_order_by, ctx.lenient))

    # ----------------------------------------------------------------- expressions

    def _column_reference(self, seg: BaseSegment, ctx: _Ctx) -> None:
        ref = _Ref(_name_parts(seg), _pos(seg), in_order_by=ctx.in_order_by)
        if ctx.query is not None:
            ctx.query.refs.append(ref)
        elif not ctx.lenient:
            self.orphans.append(ref)

    def _wildcard(self, seg: BaseSegment, ctx: _Ctx) -> None:
        parts = tuple(
            _unquote_ident(k.raw) for k in seg.recursive_crawl("naked_identifier", "quoted_identifier")
        )
        if parts and ctx.query is not None:
            ctx.query.refs.append(_Ref((*parts, "*"), _pos(seg), star=True))

    def _call_args(self, func: BaseSegment) -> list[BaseSegment]:
        contents = next((k for k in _kids(func) if k.is_type("function_contents")), None)
        if contents is None:
            return []
        bracket = next((k for k in _kids(contents) if k.is_type("bracketed")), None)
        if bracket is None:
            return []
        return [k for k in _kids(bracket) if not k.is_type("start_bracket", "end_bracket", "comma")]

    def _function(self, seg: BaseSegment, ctx: _Ctx) -> None:
        kids = _kids(seg)
        parts = _name_parts(kids[0])
        self.functions.append(_Call(parts, _pos(seg)))
        name = parts[-1].upper() if len(parts) == 1 else ""
        args = self._call_args(seg)
        if name in ("OBJECT_ID", "SERVERPROPERTY") and args:
            lit = _sole_literal(args[0])
            if lit is not None:
                value, _ = _literal_value(lit.raw)
                (self.object_id_args if name == "OBJECT_ID" else self.serverproperty_args).append(value)
        for k in kids[1:]:
            self._visit(k, ctx)

    def _data_type(self, seg: BaseSegment, ctx: _Ctx, declare_ordinal: int | None = None) -> None:
        parts = tuple(
            _unquote_ident(k.raw)
            for k in _kids(seg)
            if k.is_type("keyword", "data_type_identifier", "naked_identifier", "quoted_identifier")
        )
        if parts:
            self.type_uses.append(_TypeUse(parts, _pos(seg), declare_ordinal))

    def _data_type_handler(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._data_type(seg, ctx)

    def _parameter(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._use_variable(seg.raw, _pos(seg))

    def _use_variable(self, name: str, pos: _Pos, table_variable: bool = False) -> None:
        declared_at = self.declared.get(name.lower())
        if declared_at is not None and declared_at < pos.offset:
            return
        if table_variable:
            self._issue(_BIND, pos, 1087, f'Must declare the table variable "{name}".')
        else:
            self._issue(_BIND, pos, 137, f'Must declare the scalar variable "{name}".')

    def _system_variable(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self.sysvars.append(_Call((seg.raw,), _pos(seg)))

    def _assign(self, name: str, value: BaseSegment) -> None:
        self.assigned.setdefault(name.lower(), []).append((_pos(value).offset, _sole_literal(value)))

    def _set_variable(self, seg: BaseSegment, ctx: _Ctx) -> None:
        kids = _kids(seg)
        target = next((k for k in kids if k.is_type("parameter")), None)
        value = next((k for k in kids if k.is_type("expression")), None)
        if target is not None and value is not None:
            self._assign(target.raw, value)
        self._visit_children(seg, ctx)

    def _literal_in(self, expr: BaseSegment) -> tuple[BaseSegment | None, bool]:
        """The string an EXEC argument holds -- a literal, or a variable last set to one --
        and whether it is the literal itself (for a variable, its declared type, not the
        literal's N prefix, decides whether sp_executesql accepts it)."""
        lit = _sole_literal(expr)
        if lit is not None:
            return lit, True
        var = _sole_literal(expr, "parameter")
        if var is None:
            return None, False
        before = [
            value for offset, value in self.assigned.get(var.raw.lower(), []) if offset < _pos(var).offset
        ]
        return (before[-1] if before else None), False

    def _declare(self, seg: BaseSegment, ctx: _Ctx) -> None:
        ordinal = 0
        current: str | None = None
        for k in _kids(seg):
            if k.is_type("parameter"):
                # Visible to the initial values of the variables declared after it.
                ordinal += 1
                current = k.raw
                self.declared.setdefault(k.raw.lower(), _pos(k).offset)
            elif k.is_type("expression") and current is not None:
                self._assign(current, k)
                self._visit(k, ctx)
            elif k.is_type("data_type"):
                self._data_type(k, ctx, declare_ordinal=ordinal)
            elif k.is_type("keyword", "comma", "comparison_operator"):
                continue
            elif k.is_type("bracketed"):
                continue  # DECLARE @t TABLE (...): column definitions, nothing to bind
            else:
                self._visit(k, ctx)  # initial values

    # ----------------------------------------------------------------- EXEC

    def _exec(self, seg: BaseSegment, ctx: _Ctx) -> None:
        kids = _kids(seg)
        has_exec_keyword = bool(kids) and kids[0].is_type("keyword")
        target = next((k for k in kids if k.is_type("object_reference")), None)
        if target is None:
            # EXEC (N'...') / EXEC (@sql)
            for k in kids:
                if k.is_type("bracketed"):
                    self._visit_children(k, ctx)
                    lit, _ = self._literal_in(k)
                    if lit is not None:
                        self._dynamic(seg, lit, frozenset(), require_unicode=False)
            return
        parts = _name_parts(target)
        if not has_exec_keyword and not ctx.first_statement:
            # Only the first statement of a batch may call a procedure without EXEC;
            # anywhere else SQL Server reads the name as a syntax error (a typo like SELEC).
            token = _first_token(target)
            assert token is not None
            self._issue(_PARSE, _pos(token), 102, f"Incorrect syntax near '{token.raw}'.")
            return
        args = self._exec_args(kids[kids.index(target) + 1 :], ctx)
        if not _executesql_name(parts):
            self.procedures.append(_Call(parts, _pos(target)))
            return
        stmt = args.get("@stmt", args.get(0))
        params = args.get("@params", args.get(1))
        declared: frozenset[str] = frozenset()
        if params is not None:
            lit, direct = self._literal_in(params)
            if lit is not None:
                text, unicode = _literal_value(lit.raw)
                if direct and not unicode:
                    self._issue(
                        _RUN,
                        _pos(lit),
                        214,
                        "Procedure expects parameter '@parameters' of type 'ntext/nchar/nvarchar'.",
                    )
                declared = frozenset(m.group(0).lower() for m in _PARAM_NAME.finditer(text))
        if stmt is not None:
            lit, direct = self._literal_in(stmt)
            if lit is not None:
                self._dynamic(seg, lit, declared, require_unicode=direct)

    def _exec_args(self, kids: list[BaseSegment], ctx: _Ctx) -> dict[str | int, BaseSegment]:
        """Arguments of EXEC proc ...: by position (0, 1, ...) and by @name when named."""
        args: dict[str | int, BaseSegment] = {}
        position = 0
        i = 0
        while i < len(kids):
            k = kids[i]
            nxt = kids[i + 1] if i + 1 < len(kids) else None
            if k.is_type("parameter") and nxt is not None and nxt.is_type("comparison_operator"):
                value = kids[i + 2] if i + 2 < len(kids) else None
                if value is not None:
                    args[k.raw.lower()] = value
                    self._visit(value, ctx)
                i += 3
                continue
            if k.is_type("comma", "keyword"):
                i += 1
                continue
            args[position] = k
            position += 1
            self._visit(k, ctx)
            i += 1
        return args

    def _dynamic(
        self, exec_stmt: BaseSegment, lit: BaseSegment, declared: frozenset[str], *, require_unicode: bool
    ) -> None:
        text, unicode = _literal_value(lit.raw)
        if require_unicode and not unicode:
            self._issue(
                _RUN,
                _pos(lit),
                214,
                "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.",
            )
            return
        # Positioned at the EXEC: that is where (and when) the string gets compiled.
        self.dynamic.append(_Dynamic(_pos(exec_stmt), text, _analyze(text, declared)))


# Words that open or close T-SQL blocks; an unparsable section is cut there to find the
# statement that is actually broken.
_BLOCK_WORDS = frozenset({"BEGIN", "END", "TRY", "CATCH", "ELSE"})


def _closes(body: str) -> bool:
    """Whether a string literal body (after the opening quote) has its closing quote."""
    i = 0
    while i < len(body):
        if body[i] == "'":
            if body[i + 1 : i + 2] == "'":
                i += 2
                continue
            return True
        i += 1
    return False


_HANDLERS: dict[str, Any] = {
    "statement": _Walker._statement,
    "unparsable": _Walker._unparsable,
    "unlexable": _Walker._unparsable,
    "go_statement": _Walker._go,
    "select_statement": _Walker._select_handler,
    "set_expression": _Walker._set_expression,
    "with_compound_statement": _Walker._with,
    "column_reference": _Walker._column_reference,
    "wildcard_identifier": _Walker._wildcard,
    "function": _Walker._function,
    "data_type": _Walker._data_type_handler,
    "parameter": _Walker._parameter,
    "system_variable": _Walker._system_variable,
    "declare_segment": _Walker._declare,
    "set_local_variable_segment": _Walker._set_variable,
    "execute_script_statement": _Walker._exec,
    "alias_expression": lambda self, seg, ctx: None,
    "date_part": lambda self, seg, ctx: None,
}


@functools.lru_cache(maxsize=_PARSE_CACHE_SIZE)
def _analyze(sql: str, declared: frozenset[str] = frozenset()) -> _Analysis:
    tree, violations = _parse(sql)
    return _Walker(sql, declared).run(tree, violations)


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True, order=True)
class _Ranked:
    phase: int
    offset: int
    problem: SqlProblem = field(compare=False)


def _problem(number: int, message: str, line: int) -> SqlProblem:
    return SqlProblem(number, message, line, _SEVERITY.get(number, 16))


class _Judge:
    def __init__(self, analysis: _Analysis, catalog: Catalog, version: str | None) -> None:
        self.a = analysis
        self.catalog = catalog
        self.version = version
        self.found: list[_Ranked] = []

    def add(self, phase: int, pos: _Pos, number: int, message: str) -> None:
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
            self.add(_BIND, ref.pos, 207, f"Invalid column name '{ref.parts[-1]}'.")
        self._functions()
        self._procedures()
        self._types()
        for call in self.a.system_variables:
            if call.parts[0].upper() not in self.catalog.system_variables:
                self.add(_BIND, call.pos, 137, f'Must declare the scalar variable "{call.parts[0]}".')
        for dyn in self.a.dynamic:
            # The dynamic batch is compiled only if and when the EXEC runs, typically
            # behind an existence check; so here it is checked against the newest catalog
            # (typos), and the stand-in checks it against its version when it runs it.
            for inner in sorted(_Judge(dyn.analysis, self.catalog, None).run()):
                p = inner.problem
                moved = SqlProblem(p.number, p.message, p.line, p.severity, dyn.pos.line)
                self.found.append(_Ranked(_RUN, dyn.pos.offset, moved))
        if any(r.phase == _PARSE for r in self.found):
            # A batch that does not parse is neither bound nor run: only syntax errors.
            return [r for r in self.found if r.phase == _PARSE]
        return self.found

    def _sources(self, q: _Query) -> list[frozenset[str] | None]:
        cols: list[frozenset[str] | None] = []
        for src in q.sources:
            if src.kind != "object":
                cols.append(src.columns if src.kind in ("derived", "cte") else None)
                continue
            obj = self.catalog.object(src.key, self.version) if len(src.parts) <= 3 else None
            if obj is None:
                self.add(_RUN, src.pos, 208, f"Invalid object name '{src.written}'.")
                cols.append(None)
                continue
            if obj.kind == "view" and src.args is not None:
                self.add(
                    _BIND,
                    src.pos,
                    215,
                    f"Parameters supplied for object '{src.written}' which is not a function. "
                    "If the parameters are intended as a table hint, a WITH keyword is required.",
                )
            elif obj.kind == "tvf" and src.args is None:
                self.add(
                    _BIND, src.pos, 216, f"Parameters were not supplied for the function '{src.written}'."
                )
            elif obj.kind == "tvf" and src.args is not None and src.args < len(obj.params):
                self.add(
                    _BIND,
                    src.pos,
                    313,
                    "An insufficient number of arguments were supplied for the procedure or function "
                    f"{src.written}.",
                )
            elif obj.kind == "tvf" and src.args is not None and src.args > len(obj.params):
                self.add(
                    _BIND,
                    src.pos,
                    8144,
                    f"Procedure or function {src.written} has too many arguments specified.",
                )
            cols.append(self.catalog.columns(src.key, self.version))
        return cols

    def _ref(self, ref: _Ref, qi: int, known: list[list[frozenset[str] | None]]) -> None:
        if ref.star:
            qualifier = ".".join(ref.parts[:-1]).lower()
            if not self._bind_qualifier(qualifier, qi, known)[0]:
                self.add(
                    _BIND,
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
                _BIND, ref.pos, 4104, f'The multi-part identifier "{".".join(ref.parts)}" could not be bound.'
            )
            return
        if columns is not None and column.lower() not in columns:
            self.add(_BIND, ref.pos, 207, f"Invalid column name '{column}'.")

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

    def _unqualified(self, ref: _Ref, column: str, qi: int, known: list[list[frozenset[str] | None]]) -> None:
        name = column.lower()
        if ref.in_order_by and name in self.a.queries[qi].aliases:
            return
        scope: int | None = qi
        while scope is not None:
            q = self.a.queries[scope]
            cols = known[scope]
            hits = sum(1 for c in cols if c is not None and name in c)
            if hits > 1:
                self.add(_BIND, ref.pos, 209, f"Ambiguous column name '{column}'.")
                return
            if hits == 1 or any(c is None for c in cols):
                return
            scope = q.parent
        self.add(_BIND, ref.pos, 207, f"Invalid column name '{column}'.")

    def _functions(self) -> None:
        for call in self.a.functions:
            if len(call.parts) == 1:
                spec = self.catalog.functions.get(call.parts[0].upper())
                if spec is None or not _available(spec[0], spec[1], self.version):
                    self.add(
                        _PARSE,
                        call.pos,
                        195,
                        f"'{call.parts[0]}' is not a recognized built-in function name.",
                    )
            elif ".".join(call.parts).upper() not in self.catalog.functions:
                self.add(
                    _BIND,
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
                self.add(_RUN, call.pos, 2812, f"Could not find stored procedure '{'.'.join(call.parts)}'.")

    def _types(self) -> None:
        for use in self.a.type_uses:
            if len(use.parts) == 1 and use.parts[0].lower() in self.catalog.types:
                continue
            written = ".".join(use.parts)
            if use.declare_ordinal is None:
                self.add(_BIND, use.pos, 243, f"Type {written} is not a defined system type.")
            else:
                self.add(
                    _BIND,
                    use.pos,
                    2715,
                    f"Column, parameter, or variable #{use.declare_ordinal}: "
                    f"Cannot find data type {written}.",
                )


@functools.lru_cache(maxsize=_CHECK_CACHE_SIZE)
def _problems(sql: str, catalog: Catalog, server_version: str | None) -> tuple[SqlProblem, ...]:
    if server_version is not None:
        version_index(server_version)  # reject typos in the version early
    ranked = _Judge(_analyze(sql), catalog, server_version).run()
    return tuple(r.problem for r in sorted(ranked))


# --------------------------------------------------------------------------- public API


def find_problems(sql: str, catalog: Catalog, server_version: str | None = None) -> list[SqlProblem]:
    """Every problem in ``sql``, in the order SQL Server would meet them."""
    return list(_problems(sql, catalog, server_version))


def check_batch(sql: str, catalog: Catalog, server_version: str | None = None) -> SqlProblem | None:
    """The error SQL Server would raise first for ``sql``, or None if it would run.

    Dynamic SQL strings are checked against the whole catalog whatever ``server_version``
    says, because SQL Server only compiles them when they run (usually behind an existence
    check). To imitate an old server executing one of them, check the string itself (see
    :attr:`BatchInfo.dynamic_sql`) with that version.
    """
    found = _problems(sql, catalog, server_version)
    return found[0] if found else None


def _collect(analysis: _Analysis) -> Iterable[_Analysis]:
    yield analysis
    for dyn in analysis.dynamic:
        yield from _collect(dyn.analysis)


def batch_info(sql: str) -> BatchInfo:
    """Objects, sections, dynamic SQL and literal arguments of ``sql`` (cached parse)."""
    root = _analyze(sql)
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
    return _analyze.cache_info()


def check_cache_info() -> functools._CacheInfo:
    """Hits/misses of the verdict cache (keyed by text, catalog and version)."""
    return _problems.cache_info()


def clear_caches() -> None:
    _analyze.cache_clear()
    _problems.cache_clear()
