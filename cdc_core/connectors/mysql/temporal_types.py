"""MySQL/MariaDB temporal columns → Debezium's time types, per `time.precision.mode`.

DATETIME has no zone and is written as if it were UTC; TIMESTAMP is an instant, written as
Debezium's ZonedTimestamp; TIME is a signed duration of up to ±838:59:59, which only the
duration types (MicroTime, NanoTime) hold whole: the time-of-day types give null outside
[0, 24 h), as Debezium does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from cdc_core.connectors.mysql.type_modes import TypeModes
from cdc_core.events.connect_schema import Schema, field
from cdc_core.schema.model import Column

Converter = Callable[[Any], Any]

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)


def date_type(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    if modes.time_precision == "isostring":
        return field(
            "string", column.name, opt, logical="io.debezium.time.IsoDate", version=1
        ), lambda v: v.isoformat() + "Z"
    logical = (
        "org.apache.kafka.connect.data.Date" if modes.time_precision == "connect" else "io.debezium.time.Date"
    )
    return field("int32", column.name, opt, logical=logical, version=1), lambda v: (v - EPOCH_DATE).days


def _micros_of_day(v: dt.timedelta | str) -> int:
    if isinstance(v, str):
        return _parse_time(v)
    return (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds


def _parse_time(text: str) -> int:
    """MySQL's text form of TIME (`-838:59:59.000000` to `838:59:59.000000`), as Spark's
    JDBC reader stages it, in microseconds."""
    negative = text.startswith("-")
    clock, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(p) for p in clock.split(":"))
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + int((fraction or "0").ljust(6, "0")[:6])
    return -micros if negative else micros


def time_type(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    fsp = column.length or 0
    mode = modes.time_precision
    if mode == "connect":  # a time of day in milliseconds: a TIME outside [0, 24 h) is null, as in Debezium
        return (
            field("int32", column.name, opt, logical="org.apache.kafka.connect.data.Time", version=1),
            _connect_time,
        )
    if mode == "adaptive" and fsp <= 3:
        return field(
            "int32", column.name, opt, logical="io.debezium.time.Time", version=1
        ), lambda v: _micros_of_day(v) // 1000
    if mode == "isostring":  # a time of day: a TIME outside [0, 24 h) is null, as in Debezium
        return field("string", column.name, opt, logical="io.debezium.time.IsoTime", version=1), _iso_time
    if mode == "nanoseconds":
        return field(
            "int64", column.name, opt, logical="io.debezium.time.NanoTime", version=1
        ), lambda v: _micros_of_day(v) * 1000
    return field("int64", column.name, opt, logical="io.debezium.time.MicroTime", version=1), _micros_of_day


_DAY_MICROS = 86_400_000_000


def _iso_time(v: dt.timedelta | str) -> str | None:
    micros = _micros_of_day(v)
    return _iso_clock(micros) + "Z" if 0 <= micros < _DAY_MICROS else None


def _connect_time(v: dt.timedelta | str) -> int | None:
    millis = _micros_of_day(v) // 1000
    return millis if 0 <= millis < _DAY_MICROS // 1000 else None


def _as_java_long(n: int) -> int:
    """`n` as a Java long holds it (two's complement, wrapped)."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


def _iso_clock(micros: int) -> str:
    """Java's ISO_LOCAL_TIME of a time of day: seconds always, the fraction without its
    trailing zeros (what Debezium's Iso* types print)."""
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}".rstrip("0") if fraction else "")


def _epoch_micros(v: dt.datetime) -> int:
    delta = v.replace(tzinfo=None) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def datetime_type(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    """DATETIME has no time zone: Debezium emits its wall-clock value as if it were UTC."""
    fsp = column.length or 0
    mode = modes.time_precision
    if mode == "connect":
        return (
            field("int64", column.name, opt, logical="org.apache.kafka.connect.data.Timestamp", version=1),
            lambda v: _epoch_micros(v) // 1000,
        )
    if mode == "isostring":
        return field(
            "string", column.name, opt, logical="io.debezium.time.IsoTimestamp", version=1
        ), lambda v: f"{v.date().isoformat()}T{_iso_clock(_epoch_micros(v) % _DAY_MICROS)}Z"
    if mode == "nanoseconds":  # beyond ±292 years of 1970 a Java long wraps: Debezium's values do
        return field(
            "int64", column.name, opt, logical="io.debezium.time.NanoTimestamp", version=1
        ), lambda v: _as_java_long(_epoch_micros(v) * 1000)
    if fsp <= 3 and mode != "microseconds":
        return field(
            "int64", column.name, opt, logical="io.debezium.time.Timestamp", version=1
        ), lambda v: _epoch_micros(v) // 1000
    return field(
        "int64", column.name, opt, logical="io.debezium.time.MicroTimestamp", version=1
    ), _epoch_micros


def timestamp_type(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    """TIMESTAMP is stored in UTC: Debezium's ZonedTimestamp, ISO 8601 with `Z`, keeping
    as many fractional digits as the column declares."""
    fsp = column.length or 0

    def convert(v: dt.datetime) -> str:
        text = v.strftime("%Y-%m-%dT%H:%M:%S")
        if fsp:
            text += "." + f"{v.microsecond:06d}"[:fsp]
        return text + "Z"

    schema = field("string", column.name, opt, logical="io.debezium.time.ZonedTimestamp", version=1)
    if opt:
        # The zero TIMESTAMP ('0000-00-00 00:00:00') is 0 seconds in the binlog, which the
        # decoder gives as the epoch, an instant no TIMESTAMP holds otherwise: null, as
        # the snapshot readers give it and as for the other zero dates (NOT NULL: the epoch).
        return schema, lambda v: None if v.replace(tzinfo=None) == EPOCH else convert(v)
    return schema, convert
