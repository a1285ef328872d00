"""A column's DEFAULT in its field schema, as Debezium's binlog connectors write it.

Debezium puts a column's default into the Connect schema (`"default"` in the JSON
converter's field), converted like a value of the column, and uses it in place of a
NULL that a NOT NULL column yields (a zero date). Tidemark reads the same DDL text, so it
turns the literal into the value the binlog decoder would give for it and runs it through
the column's own converter: both forms come from one piece of code.

The rules follow Debezium's: `CURRENT_TIMESTAMP`/`NOW()` count as the epoch (a DATETIME
default of the epoch, a NOT NULL TIMESTAMP default of the epoch, none for a nullable
TIMESTAMP); a zero date is no default in a nullable column and the epoch otherwise; a
TIMESTAMP literal is read as UTC; an expression the column's type cannot parse (a
function call, `(a + 1)`) gives no default rather than a guessed one.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable
from typing import Any

from cdc_core.schema.model import Column

_ZERO_DATE = re.compile(r"(\d{4}-\d{2}-00|\d{4}-00-\d{2}|0000-\d{2}-\d{2})( 00:00:00(\.\d{1,6})?)?")
_NOW = re.compile(r"(current_timestamp|now|localtime|localtimestamp)(\(\d*\))?", re.IGNORECASE)
_INTEGERS = {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR"}
_NO_DEFAULT_TYPES = {"JSON", "GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT",
                     "MULTILINESTRING", "MULTIPOLYGON", "GEOMETRYCOLLECTION"}  # fmt: skip
_EPOCH = dt.datetime(1970, 1, 1)


def event_default(column: Column, convert: Callable[[Any], Any]) -> Any:
    """The default's event form (what the schema's `default` holds), or None for none."""
    if not column.has_default or column.default is None or column.auto_increment or column.generated:
        return None
    if column.default_expression and not _understood_expression(column):
        return None
    try:
        stored = _stored_value(column, column.default)
        return None if stored is None else convert(stored)
    except (ValueError, ArithmeticError, TypeError, OverflowError):
        return None  # an expression: nothing the event schema can carry


def _understood_expression(column: Column) -> bool:
    """The expressions a default can be read from: the current time (as the epoch, see
    above) and the boolean keywords."""
    text = (column.default or "").strip()
    if column.type_name.upper() in ("DATE", "DATETIME", "TIMESTAMP"):
        return bool(_NOW.fullmatch(text))
    return text.lower() in ("true", "false")


def _stored_value(column: Column, text: str) -> Any:
    """The literal as the binlog decoder gives a stored value of the column (None: none)."""
    kind = column.type_name.upper()
    if kind in _NO_DEFAULT_TYPES:
        return None
    if kind in _INTEGERS or kind in ("FLOAT", "DOUBLE", "DECIMAL", "BIT"):
        text = text.strip()
        if text.lower() in ("true", "false"):
            text = "1" if text.lower() == "true" else "0"
    if kind in _INTEGERS:
        return int(text)
    if kind in ("FLOAT", "DOUBLE"):
        return float(text)
    if kind == "DECIMAL":
        scale = decimal.Decimal(1).scaleb(-(column.scale or 0))
        return decimal.Decimal(text).quantize(scale, rounding=decimal.ROUND_HALF_UP)
    if kind == "BIT":
        return _bits(text)
    if kind in ("DATE", "DATETIME", "TIMESTAMP"):
        return _temporal(kind, column.nullable, text.strip())
    if kind == "TIME":
        text = text.strip()
        return text.split(" ")[-1]  # a DATETIME literal's time of day; the TIME converter parses text
    return text  # text, ENUM, SET, binary (the literal's bytes), UUID, INET


def _bits(text: str) -> str:
    """A BIT literal (`b'101'`, `0b101`, `x'1f'`, `0x1f`, or digits read as binary) as its
    bit string, the form the decoder gives."""
    lowered = text.lower()
    if lowered.startswith("b'") and lowered.endswith("'"):
        digits = lowered[2:-1]
    elif lowered.startswith("0b"):
        digits = lowered[2:]
    elif lowered.startswith(("x'", "0x")):
        hexa = lowered[2:].rstrip("'")
        digits = format(int(hexa, 16), "b")
    else:
        digits = text
    int(digits, 2)  # refuses anything that is not binary digits
    return digits


def _temporal(kind: str, nullable: bool, text: str) -> Any:
    if _NOW.fullmatch(text):
        if kind == "TIMESTAMP" and nullable:
            return None
        text = "1970-01-01 00:00:00"
    if _ZERO_DATE.fullmatch(text) or text == "0":
        if nullable:
            return None
        text = "1970-01-01 00:00:00"
    if kind == "TIMESTAMP" and nullable and text == "1970-01-01 00:00:00":
        return None
    when = dt.datetime.fromisoformat(text)
    return when.date() if kind == "DATE" else when
