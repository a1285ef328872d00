"""`additional-conditions` filters: untrusted text parsed into a small predicate grammar.

A signal's filter comes from whoever can write to the signal table, topic or file, so it is
never pasted into SQL. It is parsed into a tree over the table's own columns, and the chunk
reader renders that tree itself: identifiers quoted by the source's dialect, every literal
bound as a parameter. Anything outside the grammar is refused with a message that says
where and why.

    condition  := or
    or         := and ("OR" and)*
    and        := not ("AND" not)*
    not        := "NOT" not | "(" condition ")" | predicate
    predicate  := column cmp literal
                | column ["NOT"] "IN" "(" literal ("," literal)* ")"
                | column ["NOT"] "BETWEEN" literal "AND" literal
                | column "IS" ["NOT"] "NULL"
                | column ["NOT"] "LIKE" string
    cmp        := "=" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    column     := name | `quoted name` | "quoted name"
    literal    := number | 'string' ('' escapes a quote) | TRUE | FALSE
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from cdc_core.errors import TidemarkError

MAX_LENGTH = 4096
MAX_DEPTH = 32
MAX_IN_LIST = 1000
# A number literal's bounds: MySQL's DECIMAL digits and a double's exponent. Beyond them no
# source compares exactly, and `1e999999999` written out for a server is a gigabyte of text.
MAX_DIGITS = 65
MAX_EXPONENT = 308


class ConditionError(TidemarkError):
    """An additional condition outside the allowed grammar or naming unknown columns."""


@dataclass(frozen=True)
class Compare:
    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Any, ...]
    negated: bool = False


@dataclass(frozen=True)
class Between:
    column: str
    low: Any
    high: Any
    negated: bool = False


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool = False


@dataclass(frozen=True)
class Like:
    column: str
    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class Not:
    operand: Condition


@dataclass(frozen=True)
class Junction:
    op: str  # "AND" | "OR"
    operands: tuple[Condition, ...]


Condition = Compare | InList | Between | IsNull | Like | Not | Junction

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<bquoted>`(?:[^`]|``)+`)
  | (?P<dquoted>"(?:[^"]|"")+")
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<op><=|>=|<>|!=|=|<|>)
  | (?P<punct>[(),])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "LIKE", "TRUE", "FALSE"}


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    at: int


def _tokens(text: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None:
            raise ConditionError(f"unexpected character {text[at]!r} at offset {at}")
        kind = m.lastgroup or ""
        if kind != "ws":
            found.append(_Token(kind, m.group(), at))
        at = m.end()
    return found


class _Parser:
    def __init__(self, text: str, columns: Iterable[str]) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0
        self.any_field = columns is ANY_FIELD
        self.columns = {c.lower(): c for c in columns}

    def error(self, message: str) -> ConditionError:
        where = self.tokens[self.i].at if self.i < len(self.tokens) else len(self.text)
        return ConditionError(f"{message} at offset {where} in {self.text!r}")

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def keyword(self, *words: str) -> str | None:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.upper() in words:
            self.i += 1
            return token.text.upper()
        return None

    def expect_keyword(self, word: str) -> None:
        if self.keyword(word) is None:
            raise self.error(f"expected {word}")

    def punct(self, symbol: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == symbol:
            self.i += 1
            return True
        return False

    def parse(self) -> Condition:
        if not self.tokens:
            raise ConditionError("empty condition")
        condition = self.disjunction()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek().text!r}")  # type: ignore[union-attr]
        return condition

    def disjunction(self) -> Condition:
        operands = [self.conjunction()]
        while self.keyword("OR"):
            operands.append(self.conjunction())
        return operands[0] if len(operands) == 1 else Junction("OR", tuple(operands))

    def conjunction(self) -> Condition:
        operands = [self.negation()]
        while self.keyword("AND"):
            operands.append(self.negation())
        return operands[0] if len(operands) == 1 else Junction("AND", tuple(operands))

    def negation(self) -> Condition:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error("condition nested too deeply")
        try:
            if self.keyword("NOT"):
                return Not(self.negation())
            if self.punct("("):
                inner = self.disjunction()
                if not self.punct(")"):
                    raise self.error("expected ')'")
                return inner
            return self.predicate()
        finally:
            self.depth -= 1

    def column(self) -> str:
        token = self.peek()
        if token is None:
            raise self.error("expected a column name")
        if token.kind == "word" and token.text.upper() not in _KEYWORDS:
            name = token.text
        elif token.kind == "bquoted":
            name = token.text[1:-1].replace("``", "`")
        elif token.kind == "dquoted":
            name = token.text[1:-1].replace('""', '"')
        else:
            raise self.error(f"expected a column name, found {token.text!r}")
        # A document path: no part empty or an operator's (`a.$gt`), no NUL.
        path = self.any_field and "\0" not in name and all(p and p[0] != "$" for p in name.split("."))
        known = name if path else None
        known = known or self.columns.get(name.lower())
        if known is None:
            hint = " (string literals need single quotes)" if token.kind == "word" else ""
            raise self.error(f"unknown column {name!r}{hint}")
        self.i += 1
        return known

    def number(self, text: str) -> int | Decimal:
        try:
            value = Decimal(text)  # the token is a number's syntax: this fails on its size alone
        except InvalidOperation:
            value = None
        if value is None or len(value.as_tuple().digits) > MAX_DIGITS or abs(value.adjusted()) > MAX_EXPONENT:
            raise self.error(
                f"the number {text[:40]!r} is out of range: at most {MAX_DIGITS} digits, exponents "
                f"within ±{MAX_EXPONENT}"
            )
        return int(value) if re.fullmatch(r"[-+]?\d+", text) else value

    def literal(self) -> Any:
        token = self.peek()
        if token is None:
            raise self.error("expected a value")
        self.i += 1
        if token.kind == "number":
            return self.number(token.text)
        if token.kind == "string":
            return token.text[1:-1].replace("''", "'")
        if token.kind == "word" and token.text.upper() in ("TRUE", "FALSE"):
            return token.text.upper() == "TRUE"
        self.i -= 1
        if token.kind == "word" and token.text.upper() not in _KEYWORDS:
            raise self.error(
                f"expected a value, found {token.text!r}: comparing columns is not allowed; quote strings as "
                f"'{token.text}'"
            )
        raise self.error(f"expected a value, found {token.text!r}")

    def predicate(self) -> Condition:
        column = self.column()
        token = self.peek()
        if token is not None and token.kind == "op":
            self.i += 1
            op = "!=" if token.text == "<>" else token.text
            return Compare(column, op, self.literal())
        if self.keyword("IS"):
            negated = self.keyword("NOT") is not None
            self.expect_keyword("NULL")
            return IsNull(column, negated)
        negated = self.keyword("NOT") is not None
        if self.keyword("IN"):
            if not self.punct("("):
                raise self.error("expected '(' after IN")
            values = [self.literal()]
            while self.punct(","):
                values.append(self.literal())
                if len(values) > MAX_IN_LIST:
                    raise self.error(f"IN lists are limited to {MAX_IN_LIST} values")
            if not self.punct(")"):
                raise self.error("expected ')' to close the IN list")
            return InList(column, tuple(values), negated)
        if self.keyword("BETWEEN"):
            low = self.literal()
            self.expect_keyword("AND")
            return Between(column, low, self.literal(), negated)
        if self.keyword("LIKE"):
            pattern = self.literal()
            if not isinstance(pattern, str):
                raise self.error("LIKE needs a string pattern")
            return Like(column, pattern, negated)
        raise self.error(f"expected a comparison after column {column!r}")


class _AnyField(tuple):
    """The fields of a document collection: any name (a path in backquotes, `a.b`), except
    one starting with `$`, which a document database would read as an operator."""


ANY_FIELD = _AnyField()


def condition_fields(schema: Any) -> Iterable[str]:
    """What a table's filters may name: its columns, or any field of a collection's documents."""
    return ANY_FIELD if getattr(schema, "documents", False) else schema.column_names


def parse_condition(text: str, columns: Iterable[str]) -> Condition:
    """Parse a filter over `columns` (the table's column names, matched case-insensitively;
    `ANY_FIELD` for a document collection)."""
    if not isinstance(text, str):
        raise ConditionError("a filter must be a string")
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"a filter is limited to {MAX_LENGTH} characters")
    return _Parser(text, columns).parse()


def render(
    condition: Condition, quote: Callable[[str], str], placeholder: str = "%s"
) -> tuple[str, list[Any]]:
    """SQL text with `placeholder` for every literal, and the parameters in order."""
    params: list[Any] = []

    def value(v: Any) -> str:
        params.append(v)
        return placeholder

    def walk(c: Condition) -> str:
        if isinstance(c, Compare):
            return f"{quote(c.column)} {c.op} {value(c.value)}"
        if isinstance(c, InList):
            items = ", ".join(value(v) for v in c.values)
            return f"{quote(c.column)} {'NOT IN' if c.negated else 'IN'} ({items})"
        if isinstance(c, Between):
            word = "NOT BETWEEN" if c.negated else "BETWEEN"
            return f"{quote(c.column)} {word} {value(c.low)} AND {value(c.high)}"
        if isinstance(c, IsNull):
            return f"{quote(c.column)} IS {'NOT NULL' if c.negated else 'NULL'}"
        if isinstance(c, Like):
            return f"{quote(c.column)} {'NOT LIKE' if c.negated else 'LIKE'} {value(c.pattern)}"
        if isinstance(c, Not):
            return f"NOT ({walk(c.operand)})"
        return "(" + f" {c.op} ".join(walk(o) for o in c.operands) + ")"

    return walk(condition), params


def columns_of(condition: Condition) -> set[str]:
    """The columns a condition reads (e.g. to check they are still there after DDL)."""
    if isinstance(condition, Not):
        return columns_of(condition.operand)
    if isinstance(condition, Junction):
        return set().union(*(columns_of(o) for o in condition.operands))
    return {condition.column}
