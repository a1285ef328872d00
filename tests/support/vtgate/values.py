"""Row values as a Vitess 21 tablet puts them into `query.Row`s.

Binlog phase (streaming, catch-up): the text `mysql/binlog.CellValue` makes of a binlog
cell, keyed like it on the binlog column type, quirks included: FLOAT and DOUBLE in Go's
shortest `%E` form (`1.5E+00`, `1E-01`); DECIMAL written word by word from its binary
form, so a zero integer part disappears (`.50`, `-.05`) and DECIMAL(p,0) with p > 9 (or a
scale that is a multiple of 9) keeps its zero padding (`000000000000000001`); TIMESTAMP in
UTC and the zero TIMESTAMP/DATETIME/DATE as zeros; YEAR 0 as `0000`; BINARY(n) padded
with zero bytes to n; ENUM and SET as their member text (SET members in definition
order); BIT as big-endian bytes; strings as bytes in the column's character set. The
cells come from python-mysql-replication, with the project's repairs of its decoding
faults (`cdc_core.connectors.mysql.decoder_repairs`).

Copy phase: what MySQL's text protocol returns on a `SET NAMES binary` connection with
`time_zone = '+00:00'` (`FLOAT` is `1.5`, `DECIMAL` `0.50`), read with decoding off."""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from typing import Any

from pymysql.charset import charset_by_name
from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from cdc_core.connectors.mysql.decoder_repairs import repaired, repairs_for
from cdc_core.connectors.mysql.types import set_members
from cdc_core.connectors.vitess.generated import query_pb2 as q

_INTEGERS = {1, 2, 3, 8, 9}  # TINY, SHORT, LONG, LONGLONG, INT24
_FLOAT, _DOUBLE, _DECIMAL, _YEAR, _DATE, _BIT = 4, 5, 246, 13, 10, 16
_DATETIMES = {12, 18}  # DATETIME, DATETIME2
_TIMESTAMPS = {7, 17}  # TIMESTAMP, TIMESTAMP2
_TIMES = {11, 19}  # TIME, TIME2
_STRING, _ENUM, _SET, _JSON = 254, 247, 248, 245
_EPOCH = dt.datetime(1970, 1, 1)
_ZERO_DATETIME = "0000-00-00 00:00:00"


def encode_row(values: tuple[bytes | None, ...]) -> Any:
    """`query.Row` of encoded values: lengths with -1 for NULL, the values concatenated."""
    lengths = [-1 if v is None else len(v) for v in values]
    return q.Row(lengths=lengths, values=b"".join(v for v in values if v is not None))


def decode_row(row: Any) -> list[bytes | None]:
    """The values of a `query.Row` (a lastpk's, say)."""
    out: list[bytes | None] = []
    at = 0
    for length in row.lengths:
        if length < 0:
            out.append(None)
            continue
        out.append(row.values[at : at + length])
        at += length
    return out


def row_images(event: Any) -> list[tuple[Any, Any]]:
    """(before, after) per row of a rows event, each (values in column order, the
    decoder's reasons for None values) or None, with the project's repairs applied."""
    repairs = repairs_for(event.columns)
    out = []
    for row in event.rows:
        if isinstance(event, UpdateRowsEvent):
            before = (
                repaired(row["before_values"], row["before_none_sources"], repairs),
                row["before_none_sources"],
            )
            after = (
                repaired(row["after_values"], row["after_none_sources"], repairs),
                row["after_none_sources"],
            )
            out.append((before, after))
        else:
            image = (repaired(row["values"], row["none_sources"], repairs), row["none_sources"])
            out.append((None, image) if isinstance(event, WriteRowsEvent) else (image, None))
    return out


def binlog_text(value: Any, column: Any, none_source: str = "") -> bytes | None:
    """The binlog phase's text of one decoded cell (`column`: its table-map column)."""
    kind = column.type
    if value is None:
        return _null_or_zero(kind, column, none_source)
    if kind in _INTEGERS:
        return str(int(value)).encode()
    if kind == _FLOAT:
        return go_exponent(value, single=True).encode()
    if kind == _DOUBLE:
        return go_exponent(value, single=False).encode()
    if kind == _DECIMAL:
        return v21_decimal(value, column.precision, column.decimals).encode()
    if kind == _YEAR:
        return b"0000" if value in (0, 1900) else str(value).encode()  # the decoder reads 0 as 1900
    if kind == _DATE:
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}".encode()
    if kind in _DATETIMES:
        return _datetime(value, _fsp(column)).encode()
    if kind in _TIMESTAMPS:
        if value == _EPOCH:  # a TIMESTAMP holds no 1970-01-01 00:00:00: this is the zero value
            return (_ZERO_DATETIME + _fraction(0, _fsp(column))).encode()
        return _datetime(value, _fsp(column)).encode()
    if kind in _TIMES:
        return _time(value, _fsp(column)).encode()
    if kind == _BIT:
        number = int(value, 2) if isinstance(value, str) else int(value)
        return number.to_bytes(column.bytes, "big")
    if kind == _SET:  # the decoder's bits (decoder_repairs), named as the library read them
        return ",".join(set_members(column.set_names or (), value)).encode(_codec(column))
    if kind == _ENUM:  # the member's index
        return column.enum_names[value].encode(_codec(column))
    if kind == _JSON:  # MySQL's binary JSON; MariaDB's JSON is LONGTEXT and never gets here
        return json.dumps(value, separators=(", ", ": ")).encode()
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
        if kind == _STRING and _is_binary(column):
            data = data.ljust(column.max_length, b"\x00")  # BINARY(n): MySQL's padding
        return data
    return str(value).encode(_codec(column))


def _null_or_zero(kind: int, column: Any, none_source: str) -> bytes | None:
    """The decoder gives None for NULL, but also for zero dates and an empty SET."""
    if none_source in (NONE_SOURCE.OUT_OF_DATETIME_RANGE, NONE_SOURCE.OUT_OF_DATETIME2_RANGE):
        return (_ZERO_DATETIME + _fraction(0, _fsp(column))).encode()
    if none_source == NONE_SOURCE.OUT_OF_DATE_RANGE:
        return b"0000-00-00"
    if none_source == NONE_SOURCE.EMPTY_SET and kind == _SET:
        return b""
    return None


def go_exponent(value: float, single: bool) -> str:
    """Go's `strconv.FormatFloat(v, 'E', -1, 32|64)`: the fewest digits that read back as
    the same float32 (or float64), as `d.dddE±dd`."""
    if value == 0:
        return "-0E+00" if str(value).startswith("-") else "0E+00"
    for digits in range(1, 18):
        text = f"{value:.{digits - 1}E}"
        back = float(text)
        same = struct.pack("<f", back) == struct.pack("<f", value) if single else back == value
        if same:
            break
    mantissa, exponent = text.split("E")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    sign, number = exponent[0], exponent[1:].lstrip("0")
    return f"{mantissa}E{sign}{number.zfill(2)}"


def v21_decimal(value: Decimal, precision: int, scale: int) -> str:
    """`CellValue` for NEWDECIMAL: the integer part as its leftover digits (only when not
    zero) and then each 9-digit word zero-padded; for scale 0, or a scale that is a
    multiple of 9, that text is kept as it is; otherwise leading zeros are trimmed."""
    sign, digits, exponent = value.as_tuple()
    number = int("".join(map(str, digits)) or "0")
    scaled = (
        number * 10 ** (scale + exponent) if scale + exponent >= 0 else number // 10 ** -(scale + exponent)
    )
    integer, fraction = divmod(scaled, 10**scale)
    words = (precision - scale) // 9
    text = "-" if sign and scaled else ""
    head, body = divmod(integer, 10 ** (9 * words))
    if head:
        text += str(head)
    text += f"{body:0{9 * words}d}" if words else ""
    if scale == 0:
        return text if text not in ("", "-") else "0"
    text += "." + f"{fraction:0{scale}d}"
    if scale % 9 == 0:
        return text
    negative = text.startswith("-")
    text = text.lstrip("-").lstrip("0")
    return ("-" if negative else "") + text


def _fsp(column: Any) -> int:
    return int(getattr(column, "fsp", 0) or 0)


def _fraction(micros: int, fsp: int) -> str:
    return f".{micros:06d}"[: fsp + 1] if fsp else ""


def _datetime(value: dt.datetime, fsp: int) -> str:
    text = f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    return text + _fraction(value.microsecond, fsp)


def _time(value: dt.timedelta, fsp: int) -> str:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + _fraction(fraction, fsp)


def _is_binary(column: Any) -> bool:
    return (column.character_set_name or "binary") == "binary"


def _codec(column: Any) -> str:
    """The Python codec python-mysql-replication decoded the column's text with."""
    name = column.character_set_name
    if not name:
        return "utf-8"
    found = charset_by_name(name)
    return found.encoding if found else name


def copy_text(value: Any) -> bytes | None:
    """A value read with decoding off (text protocol, binary character set)."""
    if value is None:
        return None
    return bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode()
