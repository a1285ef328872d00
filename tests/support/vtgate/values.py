"""Row values as a Vitess 21 tablet writes them into `query.Row`s.

Binlog phase (streaming, catch-up): the text Vitess's binlog decoder makes of each value,
quirks included — FLOAT and DOUBLE in Go's shortest `%E` form (`1.5E+00`), DECIMAL with
its integer part dropped when it is zero (`.50`), TIMESTAMP in UTC, BINARY(n) padded with
zero bytes, ENUM and SET as their member text, BIT as big-endian bytes. The values come
from python-mysql-replication (with the project's repairs of its two decoding faults).

Copy phase: MySQL's own text protocol, read with decoding off (`copy_row`)."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

from cdc_core.connectors.vitess.generated import query_pb2 as q


def encode_row(values: tuple[Any, ...]) -> Any:
    """`query.Row` of already encoded values (bytes, or None for NULL)."""
    lengths = [-1 if v is None else len(v) for v in values]
    return q.Row(lengths=lengths, values=b"".join(v for v in values if v is not None))


def binlog_text(value: Any, data_type: str, width: int) -> bytes | None:
    """The binlog phase's text of one decoded value (None stays NULL)."""
    if value is None:
        return None
    if data_type in ("float", "double"):
        return _go_exponent(float(value), single=data_type == "float").encode()
    if data_type == "decimal":
        return _v21_decimal(value).encode()
    if data_type in ("datetime", "timestamp"):
        return _datetime(value, width).encode()
    if data_type == "date":
        return value.isoformat().encode()
    if data_type == "time":
        return _time(value, width).encode()
    if data_type == "binary":
        return bytes(value).ljust(width, b"\x00")
    if data_type == "bit":
        number = int(value, 2) if isinstance(value, str) else int(value)
        return number.to_bytes((width + 7) // 8, "big")
    if data_type == "set":
        return ",".join(sorted(value)).encode() if not isinstance(value, str) else value.encode()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, bool):
        return b"1" if value else b"0"
    return str(value).encode()


def _go_exponent(value: float, single: bool) -> str:
    """Go's strconv.FormatFloat(v, 'E', -1, 32 or 64): the shortest digits that read back
    as the same float32 (or float64), in exponent form."""
    if value == 0:
        return "0E+00"
    for digits in range(1, 18):
        text = f"{value:.{digits - 1}E}"
        back = float(text)
        same = struct.pack("f", back) == struct.pack("f", value) if single else back == value
        if same:
            mantissa, exponent = text.split("E")
            if "." in mantissa:
                mantissa = mantissa.rstrip("0").rstrip(".")
            sign, number = exponent[0], exponent[1:].lstrip("0") or "0"
            return f"{mantissa}E{sign}{number.zfill(2)}"
    return repr(value)


def _v21_decimal(value: Decimal) -> str:
    """Vitess 21 drops a zero integer part: 0.50 is `.50`, -0.05 is `-.05`."""
    text = format(value, "f")
    if text.startswith("0."):
        return text[1:]
    if text.startswith("-0."):
        return "-" + text[2:]
    return text


def _datetime(value: dt.datetime, fsp: int) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    return text + (f".{value.microsecond:06d}"[: fsp + 1] if fsp else "")


def _time(value: dt.timedelta, fsp: int) -> str:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}"[: fsp + 1] if fsp else "")


def copy_text(value: Any) -> bytes | None:
    """A value read with decoding off (text protocol, binary charset) as bytes."""
    if value is None:
        return None
    return bytes(value) if isinstance(value, (bytes, bytearray)) else str(value).encode()
