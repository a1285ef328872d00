"""One form for a key value, whichever reader gave it.

A snapshot window compares the keys the binlog changed with the keys of the rows a chunk
reader staged, and the release record carries those keys on to the Delta merge. The
readers give one stored value in different Python forms:

| column | binlog decoder | pymysql chunk read | Spark stream staging |
|---|---|---|---|
| BINARY(n) | bytes without the trailing zero bytes | bytes, n long | bytes, n long |
| BIGINT UNSIGNED | int | int | Decimal |
| TIMESTAMP | naive datetime (UTC) | naive datetime (UTC session) | aware datetime (UTC) |
| TIME | timedelta | timedelta | text `-HH:MM:SS.ffffff` |
| BIT(n) | text of bits | bytes, big-endian | int (BIT(64) signed) |
| ENUM / SET | the member's index / bits | text | text |

`key_value(column)` maps each of them to one canonical value, equal (and hashing alike)
for one stored value and, where `chunk_reader._EXACT` says Python orders the column as
the server does, ordered as the server orders it. Text keys are compared as stored: their
windows record every key, so collation never has to be reproduced here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES, set_members
from cdc_core.schema.model import Column

KeyValue = Callable[[Any], Any]


def key_value(column: Column) -> KeyValue:
    """The canonical form of `column`'s values (None stays None)."""
    kind = column.type_name.upper()
    if kind in INT_TYPES or kind == "YEAR":
        convert = _integer
    elif kind == "BIT":
        convert = _bit
    elif kind in ("DECIMAL", "NUMERIC"):
        convert = _decimal
    elif kind in ("FLOAT", "DOUBLE"):
        convert = float
    elif kind == "BINARY" and column.length:
        width = column.length
        return _null_safe(lambda v: _bytes(v).ljust(width, b"\x00"))
    elif kind in BINARY_TYPES:
        convert = _bytes
    elif kind in ("DATETIME", "TIMESTAMP"):
        convert = _naive
    elif kind == "DATE":
        convert = _date
    elif kind == "TIME":
        convert = _time
    elif kind == "SET":
        names = tuple(column.enum_values)
        order = {m: i for i, m in enumerate(names)}
        return _null_safe(lambda v: _members(set_members(names, v) if isinstance(v, int) else v, order))
    elif kind == "ENUM":  # the decoder gives a member's index (decoder_repairs.py)
        members = ("", *column.enum_values)
        return _null_safe(lambda v: members[v] if isinstance(v, int) else _text(v))
    elif kind in CHAR_TYPES or kind in ("JSON", "UUID", "INET4", "INET6"):
        convert = _text
    else:
        return lambda v: v
    return _null_safe(convert)


def _null_safe(convert: KeyValue) -> KeyValue:
    return lambda v: None if v is None else convert(v)


def _integer(v: Any) -> int:
    if type(v) is int:
        return v
    if isinstance(v, dt.date):  # YEAR read as a date
        return v.year
    return int(v)


def _bit(v: Any) -> int:
    if isinstance(v, str):  # the decoder's text of bits
        return int(v, 2) if v else 0
    if isinstance(v, (bytes, bytearray, memoryview)):
        return int.from_bytes(bytes(v), "big")
    return int(v) % (1 << 64)  # Spark's JDBC reader gives BIT(64) as a signed long


def _decimal(v: Any) -> Decimal:
    return v if isinstance(v, Decimal) else Decimal(str(v))


def _bytes(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8", errors="surrogateescape")
    return bytes(v)


def _naive(v: Any) -> dt.datetime:
    """A DATETIME as its wall-clock time; a TIMESTAMP as the naive UTC time of its
    instant (every reader's session runs in UTC)."""
    if isinstance(v, dt.datetime):
        return v if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)
    return dt.datetime(v.year, v.month, v.day)


def _date(v: Any) -> dt.date:
    return v.date() if isinstance(v, dt.datetime) else v


def _time(v: Any) -> dt.timedelta:
    if isinstance(v, dt.timedelta):
        return v
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode()
    if isinstance(v, str):
        return _parse_time(v)
    return dt.timedelta(microseconds=int(v))


def _parse_time(text: str) -> dt.timedelta:
    """MySQL's TIME text, `[-]H+:MM:SS[.f+]`."""
    negative = text.startswith("-")
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(p) for p in clock.split(":"))
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + int((fraction + "000000")[:6])
    return dt.timedelta(microseconds=-micros if negative else micros)


def _text(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="surrogateescape")
    return v if isinstance(v, str) else str(v)


def _members(v: Any, order: dict[str, int]) -> str:
    """A SET as its members' text in the column's member order (as the server prints it)."""
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode()
    members = [m for m in v.split(",") if m] if isinstance(v, str) else list(v)
    return ",".join(sorted(members, key=lambda m: order.get(m, len(order))))
