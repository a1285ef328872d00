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
                | name ("." part)*          (a field path; document collections only)
    literal    := number | 'string' ('' escapes a quote) | TRUE | FALSE
                | ObjectId('24 hex digits')  (document collections only)
                | ISODate('2025-03-01T10:00:00Z')     (an instant; UTC without an offset)
                | TIMESTAMP '2025-03-01 10:00:00'     (SQL's; with an offset, an instant)
                | DATE '2025-03-01'

Keywords and the literal words are case-insensitive. A document collection's filter names
any field (`condition_fields`), a nested one by its dotted path (`address.city`, or in
backquotes); no part of a path is empty or starts with `$`. ObjectId is a MongoDB value: a
SQL table's filter that uses one is refused. A date literal is bound as a date or
timestamp by a SQL source (an instant as UTC, the chunk readers' session time zone) and
is a BSON date in a document collection (a DATE at midnight UTC, a TIMESTAMP without
offset in UTC).

A document collection's filter may instead be a JSON query document, Debezium's MongoDB
form (`{"color": "blue", "qty": {"$gt": 5}}`): see `query_documents.py` for what it
allows. A SQL table's filter that is one is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc_core.errors import TidemarkError
from cdc_core.signals.literals import MAX_DIGITS as MAX_DIGITS  # the number limits, named here too
from cdc_core.signals.literals import MAX_EXPONENT as MAX_EXPONENT
from cdc_core.signals.literals import LiteralError, sql_value

MAX_LENGTH = 4096
MAX_DEPTH = 32
MAX_IN_LIST = 1000


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


@dataclass(frozen=True)
class QueryDocument:
    """A JSON query document (`query_documents.py`): its text, and the document it was
    checked into, with Extended JSON values as typed literals (`literals.py`)."""

    text: str
    document: Any = field(compare=False, hash=False)

    @property
    def fields(self) -> set[str]:
        """The field paths it names at the top level and under `$and`/`$or`/`$nor`."""
        found: set[str] = set()

        def walk(doc: Any) -> None:
            for key, value in doc.items():
                if key in ("$and", "$or", "$nor"):
                    for part in value:
                        walk(part)
                elif not key.startswith("$"):
                    found.add(key)

        walk(self.document)
        return found


Condition = Compare | InList | Between | IsNull | Like | Not | Junction | QueryDocument


class _AnyField(tuple):
    """The fields of a document collection: any name or dotted path (`a.b`), except one
    with an empty part or a part starting with `$`, which a document database would read
    as an operator."""


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
    from cdc_core.signals.condition_grammar import GrammarParser  # (it imports this module's tree)

    if text.lstrip().startswith("{"):
        if columns is not ANY_FIELD:
            raise ConditionError(
                'a JSON query document ({"color": "blue"}, Debezium\'s MongoDB form) filters a document '
                "collection; this table's filter is written in the grammar, e.g. color = 'blue'"
            )
        from cdc_core.signals.query_documents import parse_query_document

        return parse_query_document(text)
    return GrammarParser(text, columns, columns is ANY_FIELD).parse()


def render(
    condition: Condition, quote: Callable[[str], str], placeholder: str = "%s"
) -> tuple[str, list[Any]]:
    """SQL text with `placeholder` for every literal, and the parameters in order."""
    params: list[Any] = []

    def value(v: Any) -> str:
        try:
            params.append(sql_value(v))
        except LiteralError as exc:
            raise ConditionError(str(exc)) from None
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
        if isinstance(c, QueryDocument):
            raise ConditionError("a JSON query document filters a document collection, not a SQL table")
        return "(" + f" {c.op} ".join(walk(o) for o in c.operands) + ")"

    return walk(condition), params


def columns_of(condition: Condition) -> set[str]:
    """The columns a condition reads (e.g. to check they are still there after DDL)."""
    if isinstance(condition, Not):
        return columns_of(condition.operand)
    if isinstance(condition, Junction):
        return set().union(*(columns_of(o) for o in condition.operands))
    if isinstance(condition, QueryDocument):
        return condition.fields
    return {condition.column}
