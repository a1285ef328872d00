"""Typed values of `additional-conditions` beyond JSON's: what a filter may compare a field
with in a document database, kept apart from any driver.

The grammar writes them as the mongo shell does (`ObjectId('…')`, `ISODate('…')`) or
as SQL does (`TIMESTAMP '…'`, `DATE '…'`); a JSON query document writes them in
Extended JSON (`query_documents.py`), read here (`extended_json`) without a driver. A date is a Python `datetime` (or `date`), which
every source binds; the others are the value classes below, which only a document
source renders (MongoDB, as BSON values) and which a SQL source refuses with the reason
(`sql_value`).
"""

from __future__ import annotations

import base64
import datetime as dt
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

# A number literal's bounds: MySQL's DECIMAL digits and a double's exponent. Beyond them no
# source compares exactly, and `1e999999999` written out for a server is a gigabyte of text.
MAX_DIGITS = 65
MAX_EXPONENT = 308
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class LiteralError(ValueError):
    """A typed literal whose text is not a value of its type."""


@dataclass(frozen=True)
class ObjectIdLiteral:
    hex: str  # 24 lowercase hexadecimal digits


@dataclass(frozen=True)
class BinaryLiteral:
    data: bytes
    subtype: int


@dataclass(frozen=True)
class RegexLiteral:
    pattern: str
    options: str


@dataclass(frozen=True)
class TimestampLiteral:
    time: int
    inc: int


@dataclass(frozen=True)
class KeyBound:
    """MinKey (`high` False) or MaxKey."""

    high: bool


DOCUMENT_ONLY = (ObjectIdLiteral, BinaryLiteral, RegexLiteral, TimestampLiteral, KeyBound)
_NAMES = {
    ObjectIdLiteral: "an ObjectId",
    BinaryLiteral: "a BSON binary",
    RegexLiteral: "a regular expression",
    TimestampLiteral: "a BSON timestamp",
    KeyBound: "MinKey/MaxKey",
}

_HEX24 = re.compile(r"[0-9a-fA-F]{24}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DATETIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})([ T](?P<time>\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)(?P<zone>Z|[+-]\d{2}:?\d{2})?)?"
)


def bounded_number(text: str) -> Decimal:
    """A number's text (its syntax already checked) as a Decimal within the bounds."""
    try:
        value = Decimal(text)  # the text is a number's syntax: this fails on its size alone
    except InvalidOperation:
        value = None
    if value is None or len(value.as_tuple().digits) > MAX_DIGITS or abs(value.adjusted()) > MAX_EXPONENT:
        raise LiteralError(
            f"the number {text[:40]!r} is out of range: at most {MAX_DIGITS} digits, exponents within "
            f"±{MAX_EXPONENT}"
        )
    return value


def object_id(text: str) -> ObjectIdLiteral:
    if not isinstance(text, str) or not _HEX24.fullmatch(text):
        raise LiteralError(f"an ObjectId is 24 hexadecimal digits, not {str(text)[:40]!r}")
    return ObjectIdLiteral(text.lower())


def iso_date(text: str) -> dt.datetime:
    """`ISODate('2025-03-01')`, `ISODate('2025-03-01T10:00:00.123Z')`: an instant, UTC
    unless the text names an offset (as the mongo shell reads it)."""
    moment = _moment(text, "ISODate")
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def sql_timestamp(text: str) -> dt.datetime:
    """`TIMESTAMP '2025-03-01 10:00:00[.ffffff][+02:00]'`: without an offset the wall-clock
    time SQL compares as written (a document source reads it as UTC), with one an instant."""
    moment = _moment(text, "TIMESTAMP")
    return moment if moment.tzinfo is None else moment.astimezone(dt.UTC)


def sql_date(text: str) -> dt.date:
    if not isinstance(text, str) or not _DATE.fullmatch(text):
        raise LiteralError(f"DATE takes 'YYYY-MM-DD', not {str(text)[:40]!r}")
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise LiteralError(f"DATE {text!r}: {exc}") from None


def _moment(text: str, name: str) -> dt.datetime:
    if not isinstance(text, str) or not _DATETIME.fullmatch(text):
        raise LiteralError(
            f"{name} takes an ISO date or timestamp ('2025-03-01', '2025-03-01T10:00:00.123Z', "
            f"'2025-03-01 10:00:00+02:00'), not {str(text)[:40]!r}"
        )
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise LiteralError(f"{name} {text!r}: {exc}") from None


def document_only(value: Any) -> str | None:
    """What a value is, when only a document source can compare with it; else None."""
    return _NAMES.get(type(value))


def sql_value(value: Any) -> Any:
    """A literal as a SQL source binds it: an instant as UTC wall-clock time (the chunk
    readers' sessions run in UTC); a document source's value refused with the reason."""
    kind = document_only(value)
    if kind is not None:
        raise LiteralError(f"{kind} is a MongoDB value: no column of a SQL table holds one")
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def extended_json(value: dict[str, Any]) -> Any:
    """The typed value of an Extended JSON wrapper (canonical, relaxed or legacy: `{"$oid":
    ...}`, `{"$date": ...}`, `{"$numberLong": "5"}`, ...); a ValueError (a LiteralError
    among them) for one that is malformed, JavaScript code or a deprecated type."""
    (kind, *_) = sorted(value)  # "$binary" before "$type", "$code" before "$scope"
    arg = value[kind]
    if kind == "$oid":
        return object_id(arg)
    if kind == "$date":
        return _date(arg)
    if kind == "$numberInt":
        number = int(_digits(arg))
        if not -(1 << 31) <= number < 1 << 31:
            raise ValueError("out of int32's range")
        return number
    if kind == "$numberLong":
        number = int(_digits(arg))
        if not -(1 << 63) <= number < 1 << 63:
            raise ValueError("out of int64's range")
        return number
    if kind == "$numberDouble":
        if arg in ("NaN", "Infinity", "-Infinity"):
            return float(arg)
        return float(bounded_number(_text(arg)))
    if kind == "$numberDecimal":
        number = (
            Decimal(_text(arg)) if arg in ("NaN", "Infinity", "-Infinity") else bounded_number(_text(arg))
        )
        if number.is_finite() and len(number.as_tuple().digits) > 34:
            raise ValueError("a Decimal128 holds 34 digits")
        return number
    if kind == "$binary":
        if "$type" in value:  # the legacy form
            return BinaryLiteral(base64.b64decode(_text(arg), validate=True), int(_text(value["$type"]), 16))
        if not isinstance(arg, dict) or set(arg) != {"base64", "subType"}:
            raise ValueError('$binary takes {"base64": ..., "subType": ...}')
        return BinaryLiteral(
            base64.b64decode(_text(arg["base64"]), validate=True), int(_text(arg["subType"]), 16)
        )
    if kind == "$uuid":
        return BinaryLiteral(uuid.UUID(_text(arg)).bytes, 4)
    if kind == "$regularExpression":
        if not isinstance(arg, dict) or set(arg) != {"pattern", "options"}:
            raise ValueError('$regularExpression takes {"pattern": ..., "options": ...}')
        options = _text(arg["options"])
        if set(options) - set("ilmsux"):
            raise ValueError("regex options are from i, l, m, s, u, x")
        return RegexLiteral(_text(arg["pattern"]), "".join(sorted(options)))
    if kind == "$timestamp":
        if not isinstance(arg, dict) or set(arg) != {"t", "i"} or not all(_is_u32(arg[k]) for k in "ti"):
            raise ValueError('$timestamp takes {"t": seconds, "i": increment}')
        return TimestampLiteral(arg["t"], arg["i"])
    if kind in ("$minKey", "$maxKey"):
        if arg != 1:
            raise ValueError(f"{kind} takes 1")
        return KeyBound(kind == "$maxKey")
    if kind == "$symbol":
        return _text(arg)
    if kind == "$code":
        raise ValueError("JavaScript code is never part of a filter")
    raise ValueError(f"the deprecated {kind[1:]} type cannot be compared with here")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, not {type(value).__name__}")
    return value


def _digits(value: Any) -> str:
    if not re.fullmatch(r"-?\d{1,20}", _text(value)):
        raise ValueError(f"{value!r} is not an integer")
    return value


def _is_u32(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 32


def _date(arg: Any) -> dt.datetime:
    if isinstance(arg, str):
        return iso_date(arg)
    if isinstance(arg, dict) and set(arg) == {"$numberLong"}:
        millis = int(_digits(arg["$numberLong"]))
    elif isinstance(arg, int) and not isinstance(arg, bool):
        millis = arg
    else:
        raise ValueError('$date takes ISO-8601 text, milliseconds, or {"$numberLong": milliseconds}')
    try:
        return _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError:
        raise ValueError("a date in a filter is within years 1 to 9999") from None
