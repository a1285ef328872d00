"""Kafka Connect field schemas (as events carry them) to Spark columns.

Events hold values in their Debezium wire form: days since the epoch, epoch milli- or
microseconds, base64 bytes, decimals as base64 two's complement with the scale in the
schema. Delta tables should hold what the source held: DATE, TIMESTAMP_NTZ for a
wall-clock DATETIME, TIMESTAMP for an instant, DECIMAL(p, s), BINARY. Each field is first
read from JSON as its Connect primitive, then turned into its Delta type here.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import orjson
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from cdc_core.events.connect_decimal import decode_decimal
from cdc_core.events.java_text import java_double

_PRIMITIVE: dict[str, T.DataType] = {
    "int8": T.ByteType(),
    "int16": T.ShortType(),
    "int32": T.IntegerType(),
    "int64": T.LongType(),
    "float": T.FloatType(),  # Kafka Connect's names, as Debezium and JsonConverter write them
    "double": T.DoubleType(),
    "float32": T.FloatType(),  # as Tidemark wrote them before (logs of older streamers)
    "float64": T.DoubleType(),
    "boolean": T.BooleanType(),
    "string": T.StringType(),
    "bytes": T.StringType(),  # base64 text in JSON
    "struct": T.StringType(),  # kept as its JSON text (e.g. a geometry)
    "array": T.StringType(),
    "map": T.StringType(),
}
MILLIS = {"io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"}
_MICROS = {"io.debezium.time.MicroTimestamp"}
_NANOS = {"io.debezium.time.NanoTimestamp"}
_DATES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
ENUM = "io.debezium.data.Enum"
# time.precision.mode=isostring: ISO 8601 text, a DATE as `2024-02-29Z`, a DATETIME as `...T...Z`.
ISO_DATE, ISO_TIMESTAMP = "io.debezium.time.IsoDate", "io.debezium.time.IsoTimestamp"
# Spark's decimals hold at most 38 digits; wider ones stay text (exact, not a double).
_MAX_PRECISION = 38


def json_type(field: dict[str, Any]) -> T.DataType:
    """How the field is read from the event's JSON."""
    try:
        return _PRIMITIVE[field["type"]]
    except KeyError:
        raise TidemarkError(
            f"column {field.get('field')!r} has an unknown Connect type {field.get('type')!r}"
        ) from None


def decimal_shape(field: dict[str, Any]) -> tuple[int, int]:
    params = field.get("parameters") or {}
    scale = int(params.get("scale", 0))
    precision = int(params.get("connect.decimal.precision", _MAX_PRECISION))
    return max(precision, scale, 1), scale


# A document source's document (spark_jobs/merge/records.py): its Extended JSON text as
# the event carries it, which keeps what a VARIANT would not (members in their order,
# -0.0, NaN, int32 apart from int64 and double).
DOCUMENT = "tidemark.document"


def delta_type(field: dict[str, Any]) -> T.DataType:
    """The column's type in Delta."""
    name, kind = field.get("name"), field["type"]
    if name == DOCUMENT:
        return T.StringType()
    if name in _DATES or name == ISO_DATE:
        return T.DateType()
    if name in MILLIS | _MICROS | _NANOS or name == ISO_TIMESTAMP:
        return T.TimestampNTZType()
    if name == "io.debezium.time.ZonedTimestamp":
        return T.TimestampType()
    if name == DECIMAL:
        precision, scale = decimal_shape(field)
        return T.DecimalType(precision, scale) if precision <= _MAX_PRECISION else T.StringType()
    if kind == "bytes":
        return T.BinaryType()
    return json_type(field)


def convert(column: Column, field: dict[str, Any]) -> Column:
    """`column` (read as `json_type`) as `delta_type`."""
    name, kind = field.get("name"), field["type"]
    if name == DOCUMENT:
        return column
    if name in _DATES:
        return F.date_add(F.lit("1970-01-01").cast("date"), column)
    if name == ISO_DATE:
        return F.to_date(F.substring(column, 1, 10))
    if name == ISO_TIMESTAMP:  # a wall-clock time written as if UTC (the session runs in UTC)
        return F.to_timestamp(column).cast(T.TimestampNTZType())
    if name in MILLIS:
        return F.timestamp_millis(column).cast(T.TimestampNTZType())  # the session runs in UTC
    if name in _MICROS:
        return F.timestamp_micros(column).cast(T.TimestampNTZType())
    if name in _NANOS:
        return F.timestamp_micros(F.floor(column / 1000)).cast(T.TimestampNTZType())
    if name == "io.debezium.time.ZonedTimestamp":
        return F.to_timestamp(column)
    if name == DECIMAL:
        precision, scale = decimal_shape(field)
        return _decimal_udf(precision, scale)(column)
    if kind == "bytes":
        return F.unbase64(column)
    return column


_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)


def delta_value(field: dict[str, Any]) -> Any:
    """`convert`'s Python twin: a function from an event value of `field` (as the
    streamer makes it, before JSON) to the value `convert` gives in Delta. The Spark chunk
    job stages lakehouse rows read by Python with it (`spark_jobs/staged_types.py`)."""
    name, kind = field.get("name"), field["type"]
    if name in _DATES:
        return lambda v: _EPOCH_DATE + dt.timedelta(days=v)
    if name == ISO_DATE:
        return lambda v: dt.date.fromisoformat(v[:10])
    if name == ISO_TIMESTAMP:
        return lambda v: dt.datetime.fromisoformat(v).replace(tzinfo=None)
    if name in MILLIS:
        return lambda v: _EPOCH + dt.timedelta(milliseconds=v)
    if name in _MICROS:
        return lambda v: _EPOCH + dt.timedelta(microseconds=v)
    if name in _NANOS:
        return lambda v: _EPOCH + dt.timedelta(microseconds=v // 1000)
    if name == "io.debezium.time.ZonedTimestamp":
        return dt.datetime.fromisoformat  # ISO 8601 with Z: an instant
    if name == DECIMAL:
        precision, scale = decimal_shape(field)
        if precision > _MAX_PRECISION:
            return lambda v: format(decode_decimal(v, scale), "f")
        return lambda v: decode_decimal(v, scale)
    if kind == "bytes":
        return base64.b64decode
    if kind in ("struct", "array", "map"):
        return json_text  # its JSON text, as Spark keeps it
    return same


def same(value: Any) -> Any:
    """`delta_value` of a field whose event value is its Delta value."""
    return value


def json_text(value: Any) -> str:
    """A nested event value as the text Spark's JSON reader keeps for it: compact, and
    re-written by Jackson, so a double reads as Java's `Double.toString` writes it
    (`1.0E308`, `3.0`, `0.001`), not as Python would (`1e+308`)."""
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, dict):
        return "{" + ",".join(orjson.dumps(k).decode() + ":" + json_text(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(json_text(v) for v in value) + "]"
    return orjson.dumps(value).decode()


def _decimal_udf(precision: int, scale: int) -> Any:
    wide = precision > _MAX_PRECISION
    result_type = T.StringType() if wide else T.DecimalType(precision, scale)

    # pandas is imported here, not with the module: the snapshot's executors import this
    # module for its type mapping, and pandas took 0.8 s of their start. The hints are set
    # as objects, since a string hint would be resolved in the module, which has no `pd`.
    import pandas as pd

    def decode(values: Any) -> Any:
        decoded = values.map(lambda v: decode_decimal(v, scale) if isinstance(v, str) else None)
        return decoded.map(lambda d: format(d, "f") if d is not None else None) if wide else decoded

    decode.__annotations__ = {"values": pd.Series, "return": pd.Series}
    return F.pandas_udf(decode, result_type)  # type: ignore[call-overload]
