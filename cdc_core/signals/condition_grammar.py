"""The filter grammar's tokenizer and parser (the grammar is in `conditions.py`'s
docstring): text in, a condition tree out, or a ConditionError saying where and why."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cdc_core.signals.conditions import (
    MAX_DEPTH,
    MAX_IN_LIST,
    Between,
    Compare,
    Condition,
    ConditionError,
    InList,
    IsNull,
    Junction,
    Like,
    Not,
)
from cdc_core.signals.literals import (
    LiteralError,
    bounded_number,
    iso_date,
    object_id,
    sql_date,
    sql_timestamp,
)

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<bquoted>`(?:[^`]|``)+`)
  | (?P<dquoted>"(?:[^"]|"")+")
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z0-9_$]+)*)
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


class GrammarParser:
    """`columns`: the table's column names (matched case-insensitively); `any_field`: a
    document collection's filter, which names any field path instead."""

    def __init__(self, text: str, columns: Iterable[str], any_field: bool) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0
        self.any_field = any_field
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
            if token.kind == "word" and "." in name and not self.any_field:
                hint = " (a dotted name is a field path of a document collection; a column whose name has a dot goes in backquotes)"
            raise self.error(f"unknown column {name!r}{hint}")
        self.i += 1
        return known

    def number(self, text: str) -> int | Decimal:
        try:
            value = bounded_number(text)
        except LiteralError as exc:
            raise self.error(str(exc)) from None
        return int(value) if re.fullmatch(r"[-+]?\d+", text) else value

    def typed(self, token: _Token) -> tuple[bool, Any]:
        """The typed literal starting at `token` (a word), if it is one: `ObjectId('…')`,
        `ISODate('…')`, `TIMESTAMP '…'`, `DATE '…'`."""
        word = token.text.upper()
        rest = self.tokens[self.i + 1 : self.i + 4]
        if word in ("OBJECTID", "ISODATE") and rest[:1] and rest[0].text == "(":
            if len(rest) < 3 or rest[1].kind not in ("string", "dquoted") or rest[2].text != ")":
                self.i += 1
                raise self.error(f"{token.text}(...) takes one quoted text, as in {token.text}('...')")
            quoted, used = rest[1], 4
        elif word in ("TIMESTAMP", "DATE") and rest[:1] and rest[0].kind == "string":
            quoted, used = rest[0], 2
        else:
            return False, None
        text = quoted.text[1:-1].replace(quoted.text[0] * 2, quoted.text[0])
        try:
            if word == "OBJECTID" and not self.any_field:
                raise LiteralError("an ObjectId is a MongoDB value: no column of a SQL table holds one")
            value = {
                "OBJECTID": object_id,
                "ISODATE": iso_date,
                "TIMESTAMP": sql_timestamp,
                "DATE": sql_date,
            }[word](text)
        except LiteralError as exc:
            raise self.error(str(exc)) from None
        self.i += used
        return True, value

    def literal(self) -> Any:
        token = self.peek()
        if token is None:
            raise self.error("expected a value")
        if token.kind == "word":
            found, value = self.typed(token)
            if found:
                return value
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
