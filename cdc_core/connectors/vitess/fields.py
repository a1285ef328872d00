"""VStream's column metadata and row values, in the connector's terms.

A FIELD event describes a table's columns as `query.Field`s (name, Vitess type, flags,
collation id, and MySQL's own `column_type` text). They become `Column`s of the schema
model, the same ones a `SHOW FULL COLUMNS` through VTGate gives the snapshot session, so
the type mapping sees one description of a column whichever way it came.

ROW values arrive as MySQL's text forms (`query.Row`: lengths, -1 for NULL, and the
values concatenated). Each is decoded into the Python value pymysql gives for the same
column (int, float, Decimal, date, datetime, timedelta, str, bytes), so a value streamed
and the same value read by a chunk query are one value: window dedup compares them, and
the type mapping converts both alike. VStream's own text quirks are absorbed here: Go's
`1.5E+00` floats and v21's `.50` decimals parse like MySQL's `1.5` and `0.50`.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from pymysql.charset import charset_by_id

from cdc_core.connectors.mysql.charsets import python_codec
from cdc_core.errors import SchemaMismatchError
from cdc_core.schema.model import Column

NOT_NULL = 1
PRI_KEY = 2
UNSIGNED = 32

_TYPE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_MEMBER = re.compile(r"'((?:[^']|'')*)'")
# Vitess's query.Type names → the MySQL base type, for fields without a column_type
# (internal tables such as _vt.heartbeat).
_FROM_VITESS = {
    "INT8": "TINYINT", "UINT8": "TINYINT", "INT16": "SMALLINT", "UINT16": "SMALLINT",
    "INT24": "MEDIUMINT", "UINT24": "MEDIUMINT", "INT32": "INT", "UINT32": "INT",
    "INT64": "BIGINT", "UINT64": "BIGINT", "FLOAT32": "FLOAT", "FLOAT64": "DOUBLE",
    "TIMESTAMP": "TIMESTAMP", "DATE": "DATE", "TIME": "TIME", "DATETIME": "DATETIME",
    "YEAR": "YEAR", "DECIMAL": "DECIMAL", "TEXT": "TEXT", "BLOB": "BLOB", "VARCHAR": "VARCHAR",
    "VARBINARY": "VARBINARY", "CHAR": "CHAR", "BINARY": "BINARY", "BIT": "BIT", "ENUM": "ENUM",
    "SET": "SET", "GEOMETRY": "GEOMETRY", "JSON": "JSON",
}  # fmt: skip
_LENGTH_IS_PRECISION = {"DECIMAL", "NUMERIC", "TIME", "DATETIME", "TIMESTAMP"}


def column_of(
    name: str,
    column_type: str,
    nullable: bool,
    collation_id: int | None = None,
    collation: str | None = None,
) -> Column:
    """A column from MySQL's type text (`int(11) unsigned`, `decimal(10,2)`,
    `enum('a','b')`, `datetime(6)`), as `information_schema.columns.column_type` and
    `SHOW FULL COLUMNS` write it."""
    match = _TYPE.match(column_type)
    if match is None:
        raise SchemaMismatchError(f"column {name}: cannot read its type {column_type!r}")
    base, args, rest = match.group(1).upper(), match.group(2), match.group(3).lower()
    if base in ("BOOL", "BOOLEAN"):
        base, args = "TINYINT", "1"
    if base == "INTEGER":
        base = "INT"
    length = scale = None
    members: tuple[str, ...] = ()
    if args is not None and base in ("ENUM", "SET"):
        members = tuple(m.replace("''", "'") for m in _MEMBER.findall(args))
    elif args:
        parts = [p.strip() for p in args.split(",")]
        if base in ("FLOAT", "DOUBLE", "REAL"):
            pass  # FLOAT(M,D) display widths: the value is what matters
        elif base in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR"):
            length = int(parts[0]) if base == "TINYINT" and parts[0] == "1" else None
        else:
            length = int(parts[0])
            scale = int(parts[1]) if len(parts) > 1 else (0 if base in ("DECIMAL", "NUMERIC") else None)
    elif base in _LENGTH_IS_PRECISION:
        length = 0 if base != "DECIMAL" else 10
        scale = 0 if base == "DECIMAL" else None
    charset = None
    if collation_id:
        try:
            found = charset_by_id(collation_id)
            charset, collation = found.name, collation or found.collation
        except KeyError:
            charset = None
    elif collation:
        charset = collation.split("_", 1)[0]
    if charset == "binary":
        charset = collation = None
    return Column(
        name,
        "DOUBLE" if base == "REAL" else base,
        length,
        scale,
        unsigned="unsigned" in rest,
        nullable=nullable,
        charset=charset,
        collation=collation,
        enum_values=members,
    )


def column_of_field(field: Any, type_names: Callable[[int], str]) -> Column:
    """A column from a FIELD event's `query.Field` (`type_names` names its Vitess type)."""
    if field.name.startswith("@"):
        # Vitess's schema reload can anonymise names (`@1`) after a rename or type change;
        # decoding with them would put values under the wrong names.
        raise SchemaMismatchError(
            f"Illegal prefix '@' for column: {field.name}, from table: {field.table}: VStream sent "
            "anonymised column names (a Vitess schema reload issue, usually transient); restart the streamer"
        )
    nullable = not field.flags & NOT_NULL
    if field.column_type:
        return column_of(field.name, field.column_type, nullable, field.charset or None)
    vitess = type_names(field.type)
    base = _FROM_VITESS.get(vitess, vitess)
    length = field.decimals if base in ("TIME", "DATETIME", "TIMESTAMP") else None
    if base == "BIT":
        length = field.column_length
    unsigned = vitess.startswith("UINT")
    return Column(field.name, base, length, unsigned=unsigned, nullable=nullable)


# ---------------------------------------------------------------------------- values

Decoder = Callable[[bytes], Any]
_BINARY = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "GEOMETRY"}


def decoder(column: Column) -> Decoder:
    """The Python value of one of the column's VStream text values (never NULL here)."""
    kind = column.type_name.upper()
    if kind in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR"):
        return int
    if kind in ("FLOAT", "DOUBLE"):
        return float
    if kind in ("DECIMAL", "NUMERIC"):
        return lambda v: Decimal(v.decode())
    if kind == "DATE":
        return _date
    if kind in ("DATETIME", "TIMESTAMP"):
        return _datetime
    if kind == "TIME":
        return _time
    if kind in _BINARY:
        return bytes
    encoding = python_codec(column.charset)
    return lambda v: v.decode(encoding, errors="surrogateescape")


def decode_row(row: Any, decoders: Sequence[Decoder]) -> tuple[Any, ...]:
    """A `query.Row` as a tuple of Python values, in the table's column order."""
    values = row.values
    out: list[Any] = []
    at = 0
    for length, decode in zip(row.lengths, decoders, strict=True):
        if length < 0:
            out.append(None)
            continue
        out.append(decode(values[at : at + length]))
        at += length
    return tuple(out)


def _date(v: bytes) -> dt.date | None:
    y, m, d = (int(p) for p in v.split(b"-"))
    return None if m == 0 or d == 0 else dt.date(y, m, d)  # zero dates, as the binlog decoder gives them


def _datetime(v: bytes) -> dt.datetime | None:
    day, _, clock = v.partition(b" ")
    date = _date(day)
    if date is None:
        return None
    hms, _, fraction = clock.partition(b".")
    h, mi, s = (int(p) for p in hms.split(b":"))
    micros = int((fraction + b"000000")[:6]) if fraction else 0
    return dt.datetime(date.year, date.month, date.day, h, mi, s, micros)


def _time(v: bytes) -> dt.timedelta:
    negative = v.startswith(b"-")
    clock, _, fraction = v.lstrip(b"-").partition(b".")
    h, mi, s = (int(p) for p in clock.split(b":"))
    micros = ((h * 60 + mi) * 60 + s) * 1_000_000 + (int((fraction + b"000000")[:6]) if fraction else 0)
    return dt.timedelta(microseconds=-micros if negative else micros)
