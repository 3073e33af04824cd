"""A small T-SQL interpreter for the subset the exporter sends, with SQL Server's semantics where they
bite monitoring code: LIKE sees the blank padding of nchar columns while `=` and IN ignore it, matching
is case-insensitive, a runtime error inside TRY jumps to CATCH, sp_executesql runs its string as a batch.

Syntax is checked by sqlcheck (sqlfluff) before this runs; what this module cannot interpret raises
Unsupported, which the stand-in reports as an error rather than guessing.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .tds import Column, ResultSet, SqlError

EPOCH_1900 = dt.datetime(1900, 1, 1)


class Unsupported(Exception):
    """Valid T-SQL the stand-in does not interpret."""


class SqlRuntimeError(Exception):
    def __init__(self, number: int, message: str, severity: int = 16) -> None:
        super().__init__(message)
        self.number = number
        self.message = message
        self.severity = severity


class Data(Protocol):
    """What the interpreter reads; the scenario provides it."""

    def object_exists(self, name: str) -> bool: ...
    def rows(self, name: str, args: Sequence[object]) -> list[dict[str, object]]: ...
    def serverproperty(self, name: str) -> object: ...
    def utcnow(self) -> dt.datetime: ...


# ---------------------------------------------------------------- tokens

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+|--[^\n]*)
  | (?P<nstr>N'(?:[^']|'')*')
  | (?P<str>'(?:[^']|'')*')
  | (?P<num>\d+(?:\.\d+)?)
  | (?P<name>\[[^\]]+\]|[A-Za-z_@#$][A-Za-z0-9_@#$]*)
  | (?P<op><>|!=|>=|<=|[(),;.=<>*+\-/%])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Tok:
    kind: str  # str | num | name | op
    text: str

    def is_kw(self, *words: str) -> bool:
        return self.kind == "name" and self.text.upper() in words


def tokenize(sql: str) -> list[Tok]:
    tokens: list[Tok] = []
    pos = 0
    while pos < len(sql):
        m = _TOKEN.match(sql, pos)
        if m is None:
            raise Unsupported(f"cannot tokenize near {sql[pos : pos + 20]!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "ws":
            continue
        if kind in ("nstr", "str"):
            body = text[2:-1] if kind == "nstr" else text[1:-1]
            tokens.append(Tok("str", body.replace("''", "'")))
        elif kind == "name":
            tokens.append(Tok("name", text[1:-1] if text.startswith("[") else text))
        else:
            tokens.append(Tok(kind, text))
    return tokens


# ---------------------------------------------------------------- syntax tree

# ("lit", v) | ("col", qualifier, name) | ("call", NAME, [args]) | ("cast", expr, type) | ("bin", op, a, b)
Expr = tuple


@dataclass
class Select:
    items: list[tuple[Expr, str]]  # (expression, output column name)
    source: str | None = None
    source_args: list[Expr] = field(default_factory=list)
    alias: str | None = None
    where: Expr | None = None
    group_by: list[Expr] | None = None  # GROUP BY expressions; None without the clause
    # CROSS APPLY of a table-valued function, called once per source row: (name, args, alias)
    apply: tuple[str, list[Expr], str] | None = None


@dataclass
class TryCatch:
    body: list[object]
    handler: list[object]


@dataclass
class If:
    cond: Expr
    then: object
    otherwise: object | None


@dataclass
class ExecSql:
    sql: str


@dataclass
class SetOption:
    name: str = ""
    value: str = ""


class _Parser:
    def __init__(self, tokens: list[Tok]) -> None:
        self.toks = tokens
        self.i = 0

    def peek(self, offset: int = 0) -> Tok | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self) -> Tok:
        tok = self.peek()
        if tok is None:
            raise Unsupported("unexpected end of batch")
        self.i += 1
        return tok

    def accept_kw(self, *words: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.is_kw(*words):
            self.i += 1
            return True
        return False

    def accept_op(self, op: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text == op:
            self.i += 1
            return True
        return False

    def expect_kw(self, word: str) -> None:
        if not self.accept_kw(word):
            raise Unsupported(f"expected {word} near {self.peek()}")

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise Unsupported(f"expected {op!r} near {self.peek()}")

    # statements
    def statements(self, stop: Callable[[], bool]) -> list[object]:
        out: list[object] = []
        while self.peek() is not None and not stop():
            if self.accept_op(";"):
                continue
            out.append(self.statement())
        return out

    def statement(self) -> object:
        tok = self.peek()
        assert tok is not None
        if tok.is_kw("SET"):
            self.take()
            name = self.take().text.upper()
            return SetOption(name, self.take().text)
        if tok.is_kw("BEGIN") and (nxt := self.peek(1)) is not None and nxt.is_kw("TRY"):
            self.i += 2
            body = self.statements(lambda: self._at("END", "TRY"))
            self.i += 2
            self.expect_kw("BEGIN")
            self.expect_kw("CATCH")
            handler = self.statements(lambda: self._at("END", "CATCH"))
            self.i += 2
            return TryCatch(body, handler)
        if tok.is_kw("IF"):
            self.take()
            cond = self.condition()
            then = self.statement()
            self.accept_op(";")
            otherwise = self.statement() if self.accept_kw("ELSE") else None
            return If(cond, then, otherwise)
        if tok.is_kw("EXEC", "EXECUTE"):
            self.take()
            proc = self.qualified_name()
            if proc.lower() not in ("sp_executesql", "sys.sp_executesql"):
                raise Unsupported(f"EXEC of {proc}")
            arg = self.take()
            if arg.kind != "str":
                raise Unsupported("sp_executesql with a non-literal statement")
            if self.peek() is not None and self.peek().kind == "op" and self.peek().text == ",":  # type: ignore[union-attr]
                raise Unsupported("sp_executesql with parameters")
            return ExecSql(arg.text)
        if tok.is_kw("SELECT"):
            return self.select()
        raise Unsupported(f"statement starting with {tok.text!r}")

    def _at(self, first: str, second: str) -> bool:
        a, b = self.peek(), self.peek(1)
        return a is not None and b is not None and a.is_kw(first) and b.is_kw(second)

    def _alias(self) -> str | None:
        tok = self.peek()
        bare = tok is not None and tok.kind == "name" and not tok.is_kw("WHERE", "AS", "GROUP", "CROSS")
        if self.accept_kw("AS") or bare:
            return self.take().text
        return None

    def qualified_name(self) -> str:
        parts = [self.take().text]
        while self.accept_op("."):
            parts.append(self.take().text)
        return ".".join(parts)

    def select(self) -> Select:
        self.expect_kw("SELECT")
        sel = Select(items=[])
        while True:
            expr = self.expr()
            if self.accept_kw("AS"):
                name = self.take().text
            elif expr[0] == "col":
                name = expr[2]
            else:
                name = ""
            sel.items.append((expr, name))
            if not self.accept_op(","):
                break
        if self.accept_kw("FROM"):
            sel.source = self.qualified_name().lower()
            # a table-valued function: FROM sys.dm_io_virtual_file_stats(NULL, NULL)
            if self.accept_op("(") and not self.accept_op(")"):
                sel.source_args.append(self.expr())
                while self.accept_op(","):
                    sel.source_args.append(self.expr())
                self.expect_op(")")
            sel.alias = self._alias()
            if self._at("CROSS", "APPLY"):
                self.take()
                self.take()
                name = self.qualified_name().lower()
                self.expect_op("(")
                args = [self.expr()]
                while self.accept_op(","):
                    args.append(self.expr())
                self.expect_op(")")
                alias = self._alias()
                if alias is None:
                    raise Unsupported("CROSS APPLY without an alias")
                sel.apply = (name, args, alias)
        if self.accept_kw("WHERE"):
            sel.where = self.condition()
        if self.accept_kw("GROUP"):
            self.expect_kw("BY")
            sel.group_by = [self.expr()]
            while self.accept_op(","):
                sel.group_by.append(self.expr())
        tok = self.peek()
        if (
            tok is not None
            and not (tok.kind == "op" and tok.text == ";")
            and not tok.is_kw("END", "ELSE", "SELECT", "BEGIN", "IF", "EXEC", "SET")
        ):
            raise Unsupported(f"SELECT clause starting with {tok.text!r}")
        return sel

    # conditions
    def condition(self) -> Expr:
        left = self.conjunction()
        while self.accept_kw("OR"):
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> Expr:
        left = self.negation()
        while self.accept_kw("AND"):
            left = ("and", left, self.negation())
        return left

    def negation(self) -> Expr:
        if self.accept_kw("NOT"):
            return ("not", self.negation())
        return self.predicate()

    def predicate(self) -> Expr:
        if self.peek() is not None and self.peek().kind == "op" and self.peek().text == "(":  # type: ignore[union-attr]
            # A parenthesis may open a condition or an expression; try the condition first.
            save = self.i
            self.take()
            try:
                cond = self.condition()
                self.expect_op(")")
                if not self._comparison_follows():
                    return cond
            except Unsupported:
                pass
            self.i = save
        left = self.expr()
        if self.accept_kw("IS"):
            negate = self.accept_kw("NOT")
            self.expect_kw("NULL")
            return ("isnull", left, negate)
        negate = self.accept_kw("NOT")
        if self.accept_kw("LIKE"):
            return ("like", left, self.expr(), negate)
        if self.accept_kw("IN"):
            self.expect_op("(")
            values = [self.expr()]
            while self.accept_op(","):
                values.append(self.expr())
            self.expect_op(")")
            return ("in", left, values, negate)
        tok = self.take()
        if tok.kind == "op" and tok.text in ("=", "<>", "!=", "<", ">", "<=", ">="):
            return ("cmp", tok.text, left, self.expr())
        raise Unsupported(f"predicate operator {tok.text!r}")

    def _comparison_follows(self) -> bool:
        tok = self.peek()
        return tok is not None and (
            (tok.kind == "op" and tok.text in ("=", "<>", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/"))
            or tok.is_kw("LIKE", "IN", "IS")
        )

    # expressions
    def expr(self) -> Expr:
        left = self.term()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text in ("+", "-"):
            self.take()
            left = ("bin", tok.text, left, self.term())
        return left

    def term(self) -> Expr:
        left = self.factor()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text in ("*", "/"):
            self.take()
            left = ("bin", tok.text, left, self.factor())
        return left

    def factor(self) -> Expr:
        tok = self.take()
        if tok.kind == "str":
            return ("lit", tok.text)
        if tok.kind == "num":
            return ("lit", float(tok.text) if "." in tok.text else int(tok.text))
        if tok.kind == "op" and tok.text == "(":
            inner = self.expr()
            self.expect_op(")")
            return inner
        if tok.kind == "op" and tok.text == "-":
            return ("bin", "-", ("lit", 0), self.factor())
        if tok.kind != "name":
            raise Unsupported(f"expression starting with {tok.text!r}")
        if tok.is_kw("NULL"):
            return ("lit", None)
        if tok.is_kw("CASE"):
            return self.case()
        if tok.is_kw("CAST"):
            self.expect_op("(")
            inner = self.expr()
            self.expect_kw("AS")
            type_name = self.take().text.lower()
            if self.accept_op("("):
                while not self.accept_op(")"):
                    self.take()
            self.expect_op(")")
            return ("cast", inner, type_name)
        if self.accept_op("("):
            args: list[Expr] = []
            if not self.accept_op(")"):
                args.append(self._arg())
                while self.accept_op(","):
                    args.append(self._arg())
                self.expect_op(")")
            return ("call", tok.text.upper(), args)
        if self.accept_op("."):
            return ("col", tok.text.lower(), self.take().text.lower())
        return ("col", None, tok.text.lower())

    def case(self) -> Expr:
        """CASE WHEN cond THEN v ... [ELSE v] END, or the simple form CASE x WHEN v THEN ... END."""
        operand = None if (tok := self.peek()) is not None and tok.is_kw("WHEN") else self.expr()
        branches: list[tuple[Expr, Expr]] = []
        while self.accept_kw("WHEN"):
            test = self.condition() if operand is None else self.expr()
            self.expect_kw("THEN")
            branches.append((test, self.expr()))
        if not branches:
            raise Unsupported("CASE without WHEN")
        otherwise = self.expr() if self.accept_kw("ELSE") else ("lit", None)
        self.expect_kw("END")
        return ("case", operand, branches, otherwise)

    def _arg(self) -> Expr:
        # Date parts (MILLISECOND, SECOND...) are bare words, not columns.
        tok = self.peek()
        nxt = self.peek(1)
        if (
            tok is not None
            and tok.kind == "name"
            and tok.text.upper() in _DATEPARTS
            and nxt is not None
            and nxt.text == ","
        ):
            self.take()
            return ("datepart", tok.text.upper())
        return self.expr()


_DATEPARTS = {"MILLISECOND": 0.001, "SECOND": 1.0, "MINUTE": 60.0, "HOUR": 3600.0, "DAY": 86400.0}


def parse(sql: str) -> list[object]:
    parser = _Parser(tokenize(sql))
    return parser.statements(lambda: False)


# ---------------------------------------------------------------- execution


@dataclass
class _ErrorContext:
    number: int
    message: str


class Interpreter:
    def __init__(self, data: Data) -> None:
        self.data = data
        self._parsed: dict[str, list[object]] = {}
        # SET ROWCOUNT n: a SELECT stops after n rows (0: no limit). Like every SET option set in dynamic
        # SQL, SQL Server restores it when that batch returns (see ExecSql below).
        self.rowcount = 0
        self._depth = 0  # how deep in sp_executesql: a custom collector's own query runs at depth 2

    def run(self, sql: str) -> list[ResultSet | SqlError]:
        out: list[ResultSet | SqlError] = []
        self.rowcount = 0  # a session's options as the exporter's batches leave them: none set
        try:
            self._block(self._parse(sql), out, None)
        except SqlRuntimeError as exc:
            out.append(SqlError(exc.number, exc.message, exc.severity))
        return out

    def _dynamic(self, sql: str) -> list[object]:
        """A dynamic batch parsed. A site's own query (custom collectors nest it one level deeper than the
        exporter's sections) that this interpreter cannot run and no scenario answers gets Msg 208 in its
        own section, as a query on an object the server lacks would: the stand-in never makes rows up."""
        try:
            return self._parse(sql)
        except Unsupported as exc:
            if self._depth < 2:
                raise
            raise SqlRuntimeError(
                208,
                f"Invalid object name (the stand-in has no answer for this query: {exc}; "
                "give the scenario a custom_queries entry).",
            ) from None

    def _parse(self, sql: str) -> list[object]:
        stmts = self._parsed.get(sql)
        if stmts is None:
            stmts = parse(sql)
            self._parsed[sql] = stmts
        return stmts

    def _block(
        self, stmts: Sequence[object], out: list[ResultSet | SqlError], err: _ErrorContext | None
    ) -> None:
        for stmt in stmts:
            self._stmt(stmt, out, err)

    def _stmt(self, stmt: object, out: list[ResultSet | SqlError], err: _ErrorContext | None) -> None:
        if isinstance(stmt, SetOption):
            if stmt.name == "ROWCOUNT":
                self.rowcount = int(stmt.value)
            return
        if isinstance(stmt, TryCatch):
            partial: list[ResultSet | SqlError] = []
            try:
                self._block(stmt.body, partial, err)
            except SqlRuntimeError as exc:
                out.extend(partial)
                self._block(stmt.handler, out, _ErrorContext(exc.number, exc.message))
            else:
                out.extend(partial)
            return
        if isinstance(stmt, If):
            if _truth(self._eval(stmt.cond, {}, err)):
                self._stmt(stmt.then, out, err)
            elif stmt.otherwise is not None:
                self._stmt(stmt.otherwise, out, err)
            return
        if isinstance(stmt, ExecSql):
            saved, depth = self.rowcount, self._depth
            try:
                canned = getattr(self.data, "canned", None)
                answer = canned(stmt.sql) if canned is not None else None
                if answer is not None:  # a scenario's answer to a site's own query (custom_queries)
                    out.append(self._limited(answer))
                else:
                    self._depth += 1
                    self._block(self._dynamic(stmt.sql), out, err)
            finally:
                self.rowcount = saved
                self._depth = depth
            return
        if isinstance(stmt, Select):
            out.append(self._limited(self._select(stmt, err)))
            return
        raise Unsupported(f"statement {stmt!r}")

    def _limited(self, result: ResultSet) -> ResultSet:
        if self.rowcount and len(result.rows) > self.rowcount:
            return ResultSet(result.columns, list(result.rows)[: self.rowcount])
        return result

    def _select(self, sel: Select, err: _ErrorContext | None) -> ResultSet:
        if sel.source is None:
            source_rows: list[dict[str, object]] = [{}]
        else:
            if not self.data.object_exists(sel.source):
                raise SqlRuntimeError(208, f"Invalid object name '{sel.source}'.")
            args = [self._eval(a, {}, err) for a in sel.source_args]
            source_rows = self.data.rows(sel.source, args)
            if sel.apply is not None:
                source_rows = self._cross_apply(sel, source_rows, err)
        result_rows: list[tuple[object, ...]] = []
        kept = [
            row
            for row in source_rows
            if sel.where is None or _truth(self._eval(sel.where, row, err, sel.alias))
        ]
        if sel.group_by is not None or any(_has_aggregate(e) for e, _ in sel.items):
            result_rows = self._grouped(sel, kept, err)
        else:
            result_rows = [tuple(self._eval(e, row, err, sel.alias) for e, _ in sel.items) for row in kept]
        columns = [Column(name, _column_type(e, result_rows, i)) for i, (e, name) in enumerate(sel.items)]
        return ResultSet(columns, result_rows)

    def _cross_apply(
        self, sel: Select, rows: list[dict[str, object]], err: _ErrorContext | None
    ) -> list[dict[str, object]]:
        """Each source row joined with what the function returns for it. The joined row knows every
        column by its qualified name (`df.file_id`, `vs.total_bytes`) and, where only one side has it, by
        its plain name too."""
        name, args, alias = sel.apply  # type: ignore[misc]
        if not self.data.object_exists(name):
            raise SqlRuntimeError(208, f"Invalid object name '{name}'.")
        left = (sel.alias or sel.source or "").lower()
        joined = []
        for row in rows:
            values = [self._eval(a, row, err, sel.alias) for a in args]
            for right in self.data.rows(name, values):
                both = {k: v for k, v in row.items() if k not in right}
                both.update({k: v for k, v in right.items() if k not in row})
                both.update({f"{left}.{k}": v for k, v in row.items()})
                both.update({f"{alias.lower()}.{k}": v for k, v in right.items()})
                joined.append(both)
        return joined

    def _grouped(
        self, sel: Select, rows: list[dict[str, object]], err: _ErrorContext | None
    ) -> list[tuple[object, ...]]:
        """GROUP BY (or aggregates over the whole input): one output row per group. Groups are keyed the
        way a case-insensitive collation compares (trailing blanks ignored); without GROUP BY there is
        exactly one group, even over no rows, as SQL Server answers SUM over an empty set with NULL."""
        keys = sel.group_by or []
        groups: dict[tuple[object, ...], list[dict[str, object]]] = {}
        for row in rows:
            key = tuple(_group_key(self._eval(k, row, err, sel.alias)) for k in keys)
            groups.setdefault(key, []).append(row)
        if not keys:
            groups = {(): rows}
        return [
            tuple(self._eval_group(e, members, keys, err, sel.alias) for e, _ in sel.items)
            for members in groups.values()
        ]

    def _eval_group(
        self,
        e: Expr,
        rows: list[dict[str, object]],
        keys: list[Expr],
        err: _ErrorContext | None,
        alias: str | None,
    ) -> object:
        if e in keys:
            return self._eval(e, rows[0], err, alias) if rows else None
        tag = e[0]
        if tag == "call" and e[1] in _AGGREGATES:
            if len(e[2]) != 1:
                raise Unsupported(f"{e[1]} with {len(e[2])} arguments")
            values = [v for r in rows if (v := self._eval(e[2][0], r, err, alias)) is not None]
            if e[1] in ("COUNT", "COUNT_BIG"):
                return len(values)
            if not values:
                return None
            if e[1] == "SUM":
                return sum(values)  # type: ignore[arg-type]
            return min(values) if e[1] == "MIN" else max(values)  # type: ignore[type-var]
        if tag == "col":
            raise SqlRuntimeError(
                8120,
                f"Column '{e[2]}' is invalid in the select list because it is not contained in either an"
                " aggregate function or the GROUP BY clause.",
            )
        if tag == "lit":
            return e[1]
        if tag == "bin":
            a = self._eval_group(e[2], rows, keys, err, alias)
            b = self._eval_group(e[3], rows, keys, err, alias)
            return None if a is None or b is None else _arith(e[1], a, b)
        if tag == "cast":
            return _cast(self._eval_group(e[1], rows, keys, err, alias), e[2])
        if _has_column(e):
            raise SqlRuntimeError(
                8120,
                "An expression in the select list is neither in the GROUP BY clause nor an aggregate.",
            )
        return self._eval(e, {}, err, alias)

    def _eval(
        self, e: Expr, row: dict[str, object], err: _ErrorContext | None, alias: str | None = None
    ) -> object:
        tag = e[0]
        if tag == "lit":
            return e[1]
        if tag == "col":
            qualifier, name = e[1], e[2]
            if qualifier is not None and f"{qualifier}.{name}" in row:
                return row[f"{qualifier}.{name}"]  # a joined row (CROSS APPLY)
            if qualifier is not None and (alias is None or qualifier != alias.lower()):
                raise SqlRuntimeError(
                    4104, f'The multi-part identifier "{qualifier}.{name}" could not be bound.'
                )
            if name not in row:
                raise SqlRuntimeError(207, f"Invalid column name '{name}'.")
            return row[name]
        if tag == "cast":
            return _cast(self._eval(e[1], row, err, alias), e[2])
        if tag == "bin":
            a, b = self._eval(e[2], row, err, alias), self._eval(e[3], row, err, alias)
            if a is None or b is None:
                return None
            return _arith(e[1], a, b)
        if tag == "call":
            return self._call(e[1], e[2], row, err, alias)
        if tag == "datepart":
            return e[1]
        if tag == "case":
            operand = None if e[1] is None else self._eval(e[1], row, err, alias)
            for test, result in e[2]:
                hit = (
                    _truth(self._eval(test, row, err, alias))
                    if e[1] is None
                    else _equal(operand, self._eval(test, row, err, alias))
                )
                if hit:
                    return self._eval(result, row, err, alias)
            return self._eval(e[3], row, err, alias)
        if tag in ("and", "or"):
            a = _truth(self._eval(e[1], row, err, alias))
            if tag == "and":
                return a and _truth(self._eval(e[2], row, err, alias))
            return a or _truth(self._eval(e[2], row, err, alias))
        if tag == "not":
            return not _truth(self._eval(e[1], row, err, alias))
        if tag == "isnull":
            value = self._eval(e[1], row, err, alias)
            return (value is not None) if e[2] else (value is None)
        if tag == "like":
            value, pattern = self._eval(e[1], row, err, alias), self._eval(e[2], row, err, alias)
            if value is None or pattern is None:
                return False
            return like(str(value), str(pattern)) != e[3]
        if tag == "in":
            value = self._eval(e[1], row, err, alias)
            hit = any(_equal(value, self._eval(v, row, err, alias)) for v in e[2])
            return hit != e[3]
        if tag == "cmp":
            a, b = self._eval(e[2], row, err, alias), self._eval(e[3], row, err, alias)
            return _compare(e[1], a, b)
        raise Unsupported(f"expression {tag}")

    def _call(
        self,
        name: str,
        args: list[Expr],
        row: dict[str, object],
        err: _ErrorContext | None,
        alias: str | None,
    ) -> object:
        values = [self._eval(a, row, err, alias) for a in args]
        if name in ("RTRIM", "LTRIM"):
            text = values[0]
            if text is None:
                return None
            return str(text).rstrip(" ") if name == "RTRIM" else str(text).lstrip(" ")
        if name == "SERVERPROPERTY":
            return self.data.serverproperty(str(values[0]))
        if name == "OBJECT_ID":
            return -1 if self.data.object_exists(str(values[0]).lower()) else None
        if name == "COL_LENGTH":
            # The length itself does not matter to the exporter, only NULL (no such column) or not.
            exists = getattr(self.data, "column_exists", None)
            if exists is None or values[0] is None or values[1] is None:
                return None
            return 8 if exists(str(values[0]).lower(), str(values[1])) else None
        if name == "DB_NAME":
            # NULL for an id no database has, as SQL Server answers.
            lookup = getattr(self.data, "database_name", None)
            return lookup(values[0]) if lookup is not None and values else None
        if name in ("SYSUTCDATETIME", "GETUTCDATE"):
            return self.data.utcnow()
        if name in ("DATEDIFF", "DATEDIFF_BIG"):
            part, start, end = values
            seconds = (_as_datetime(end) - _as_datetime(start)).total_seconds()
            return int(seconds / _DATEPARTS[str(part)])
        if name in ("ERROR_NUMBER", "ERROR_MESSAGE"):
            if err is None:
                return None
            return err.number if name == "ERROR_NUMBER" else err.message
        if name in ("ISNULL", "COALESCE"):
            return next((v for v in values if v is not None), None)
        raise SqlRuntimeError(195, f"'{name}' is not a recognized built-in function name.")


_AGGREGATES = frozenset({"SUM", "MIN", "MAX", "COUNT", "COUNT_BIG"})


def _walk(e: object) -> Iterator[tuple]:
    if isinstance(e, tuple) and e and isinstance(e[0], str):
        yield e
    if isinstance(e, tuple | list):
        for part in e:
            if isinstance(part, tuple | list):
                yield from _walk(part)


def _has_aggregate(e: Expr) -> bool:
    return any(x[0] == "call" and len(x) == 3 and x[1] in _AGGREGATES for x in _walk(e))


def _has_column(e: Expr) -> bool:
    return any(x[0] == "col" and len(x) == 3 for x in _walk(e))


def _group_key(value: object) -> object:
    return value.rstrip(" ").casefold() if isinstance(value, str) else value


def like(value: str, pattern: str) -> bool:
    """SQL Server LIKE under a case-insensitive collation: every character counts, trailing blanks too."""
    regex = ["^"]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "%":
            regex.append(".*")
        elif ch == "_":
            regex.append(".")
        elif ch == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                regex.append(re.escape(ch))
            else:
                body = pattern[i + 1 : end]
                regex.append(
                    "[^" + re.escape(body[1:]) + "]" if body.startswith("^") else "[" + re.escape(body) + "]"
                )
                i = end
        else:
            regex.append(re.escape(ch))
        i += 1
    regex.append("$")
    return re.match("".join(regex), value, re.IGNORECASE | re.DOTALL) is not None


def _equal(a: object, b: object) -> bool:
    if a is None or b is None:
        return False
    if isinstance(a, str) and isinstance(b, str):
        # `=` pads the shorter string with blanks before comparing, so trailing blanks never matter.
        return a.rstrip(" ").casefold() == b.rstrip(" ").casefold()
    return a == b


def _compare(op: str, a: object, b: object) -> bool:
    if a is None or b is None:
        return False
    if op == "=":
        return _equal(a, b)
    if op in ("<>", "!="):
        return not _equal(a, b)
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.rstrip(" ").casefold(), b.rstrip(" ").casefold()
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]  # type: ignore[operator]


def _truth(value: object) -> bool:
    return bool(value) and value is not None


def _arith(op: str, a: object, b: object) -> object:
    x, y = a, b  # numbers only; the exporter never does string arithmetic
    if op == "+":
        return x + y  # type: ignore[operator]
    if op == "-":
        return x - y  # type: ignore[operator]
    if op == "*":
        return x * y  # type: ignore[operator]
    if isinstance(x, int) and isinstance(y, int):
        return int(x / y)
    return x / y  # type: ignore[operator]


def _cast(value: object, type_name: str) -> object:
    if value is None:
        return None
    if type_name in ("nvarchar", "varchar", "nchar", "char", "sysname"):
        return str(value)
    if type_name in ("int", "bigint", "smallint", "tinyint"):
        return int(value)  # type: ignore[call-overload]
    if type_name in ("float", "real", "decimal", "numeric"):
        return float(value)  # type: ignore[arg-type]
    if type_name == "bit":
        return bool(value)
    return value


def _as_datetime(value: object) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, str):
        return dt.datetime.strptime(value.strip()[:8], "%Y%m%d")
    raise SqlRuntimeError(241, "Conversion failed when converting date and/or time from character string.")


def _column_type(expr: Expr, rows: list[tuple[object, ...]], index: int) -> str:
    for row in rows:
        value = row[index]
        if value is None:
            continue
        if isinstance(value, bool):
            return "bit"
        if isinstance(value, int):
            return "bigint"
        if isinstance(value, float):
            return "float"
        if isinstance(value, dt.datetime):
            return "datetime"
        return "nvarchar"
    if expr[0] == "cast" and expr[2] in ("int", "bigint"):
        return "bigint"
    return "nvarchar"


def iter_selects(stmts: Sequence[object]) -> Iterator[Select]:
    """Every SELECT in a parsed batch, dynamic SQL included (for tests that inspect the batch)."""
    for stmt in stmts:
        if isinstance(stmt, Select):
            yield stmt
        elif isinstance(stmt, TryCatch):
            yield from iter_selects(stmt.body)
            yield from iter_selects(stmt.handler)
        elif isinstance(stmt, If):
            yield from iter_selects([s for s in (stmt.then, stmt.otherwise) if s is not None])
        elif isinstance(stmt, ExecSql):
            yield from iter_selects(parse(stmt.sql))
