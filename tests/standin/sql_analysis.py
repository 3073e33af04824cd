"""Parsing a T-SQL batch with sqlfluff and walking it: which objects, columns, calls and dynamic SQL it
uses, with positions, for the judge in sqlcheck.py."""

from __future__ import annotations

import functools
import re
import threading
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from sqlfluff.core import FluffConfig, Linter
from sqlfluff.core.parser import BaseSegment

_PARSE_CACHE_SIZE = 256

# SQL Server reports errors in this order: the whole batch is parsed (phase 1) and bound
# (phase 2) before anything runs; missing tables (deferred name resolution), unknown
# procedures and dynamic SQL fail only when their statement executes (phase 3).
PARSE, BIND, RUN = 1, 2, 3

# --------------------------------------------------------------------------- analysis model
# The analysis of a text depends on nothing but the text, so it can be cached once and
# judged against any catalog and version cheaply.


@dataclass(frozen=True)
class Pos:
    line: int
    offset: int


@dataclass(frozen=True)
class _Issue:
    """A problem found without the catalog (syntax, undeclared variables)."""

    phase: int
    pos: Pos
    number: int
    message: str


@dataclass(frozen=True)
class _Source:
    kind: Literal["object", "derived", "cte", "temp", "tablevar"]
    parts: tuple[str, ...]  # as written, unquoted
    alias: str | None
    pos: Pos
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
class Ref:
    parts: tuple[str, ...]
    pos: Pos
    in_order_by: bool = False
    star: bool = False
    selected: bool = False  # the whole select-list item: its value goes to the client as it is


@dataclass(frozen=True)
class Query:
    sources: tuple[_Source, ...]
    refs: tuple[Ref, ...]
    aliases: frozenset[str]
    parent: int | None


@dataclass(frozen=True)
class _Call:
    parts: tuple[str, ...]
    pos: Pos


@dataclass(frozen=True)
class _TypeUse:
    parts: tuple[str, ...]
    pos: Pos
    declare_ordinal: int | None  # set inside DECLARE (Msg 2715), None in CAST/CONVERT (243)


@dataclass(frozen=True)
class _Dynamic:
    pos: Pos
    text: str
    analysis: Analysis


@dataclass(frozen=True)
class Analysis:
    issues: tuple[_Issue, ...]
    queries: tuple[Query, ...]
    orphan_refs: tuple[Ref, ...]  # column names outside any query (e.g. IF col = 1)
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


def _pos(seg: BaseSegment) -> Pos:
    marker = seg.pos_marker
    assert marker is not None
    return Pos(marker.line_no, marker.source_slice.start)


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
    refs: list[Ref] = field(default_factory=list)
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
    """Turns a sqlfluff tree into the catalog-independent :class:`Analysis`."""

    def __init__(self, sql: str, declared: frozenset[str]) -> None:
        self.sql = sql
        self.issues: list[_Issue] = []
        self.queries: list[_QueryBuilder] = []
        self.orphans: list[Ref] = []
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

    def run(self, tree: BaseSegment | None, violations: list[Any]) -> Analysis:
        if tree is not None:
            self._file(tree)
        if violations and not any(i.number in (102, 105, 113) for i in self.issues):
            # A parse failure sqlfluff did not attach to a segment: report where it says.
            v = violations[0]
            line = int(getattr(v, "line_no", 1) or 1)
            self._issue(PARSE, Pos(line, 0), 102, f"Incorrect syntax near '{self._near_line(line)}'.")
        return Analysis(
            issues=tuple(self.issues),
            queries=tuple(
                Query(tuple(q.sources), tuple(q.refs), frozenset(q.aliases), q.parent) for q in self.queries
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

    def _issue(self, phase: int, pos: Pos, number: int, message: str) -> None:
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
                self._issue(PARSE, pos, 105, f"Unclosed quotation mark after the character string '{body}'.")
                return
        if rest.startswith("/*") and "*/" not in rest:
            self._issue(PARSE, pos, 113, "Missing end comment mark '*/'.")
            return
        self._issue(PARSE, pos, 102, f"Incorrect syntax near '{raw}'.")

    def _locate(self, seg: BaseSegment) -> tuple[str, Pos] | None:
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
                return token.raw, Pos(self.sql.count("\n", 0, offset) + 1, offset)
        return first.raw, _pos(first)

    def _go(self, seg: BaseSegment, ctx: _Ctx) -> None:
        self._issue(PARSE, _pos(seg), 102, "Incorrect syntax near 'GO'.")

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
            if len(body) == 1 and body[0].is_type("column_reference"):
                self._column_reference(body[0], ctx, selected=True)
                continue
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

    def _column_reference(self, seg: BaseSegment, ctx: _Ctx, selected: bool = False) -> None:
        ref = Ref(_name_parts(seg), _pos(seg), in_order_by=ctx.in_order_by, selected=selected)
        if ctx.query is not None:
            ctx.query.refs.append(ref)
        elif not ctx.lenient:
            self.orphans.append(ref)

    def _wildcard(self, seg: BaseSegment, ctx: _Ctx) -> None:
        parts = tuple(
            _unquote_ident(k.raw) for k in seg.recursive_crawl("naked_identifier", "quoted_identifier")
        )
        if parts and ctx.query is not None:
            ctx.query.refs.append(Ref((*parts, "*"), _pos(seg), star=True))

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

    def _use_variable(self, name: str, pos: Pos, table_variable: bool = False) -> None:
        declared_at = self.declared.get(name.lower())
        if declared_at is not None and declared_at < pos.offset:
            return
        if table_variable:
            self._issue(BIND, pos, 1087, f'Must declare the table variable "{name}".')
        else:
            self._issue(BIND, pos, 137, f'Must declare the scalar variable "{name}".')

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
            self._issue(PARSE, _pos(token), 102, f"Incorrect syntax near '{token.raw}'.")
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
                        RUN,
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
                RUN,
                _pos(lit),
                214,
                "Procedure expects parameter '@statement' of type 'ntext/nchar/nvarchar'.",
            )
            return
        # Positioned at the EXEC: that is where (and when) the string gets compiled.
        self.dynamic.append(_Dynamic(_pos(exec_stmt), text, analyze(text, declared)))


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
def analyze(sql: str, declared: frozenset[str] = frozenset()) -> Analysis:
    tree, violations = _parse(sql)
    return _Walker(sql, declared).run(tree, violations)
