"""Vitess column types → Debezium's Vitess connector's event representation (seed 004).

Unlike Debezium's MySQL mapping: TINYINT (and BOOLEAN) is int16, FLOAT is a double (the
float32 widened, as Debezium's `Float.valueOf` gives it), DECIMAL is a string with the
column's scale, BIGINT UNSIGNED is a string by default (`bigint.unsigned.handling.mode`:
`string`, `long`, `precise`), TIMESTAMP is a ZonedTimestamp in UTC with exactly the
column's fractional digits, BIT(1) is a boolean and BIT(n) its bytes as stored. Temporal
types follow `time.precision.mode` (`adaptive_time_microseconds`, `connect`,
`isostring`, `microseconds`, `nanoseconds`). Spatial types have no mapping: the streamer
stops naming the column (exclude it with `column.exclude.list`).

Values come in the Python forms of `fields.decoder` (and of pymysql for chunk reads), the
forms MySQL's connector reads too, so snapshot keys share its canonical key forms.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.errors import UnsupportedTypeError
from cdc_core.events.connect_decimal import EXACT, encode_decimal
from cdc_core.events.connect_schema import Schema, field
from cdc_core.schema.model import Column, TableId
from cdc_core.source import IDENTITY, ColumnMapping

Converter = Callable[[Any], Any]
EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)

_INT16 = {"TINYINT"}
_TEXT = {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"}
_BINARY = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"}


@dataclass(frozen=True)
class VitessModes:
    time_precision: str = "adaptive_time_microseconds"
    bigint_unsigned: str = "string"
    binary: str = "bytes"

    @classmethod
    def from_config(cls, config: ConnectorConfig) -> VitessModes:
        return cls(
            config.get("time.precision.mode"),
            config.get("bigint.unsigned.handling.mode"),
            config.get("binary.handling.mode"),
        )


class VitessTypeMapper:
    """`cdc_core.source.TypeMapper` for Vitess (picklable: Spark executors use it)."""

    def __init__(self, modes: VitessModes) -> None:
        self.modes = modes

    def map_column(self, column: Column, optional: bool | None = None) -> ColumnMapping:
        opt = column.nullable if optional is None else optional
        schema, convert, text = _mapping(column, self.modes, opt)
        return ColumnMapping(schema, _null_safe(convert, opt, column), text=text)

    def key_value(self, column: Column) -> Converter:
        # VStream's values are decoded into the forms MySQL's readers give (`fields`), so a
        # key compares in the MySQL connector's canonical forms.
        from cdc_core.connectors.mysql.key_values import key_value

        return key_value(column)

    def key_event_value(self, column: Column) -> Converter:
        return self.map_column(column, optional=False).convert  # canonical keys are source values

    def staged_digest(self, table: TableId) -> str:
        return ""  # its staged rows are shaped by the column rules alone


def _null_safe(convert: Converter, optional: bool, column: Column) -> Converter:
    if optional:
        return convert if convert is IDENTITY else (lambda v: None if v is None else convert(v))
    # NOT NULL temporal columns still hold MySQL's zero dates (decoded as None): the epoch,
    # as Debezium's fallback gives them.
    kind = column.type_name.upper()
    zero = {"DATE": EPOCH_DATE, "DATETIME": EPOCH, "TIMESTAMP": EPOCH}.get(kind)
    if zero is None:
        return convert
    zero_value = convert(zero)
    return lambda v: zero_value if v is None else convert(v)


def _mapping(column: Column, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    kind = column.type_name.upper()
    name = column.name
    if kind in _INT16 or (kind == "SMALLINT" and not column.unsigned):
        return field("int16", name, opt), IDENTITY, False
    if kind in ("SMALLINT", "MEDIUMINT") or (kind == "INT" and not column.unsigned):
        return field("int32", name, opt), IDENTITY, False
    if kind == "INT" or (kind == "BIGINT" and not column.unsigned):
        return field("int64", name, opt), IDENTITY, False
    if kind == "BIGINT":
        return _unsigned_bigint(name, modes, opt)
    if kind == "FLOAT":
        return field("double", name, opt), _float32, False
    if kind == "DOUBLE":
        return field("double", name, opt), float, False
    if kind in ("DECIMAL", "NUMERIC"):
        scale = column.scale or 0
        quantum = Decimal(1).scaleb(-scale)
        # MySQL's 65 digits: Python's default context (28) would raise on DECIMAL(38,18).
        return field("string", name, opt), lambda v: str(Decimal(v).quantize(quantum, context=EXACT)), False
    if kind in _TEXT:
        return field("string", name, opt), IDENTITY, True
    if kind == "JSON":
        return field("string", name, opt, logical="io.debezium.data.Json", version=1), IDENTITY, True
    if kind == "ENUM":
        allowed = {"allowed": ",".join(column.enum_values)}
        schema = field("string", name, opt, logical="io.debezium.data.Enum", version=1, parameters=allowed)
        return schema, IDENTITY, True
    if kind == "SET":
        allowed = {"allowed": ",".join(column.enum_values)}
        schema = field("string", name, opt, logical="io.debezium.data.EnumSet", version=1, parameters=allowed)
        return schema, _set_text, True
    if kind == "YEAR":
        return field("int32", name, opt, logical="io.debezium.time.Year", version=1), IDENTITY, False
    if kind == "BIT":
        if (column.length or 1) <= 1:
            return field("boolean", name, opt), lambda v: any(bytes(v)), False
        bits = {"length": str(column.length)}
        schema = field("bytes", name, opt, logical="io.debezium.data.Bits", version=1, parameters=bits)
        return schema, _base64, False
    if kind in _BINARY:
        return _binary(name, modes, opt)
    if kind == "DATE":
        return _date(name, modes, opt)
    if kind == "TIME":
        return _time(column, modes, opt)
    if kind == "DATETIME":
        return _datetime(column, modes, opt)
    if kind == "TIMESTAMP":
        return _timestamp(column, modes, opt)
    raise UnsupportedTypeError(
        f"column {column.name}: type {column.type_name} has no mapping in the Vitess connector; exclude the "
        "column with column.exclude.list or the table with table.exclude.list"
    )


def _float32(v: Any) -> float:
    """A FLOAT's value as Debezium's Vitess connector gives it: the float32 widened."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def _set_text(v: Any) -> str:
    return v if isinstance(v, str) else ",".join(sorted(v))


def _base64(v: Any) -> str:
    return base64.b64encode(bytes(v)).decode()


def _unsigned_bigint(name: str, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    if modes.bigint_unsigned == "long":
        # Values above 2^63-1 wrap as a Java long holds them (Debezium's Vitess connector
        # fails on them instead).
        return field("int64", name, opt), lambda v: int(v) - (1 << 64) if int(v) >= 1 << 63 else int(v), False
    if modes.bigint_unsigned == "precise":
        schema = field(
            "bytes",
            name,
            opt,
            logical="org.apache.kafka.connect.data.Decimal",
            version=1,
            parameters={"scale": "0"},
        )
        return schema, lambda v: encode_decimal(Decimal(int(v)), 0), False
    return field("string", name, opt), lambda v: str(int(v)), False


def _binary(name: str, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    mode = modes.binary
    if mode == "base64":
        return field("string", name, opt), _base64, False
    if mode == "base64-url-safe":
        return field("string", name, opt), lambda v: base64.urlsafe_b64encode(bytes(v)).decode(), False
    if mode == "hex":
        return field("string", name, opt), lambda v: bytes(v).hex(), False
    return field("bytes", name, opt), _base64, False


def _date(name: str, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    if modes.time_precision == "isostring":
        return field("string", name, opt), lambda v: v.isoformat(), False
    logical = (
        "org.apache.kafka.connect.data.Date" if modes.time_precision == "connect" else "io.debezium.time.Date"
    )
    return field("int32", name, opt, logical=logical, version=1), lambda v: (v - EPOCH_DATE).days, False


def _micros(v: dt.timedelta) -> int:
    return (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds


def _time_text(v: dt.timedelta, fsp: int) -> str:
    micros = _micros(v)
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}"[: fsp + 1] if fsp else "")


def _time(column: Column, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    mode, fsp = modes.time_precision, column.length or 0
    if mode == "isostring":
        return field("string", column.name, opt), lambda v: _time_text(v, fsp), False
    if mode == "connect":
        logical = "org.apache.kafka.connect.data.Time"
        return (
            field("int32", column.name, opt, logical=logical, version=1),
            lambda v: _micros(v) // 1000,
            False,
        )
    if mode == "nanoseconds":
        logical = "io.debezium.time.NanoTime"
        return (
            field("int64", column.name, opt, logical=logical, version=1),
            lambda v: _micros(v) * 1000,
            False,
        )
    return field("int64", column.name, opt, logical="io.debezium.time.MicroTime", version=1), _micros, False


def _epoch_micros(v: dt.datetime) -> int:
    return _micros(v - EPOCH)


def _datetime(column: Column, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    mode, fsp = modes.time_precision, column.length or 0
    if mode == "isostring":
        return field("string", column.name, opt), lambda v: _datetime_text(v, fsp, " "), False
    if mode == "nanoseconds":
        logical = "io.debezium.time.NanoTimestamp"
        return (
            field("int64", column.name, opt, logical=logical, version=1),
            lambda v: _epoch_micros(v) * 1000,
            False,
        )
    if mode == "microseconds" or (mode == "adaptive_time_microseconds" and fsp > 3):
        logical = "io.debezium.time.MicroTimestamp"
        return field("int64", column.name, opt, logical=logical, version=1), _epoch_micros, False
    logical = "org.apache.kafka.connect.data.Timestamp" if mode == "connect" else "io.debezium.time.Timestamp"
    return (
        field("int64", column.name, opt, logical=logical, version=1),
        lambda v: _epoch_micros(v) // 1000,
        False,
    )


def _datetime_text(v: dt.datetime, fsp: int, separator: str) -> str:
    text = v.strftime(f"%Y-%m-%d{separator}%H:%M:%S")
    return text + (f".{v.microsecond:06d}"[: fsp + 1] if fsp else "")


def _timestamp(column: Column, modes: VitessModes, opt: bool) -> tuple[Schema, Converter, bool]:
    if modes.time_precision == "connect":
        logical = "org.apache.kafka.connect.data.Timestamp"
        return (
            field("int64", column.name, opt, logical=logical, version=1),
            lambda v: _epoch_micros(v) // 1000,
            False,
        )
    fsp = column.length or 0
    schema = field("string", column.name, opt, logical="io.debezium.time.ZonedTimestamp", version=1)
    return schema, lambda v: _datetime_text(_utc(v), fsp, "T") + "Z", False


def _utc(v: dt.datetime) -> dt.datetime:
    """VStream's TIMESTAMP text is UTC (and chunk reads run in a UTC session)."""
    return v if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)
