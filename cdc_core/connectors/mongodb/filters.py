"""`additional-conditions` and chunk ranges as MongoDB filter documents.

A signal's filter text is parsed into the one restricted grammar every source shares
(`cdc_core.signals.conditions`); here its tree becomes a filter document whose literals
are BSON values. Nothing in a signal reaches the server as an operator of its choosing:
no `$where`, no JavaScript, no operator name taken from the text.

Chunks follow `_id` in BSON order across types (MinKey < undefined < null < numbers <
strings < objects < arrays < binary < ObjectId < booleans < dates < timestamps < regexes
< DBPointers < JavaScript < JavaScript with scope < MaxKey, as MongoDB orders them).
MongoDB's `$gt`/`$lte` compare within one type bracket only, so a bound of one type says
nothing about `_id`s of another: each range adds the whole brackets before or after its
bound's (`$type`), and mixed `_id`s are chunked as `sort({_id: 1})` orders them.

A condition's text has one kind of literal for a time, a quoted string
(`ts >= '2025-03-01 00:00:00'`, as a backfill run writes for its data interval), while a
document's time is a BSON date, and MongoDB never compares a string with a date. So a
comparison with a string that reads as an ISO date or timestamp matches a field holding
either: the string as written, or the BSON date at that instant (UTC unless the text has
an offset). A field holds one type, so at most one of the two can match. Dates have
milliseconds, so a bound finer than that is rounded the way that keeps the comparison's
meaning (`>= x.0005` is `>= x.001`).

The deprecated types (`undefined`, `symbol`, `dbPointer`) and JavaScript (`javascript`,
`javascriptWithScope`) are named only where the server knows them (`unknown` leaves them
out): a server that rejects the alias cannot hold such a value (mongo-java-server is
one), and naming it there would fail every chunk query.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from cdc_core.signals.conditions import (
    Between,
    Compare,
    Condition,
    InList,
    IsNull,
    Junction,
    Like,
    Not,
    QueryDocument,
)
from cdc_core.signals.literals import BinaryLiteral, KeyBound, ObjectIdLiteral, RegexLiteral, TimestampLiteral

_OPS = {"=": "$eq", "!=": "$ne", "<>": "$ne", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}

# BSON type aliases in comparison order, one bracket per entry: MongoDB's own
# (`canonicalizeBSONType`, src/mongo/bson/bsontypes.h: MinKey, undefined 0, null 5,
# numbers 10, string and symbol 15, object 20, array 25, binData 30, objectId 35, bool
# 40, date 45, timestamp 47, regex 50, dbPointer 55, javascript 60, javascriptWithScope
# 65, MaxKey).
BRACKETS: tuple[tuple[str, ...], ...] = (
    ("minKey",),
    ("undefined",),
    ("null",),
    ("double", "int", "long", "decimal"),
    ("string", "symbol"),
    ("object",),
    ("array",),
    ("binData",),
    ("objectId",),
    ("bool",),
    ("date",),
    ("timestamp",),
    ("regex",),
    ("dbPointer",),
    ("javascript",),
    ("javascriptWithScope",),
    ("maxKey",),
)
_BRACKET = {alias: i for i, aliases in enumerate(BRACKETS) for alias in aliases}


def bracket_of(value: Any) -> int:
    """The index in BRACKETS of a BSON value's type, as pymongo decodes it. (pymongo
    decodes `undefined` as None and a DBPointer as a DBRef, which it encodes as the
    document it is: neither can be told from what it decodes to, and MongoDB refuses
    `undefined` as an `_id`.)"""
    from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
    from bson.datetime_ms import DatetimeMS
    from bson.dbref import DBRef

    if value is None:
        return _BRACKET["null"]
    checks: tuple[tuple[str, Any], ...] = (
        ("minKey", MinKey),
        ("maxKey", MaxKey),
        ("bool", bool),  # (a bool is an int)
        ("double", (int, float, Int64, Decimal128)),
        ("javascript", Code),  # (Code is a str)
        ("string", str),
        ("objectId", ObjectId),
        ("binData", (Binary, bytes, uuid.UUID)),
        ("date", (dt.datetime, DatetimeMS)),
        ("timestamp", Timestamp),
        ("regex", (Regex, re.Pattern)),
        ("object", (Mapping, DBRef)),
        ("array", (list, tuple)),
    )
    for alias, kinds in checks:
        if isinstance(value, kinds):
            if alias == "javascript" and value.scope is not None:
                return _BRACKET["javascriptWithScope"]
            return _BRACKET[alias]
    raise ValueError(f"an _id of type {type(value).__name__} has no BSON order here")


# Type aliases a server may not know (deprecated types, JavaScript): each is asked once per
# session and left out where the server rejects it (see the module's doc).
PROBED = ("undefined", "symbol", "dbPointer", "javascript", "javascriptWithScope")


def _types(brackets: range, unknown: frozenset[str]) -> list[str]:
    return [alias for i in brackets for alias in BRACKETS[i] if alias not in unknown]


def after(bound: Any, unknown: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`_id` after `bound` in BSON order. (The null bracket holds null alone: nothing of it
    is after null.)"""
    index = bracket_of(bound)
    later = _types(range(index + 1, len(BRACKETS)), unknown)
    if bound is None:
        return {"_id": {"$type": later}}
    same = {"_id": {"$gt": bound}}
    return {"$or": [same, {"_id": {"$type": later}}]} if later else same


def up_to(bound: Any, unknown: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`_id` at or before `bound` in BSON order. (Up to null is null itself, asked for by
    equality: `$lte: null` is MongoDB's too, but mongo-java-server matches nothing with it.)"""
    index = bracket_of(bound)
    earlier = _types(range(index), unknown)
    same = {"_id": None} if bound is None else {"_id": {"$lte": bound}}
    return {"$or": [same, {"_id": {"$type": earlier}}]} if earlier else same


def chunk_filter(
    lo_key: tuple[Any] | None,
    hi_key: tuple[Any] | None,
    condition: Condition | None,
    unknown: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The filter of window `(lo, hi]` and the signal's condition. The bounds are keys,
    `(_id,)`, or None for no bound: an `_id` of null is a bound like any other (taken for
    none, a window from null read the collection's start again). `unknown`: type aliases
    the server does not know (see the module's doc)."""
    lo = None if lo_key is None else lo_key[0]
    hi = None if hi_key is None else hi_key[0]
    parts = []
    if lo_key is not None and hi_key is not None and bracket_of(lo) == bracket_of(hi):
        # Every `_id` between two bounds of one bracket is of that bracket: one range, which
        # a server can answer from the `_id` index alone (mongo-java-server scans the whole
        # collection for an `$or` with `$type`: 1.6 s against 0.45 s a 65,536-document
        # window of a 1,000,000-document collection).
        parts.append({"_id": {"$gt": lo, "$lte": hi}})
    else:
        if lo_key is not None:
            parts.append(after(lo, unknown))
        if hi_key is not None:
            parts.append(up_to(hi, unknown))
    if condition is not None:
        parts.append(render(condition))
    if not parts:
        return {}
    return parts[0] if len(parts) == 1 else {"$and": parts}


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?)?")
_MS = dt.timedelta(milliseconds=1)


def as_date(value: Any) -> dt.datetime | None:
    """The UTC instant a string literal names, if it is an ISO date or timestamp."""
    if not isinstance(value, str) or not _ISO_DATE.fullmatch(value):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _to_ms(moment: dt.datetime, up: bool) -> dt.datetime:
    floor = moment - dt.timedelta(microseconds=moment.microsecond % 1000)
    return floor + _MS if up and floor != moment else floor


def bson_number(value: Any) -> Any:
    """A condition's number as BSON can hold it. A decimal is a double, as in a JSON filter
    (Debezium's form, and the type a `9.99` is stored as), unless a double cannot hold
    its digits: then a Decimal128, exact to 34 digits. An integer beyond 64 bits is a
    Decimal128 too; past 34 digits a double, which still orders it against every int64."""
    from bson import Decimal128

    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return value
    if isinstance(value, int) and -(1 << 63) <= value < 1 << 63:
        return value
    exact = Decimal(value)
    if isinstance(value, Decimal) and len(exact.as_tuple().digits) <= 15:
        return float(exact)
    try:
        return Decimal128(exact)
    except decimal.Inexact:
        return float(exact)


def bson_value(value: Any) -> Any:
    """A checked filter's value (`cdc_core.signals.literals`; a query document's values
    and embedded documents) as the BSON value it names; a Decimal (a query document's
    `$numberDecimal`) exact."""
    from bson import Binary, Decimal128, MaxKey, MinKey, ObjectId, Regex, Timestamp

    kind = type(value)
    if kind is dict:
        return {k: bson_value(v) for k, v in value.items()}
    if kind is list:
        return [bson_value(v) for v in value]
    if isinstance(value, dt.date):
        return _instant(value)
    if isinstance(value, ObjectIdLiteral):
        return ObjectId(value.hex)
    if isinstance(value, BinaryLiteral):
        return Binary(value.data, value.subtype)
    if isinstance(value, RegexLiteral):
        return Regex(value.pattern, value.options)
    if isinstance(value, TimestampLiteral):
        return Timestamp(value.time, value.inc)
    if isinstance(value, KeyBound):
        return MaxKey() if value.high else MinKey()
    if isinstance(value, Decimal):  # a query document's $numberDecimal, exact
        return Decimal128(value)
    return value


def _grammar_value(value: Any) -> Any:
    """A grammar literal as BSON: its numbers as `bson_number` makes them."""
    return bson_value(bson_number(value))


def _instant(value: dt.date) -> dt.datetime:
    """A date literal's instant: a DATE at midnight UTC, a TIMESTAMP without offset in UTC."""
    if not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _compare(column: str, op: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dt.date):  # a date literal matches BSON dates only
        moment = _instant(value)
        if moment.microsecond % 1000 == 0:
            return {column: {_OPS[op]: moment}}
        if op in ("=", "!=", "<>"):  # no date is between two milliseconds
            return {column: {"$in" if op == "=" else "$nin": []}}
        return {column: {_OPS[op]: _to_ms(moment, up=op in (">=", "<"))}}
    value = _grammar_value(value)
    moment = as_date(value)
    if moment is None:
        return {column: {_OPS[op]: value}}
    exact = moment.microsecond % 1000 == 0
    if op in ("=", "!=", "<>"):
        dates = [moment] if exact else []  # no date is between two milliseconds
        return {column: {"$in" if op == "=" else "$nin": [value, *dates]}}
    bound = _to_ms(moment, up=op in (">=", "<"))
    return {"$or": [{column: {_OPS[op]: value}}, {column: {_OPS[op]: bound}}]}


def _in_list(column: str, values: tuple[Any, ...], negated: bool) -> dict[str, Any]:
    typed = [_instant(v) for v in values if isinstance(v, dt.date)]
    values = tuple(_grammar_value(v) for v in values if not isinstance(v, dt.date))
    dates = [m for m in map(as_date, values) if m is not None]
    exact = [m for m in (*typed, *dates) if m.microsecond % 1000 == 0]
    return {column: {"$nin" if negated else "$in": [*values, *exact]}}


def render(condition: Condition) -> dict[str, Any]:
    """A condition tree as a filter document (field names as parsed, values as BSON)."""
    if isinstance(condition, QueryDocument):
        return bson_value(condition.document)
    if isinstance(condition, Compare):
        return _compare(condition.column, condition.op, condition.value)
    if isinstance(condition, InList):
        return _in_list(condition.column, condition.values, condition.negated)
    if isinstance(condition, Between):
        column, low, high = condition.column, condition.low, condition.high
        if condition.negated:
            return {"$or": [_compare(column, "<", low), _compare(column, ">", high)]}
        if not any(isinstance(v, dt.date) or as_date(v) for v in (low, high)):
            return {column: {"$gte": _grammar_value(low), "$lte": _grammar_value(high)}}
        return {"$and": [_compare(column, ">=", low), _compare(column, "<=", high)]}
    if isinstance(condition, IsNull):
        return {condition.column: {"$ne": None}} if condition.negated else {condition.column: None}
    if isinstance(condition, Like):
        pattern = re.compile(like_to_regex(condition.pattern), re.DOTALL)
        return (
            {condition.column: {"$not": pattern}}
            if condition.negated
            else {condition.column: {"$regex": pattern}}
        )
    if isinstance(condition, Not):
        return {"$nor": [render(condition.operand)]}
    assert isinstance(condition, Junction)
    return {"$and" if condition.op == "AND" else "$or": [render(o) for o in condition.operands]}


def like_to_regex(pattern: str) -> str:
    """SQL LIKE (`%`, `_`, `\\` escapes) as an anchored regex of literal text."""
    out, escaped = ["^"], False
    for char in pattern:
        if escaped:
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return "".join(out) + "$"
