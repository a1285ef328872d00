"""MySQL/MariaDB column types → Debezium's event representation (Kafka Connect JSON).

Follows Debezium's MySQL connector type mapping for the common types, with its handling
modes (`decimal.handling.mode`, `bigint.unsigned.handling.mode`, `time.precision.mode`,
`binary.handling.mode`). Each column gets a converter (binlog value → JSON-ready value)
and a field schema; both are built once per table schema version, so the hot path is one
function call per column.

The binlog values are those python-mysql-replication decodes from the row image with the
table-map metadata that `binlog_row_metadata=FULL` provides (signedness, charsets, ENUM
and SET members; the streamer refuses to start without it): ints, floats, `Decimal`,
str, bytes, `datetime`, `date`, `timedelta`, sets for SET, bit strings for BIT. Values
that are already in event form (integers, doubles, ENUM strings) get no converter at all
(`IDENTITY`), which keeps the per-row cost down. Values are positional; the schema
timeline supplies names and types.
"""

from __future__ import annotations

import base64
import decimal
import ipaddress
import math
import struct
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from cdc_core.connectors.mysql.column_defaults import event_default
from cdc_core.connectors.mysql.spatial import GEOMETRY_TYPES, geometry_mapping
from cdc_core.connectors.mysql.temporal_types import (
    EPOCH,
    EPOCH_DATE,
    date_type,
    datetime_type,
    time_type,
    timestamp_type,
)
from cdc_core.connectors.mysql.type_modes import TypeModes
from cdc_core.errors import UnsupportedTypeError
from cdc_core.events.connect_decimal import encode_decimal
from cdc_core.events.connect_schema import Schema, field
from cdc_core.schema.model import Column, TableId
from cdc_core.source import IDENTITY, ColumnMapping

Converter = Callable[[Any], Any]


class MySqlTypeMapper:
    """`cdc_core.source.TypeMapper` with the connector's modes (picklable: the Spark chunk
    job sends it to its executors)."""

    def __init__(self, modes: TypeModes) -> None:
        self.modes = modes

    def map_column(self, column: Column, optional: bool | None = None) -> ColumnMapping:
        return map_column(column, self.modes, optional)

    def key_value(self, column: Column) -> Converter:
        from cdc_core.connectors.mysql.key_values import key_value

        return key_value(column)

    def key_event_value(self, column: Column) -> Converter:
        return self.map_column(column, optional=False).convert  # canonical keys are source values

    def staged_digest(self, table: TableId) -> str:
        return ""  # its staged rows are shaped by the column rules alone


INT_TYPES = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}
CHAR_TYPES = {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"}
# Columns whose event value is their text as stored (what truncation applies to).
TEXT_TYPES = CHAR_TYPES | {"ENUM", "SET", "JSON"}
BINARY_TYPES = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"}


def map_column(column: Column, modes: TypeModes, optional: bool | None = None) -> ColumnMapping:
    """The mapping of `column`; `optional` overrides nullability (key fields are required)."""
    opt = column.nullable if optional is None else optional
    kind = column.type_name.upper()
    builder = _BUILDERS.get(kind)
    if builder is None:
        if kind in CHAR_TYPES:
            builder = _string
        elif kind in BINARY_TYPES:
            builder = _binary
        elif kind in GEOMETRY_TYPES:
            builder = _spatial
        else:
            raise UnsupportedTypeError(
                f"column {column.name}: type {column.type_name} has no event mapping; exclude the column with "
                "column.exclude.list or the table with table.exclude.list"
            )
    schema, convert = builder(column, modes, opt)
    default = event_default(column, convert)
    if default is not None:
        schema = {
            **{k: v for k, v in schema.items() if k != "field"},
            "default": default,
            "field": column.name,
        }
    return ColumnMapping(schema, _null_safe(convert, column, opt, default), text=kind in TEXT_TYPES)


def _null_safe(convert: Converter, column: Column, optional: bool, default: Any) -> Converter:
    if convert is IDENTITY and (optional or default is None):
        return IDENTITY
    if optional:
        return lambda v: None if v is None else convert(v)
    # A NOT NULL temporal column can still yield None for MySQL's zero dates; Debezium
    # emits the column's default then, or the epoch.
    if default is not None:
        zero = default
    else:
        zero = convert(_ZERO.get(column.type_name.upper())) if column.type_name.upper() in _ZERO else None
    if convert is IDENTITY:
        return lambda v: zero if v is None else v
    return lambda v: zero if v is None else convert(v)


_ZERO: dict[str, Any] = {
    "DATE": EPOCH_DATE,
    "DATETIME": EPOCH,
    "TIMESTAMP": EPOCH,
}


# ----------------------------------------------------------------------------- numbers


def _integer(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    """BOOLEAN is TINYINT(1) in MySQL and maps to INT16, as in Debezium."""
    bits = INT_TYPES[column.type_name.upper()]
    unsigned = column.unsigned
    if bits == 64 and unsigned:
        if modes.bigint_unsigned == "precise":
            return _decimal_schema(column.name, opt, 0, 20), lambda v: encode_decimal(decimal.Decimal(v), 0)
        return field("int64", column.name, opt), _wrap_signed64
    if bits == 8:
        type_ = "int16"
    elif bits == 16:
        type_ = "int32" if unsigned else "int16"
    elif bits == 24:
        type_ = "int32"
    elif bits == 32:
        type_ = "int64" if unsigned else "int32"
    else:
        type_ = "int64"
    return field(type_, column.name, opt), IDENTITY


def _wrap_signed64(v: Any) -> int:
    v = int(v)  # Spark's JDBC reader gives BIGINT UNSIGNED as DECIMAL(20,0)
    return v - (1 << 64) if v >= (1 << 63) else v


def _float(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    return field("float", column.name, opt), _float32


def _float32(v: float) -> float:
    """FLOAT is stored as 4-byte IEEE: its shortest decimal that reads back as the same
    4-byte value (1.1, not 1.100000023841858; 16777216, which 7 digits would make 16777220)."""
    if not math.isfinite(v):
        return v
    stored = _FLOAT32.unpack(_FLOAT32.pack(v))[0]
    for digits in range(1, 10):
        shortest = float(f"{v:.{digits}g}")
        try:
            if _FLOAT32.unpack(_FLOAT32.pack(shortest))[0] == stored:
                return shortest
        except OverflowError:  # rounded up beyond the largest float
            continue
    return stored


_FLOAT32 = struct.Struct("<f")


def _double(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    return field("double", column.name, opt), IDENTITY


def _decimal_schema(name: str, opt: bool, scale: int, precision: int) -> Schema:
    return field(
        "bytes",
        name,
        opt,
        logical="org.apache.kafka.connect.data.Decimal",
        version=1,
        parameters={"scale": str(scale), "connect.decimal.precision": str(precision)},
    )


def _decimal(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    precision = column.length or 10
    scale = column.scale or 0
    if modes.decimal == "string":
        return field("string", column.name, opt), lambda v: format(decimal.Decimal(v), "f")
    if modes.decimal == "double":
        return field("double", column.name, opt), float
    return _decimal_schema(column.name, opt, scale, precision), lambda v: encode_decimal(
        decimal.Decimal(v), scale
    )


def _bit(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    width = column.length or 1
    if width == 1:
        return field("boolean", column.name, opt), lambda v: _bits_to_int(v) == 1
    size = (width + 7) // 8
    schema = field(
        "bytes",
        column.name,
        opt,
        logical="io.debezium.data.Bits",
        version=1,
        parameters={"length": str(width)},
    )
    return schema, lambda v: base64.b64encode(_bits_to_int(v).to_bytes(size, "little")).decode()


def _bits_to_int(v: Any) -> int:
    if isinstance(v, str):
        return int(v, 2) if v else 0
    if isinstance(v, (bytes, bytearray)):
        return int.from_bytes(v, "big")
    return int(v) % (1 << 64)  # Spark's JDBC reader gives BIT(64) as a signed long


def _year(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    # python-mysql-replication decodes YEAR 0000 (stored as 0) as 1900, a year no YEAR
    # column holds (1901-2155 and 0000).
    return field(
        "int32", column.name, opt, logical="io.debezium.time.Year", version=1
    ), lambda v: 0 if int(v) == 1900 else int(v)


# ----------------------------------------------------------------------------- text, binary


def _string(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    encoding = _python_encoding(column.charset)

    def convert(v: Any) -> str:
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode(encoding, errors="replace")
        return v

    return field("string", column.name, opt), convert


def _python_encoding(charset: str | None) -> str:
    if not charset:
        return "utf-8"
    name = charset.lower()
    return {
        "utf8mb4": "utf-8",
        "utf8mb3": "utf-8",
        "utf8": "utf-8",
        "latin1": "cp1252",
        "binary": "latin-1",
    }.get(name, name)


def _binary_encoder(modes: TypeModes) -> tuple[str, Converter]:
    if modes.binary == "hex":
        return "string", lambda b: bytes(b).hex()
    if modes.binary == "base64-url-safe":
        return "string", lambda b: base64.urlsafe_b64encode(bytes(b)).decode()
    # bytes: the JSON converter renders Connect bytes as base64; base64: a base64 string.
    return ("bytes" if modes.binary == "bytes" else "string"), lambda b: base64.b64encode(bytes(b)).decode()


def _as_bytes(v: Any) -> bytes:
    return v.encode("utf-8", errors="surrogateescape") if isinstance(v, str) else bytes(v)


def _binary(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    type_, encode = _binary_encoder(modes)
    kind = column.type_name.upper()
    if kind == "BINARY" and column.length:
        # MySQL right-pads BINARY(n) with zero bytes, but the binlog trims them.
        width = column.length
        return field(type_, column.name, opt), lambda v: encode(_as_bytes(v).ljust(width, b"\x00"))
    return field(type_, column.name, opt), lambda v: encode(_as_bytes(v))


def _json(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    def convert(v: Any) -> str:
        if isinstance(v, str):
            return v  # MariaDB stores JSON as text
        if isinstance(v, (bytes, bytearray)):
            return bytes(v).decode("utf-8")
        return orjson.dumps(v, default=str).decode()

    if modes.flavor == "mariadb":  # MariaDB's JSON is text: Debezium's MariaDB connector says so
        return field("string", column.name, opt), convert
    return field("string", column.name, opt, logical="io.debezium.data.Json", version=1), convert


def _enum(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    params = {"allowed": ",".join(column.enum_values)}
    schema = field("string", column.name, opt, logical="io.debezium.data.Enum", version=1, parameters=params)
    members = ("", *column.enum_values)  # index 0: the empty string MySQL stores for an invalid value

    def convert(v: Any) -> str:
        """A member's index (the binlog decoder's) or its name (a chunk read's)."""
        return members[v] if isinstance(v, int) else v

    return schema, convert


def _set(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    params = {"allowed": ",".join(column.enum_values)}
    order = {v: i for i, v in enumerate(column.enum_values)}

    def convert(v: Any) -> str:
        if isinstance(v, int):
            return ",".join(set_members(column.enum_values, v))
        if isinstance(v, str):
            return v
        return ",".join(sorted(v, key=lambda m: order.get(m, len(order))))

    schema = field(
        "string", column.name, opt, logical="io.debezium.data.EnumSet", version=1, parameters=params
    )
    return schema, convert


def set_members(names: tuple[str, ...], bits: int) -> list[str]:
    """A SET's members from its bits (as the binlog decoder gives them), in member order."""
    return [m for i, m in enumerate(names) if bits & (1 << i)]


def _spatial(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    return geometry_mapping(column, opt)


def _uuid(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    def convert(v: Any) -> str:
        return v if isinstance(v, str) else str(uuid.UUID(bytes=_as_bytes(v)))

    return field("string", column.name, opt, logical="io.debezium.data.Uuid", version=1), convert


def _inet(column: Column, modes: TypeModes, opt: bool) -> tuple[Schema, Converter]:
    def convert(v: Any) -> str:
        return v if isinstance(v, str) else str(ipaddress.ip_address(_as_bytes(v)))

    return field("string", column.name, opt), convert


_BUILDERS: dict[str, Callable[[Column, TypeModes, bool], tuple[Schema, Converter]]] = {
    **dict.fromkeys(INT_TYPES, _integer),
    "FLOAT": _float,
    "DOUBLE": _double,
    "DECIMAL": _decimal,
    "BIT": _bit,
    "YEAR": _year,
    "DATE": date_type,
    "TIME": time_type,
    "DATETIME": datetime_type,
    "TIMESTAMP": timestamp_type,
    "JSON": _json,
    "ENUM": _enum,
    "SET": _set,
    "UUID": _uuid,
    "INET4": _inet,
    "INET6": _inet,
}
