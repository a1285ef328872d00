"""Snapshot rows staged for the lakehouse fast path, as the Delta table holds them.

On the fast path the Delta merge applies a window's staged Parquet as it is
(`spark_jobs/merge/releases.py`), so the chunk job stages each column as the merge lands
the column's `op=r` event: in its Delta type (`connect_types.delta_type` of the Connect
field the events carry; a column shaped by the column rules is a string) with that type's
value. Every staged file of a table then has the same schema, whatever its values (a
window where a column is all NULL, an empty window), and the merge creates or fills the
table with the types the events give it.

- Spark's JDBC reader: an expression per column from the value Spark read
  (`jdbc_column`); None where Spark cannot give the Delta value exactly, and the table is
  read by Python.
- The Python reader: each value to its event value by the connector's own type mapping,
  as the streamer makes it, then to its Delta value by `connect_types.delta_value`, the
  Python twin of what the merge does to the event.

In stream mode rows are staged as read instead, and the streamer makes the events.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES
from cdc_core.schema.model import Column as TableColumn
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import write_parquet
from cdc_core.source import ColumnMapping
from spark_jobs.merge import connect_types

_STRING_FIELD = {"type": "string", "optional": True}


def staged_field(form: StagedForm, name: str) -> dict[str, Any]:
    """The Connect field of a staged column as its events carry it."""
    if name in form.shaped:  # its rules make every value a string
        return {**_STRING_FIELD, "field": name}
    return form.mappings[name].schema


def delta_schema(form: StagedForm) -> T.StructType:
    """The staged columns in their Delta types."""
    return T.StructType(
        [T.StructField(c, connect_types.delta_type(staged_field(form, c))) for c in form.columns]
    )


# ------------------------------------------------------------------- the Python reader


def python_rows(form: StagedForm, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Rows of `form` as staged by the Python reader (`StagedForm.shape` applied) to their
    Delta values: every column but the shaped ones through its event value."""
    plan: list[Callable[[Any], Any] | None] = []
    for name in form.columns:
        if name in form.shaped:
            plan.append(None)
        else:
            plan.append(_through_event(form.mappings[name]))
    return [tuple(v if f is None else f(v) for f, v in zip(plan, row, strict=True)) for row in rows]


def _through_event(mapping: ColumnMapping) -> Callable[[Any], Any]:
    event, delta = mapping.convert, connect_types.delta_value(mapping.schema)

    def convert(value: Any) -> Any:
        value = event(value)  # None stays None, or becomes a NOT NULL zero date's epoch
        return None if value is None else delta(value)

    return convert


def write_window(uri: str, form: StagedForm, rows: list[tuple[Any, ...]], lakehouse: bool) -> None:
    """Stage a window read by Python (or an empty one): as read for a stream release, in
    the Delta types for a lakehouse release."""
    if lakehouse:
        types = arrow_types(delta_schema(form))
        write_parquet(uri, form.columns, python_rows(form, rows), types=types)
    else:
        write_parquet(uri, form.columns, rows, strings=form.shaped)


def arrow_types(schema: T.StructType) -> dict[str, Any]:
    """The Arrow type of each column: what Spark reads back as the Spark type."""
    import pyarrow as pa

    simple = {
        T.ByteType: pa.int8(),
        T.ShortType: pa.int16(),
        T.IntegerType: pa.int32(),
        T.LongType: pa.int64(),
        T.FloatType: pa.float32(),
        T.DoubleType: pa.float64(),
        T.BooleanType: pa.bool_(),
        T.StringType: pa.string(),
        T.BinaryType: pa.binary(),
        T.DateType: pa.date32(),
        T.TimestampNTZType: pa.timestamp("us"),
        T.TimestampType: pa.timestamp("us", tz="UTC"),
    }
    types = {}
    for f in schema.fields:
        if isinstance(f.dataType, T.DecimalType):
            types[f.name] = pa.decimal128(f.dataType.precision, f.dataType.scale)
        else:
            types[f.name] = simple[type(f.dataType)]
    return types


# ------------------------------------------------------------- Spark's JDBC reader


def jdbc_column(column: TableColumn, mapping: ColumnMapping) -> Column | None:
    """The Delta value of `column` from the value Spark's JDBC reader gives for it (with
    `jdbc.custom_schema` and `jdbc.source_table`: TIME as text, DATETIME as an instant,
    BIT as a BIGINT, FLOAT as a DOUBLE), or None when Spark cannot compute it exactly."""
    field = mapping.schema
    target = connect_types.delta_type(field)
    kind, name = column.type_name.upper(), field.get("name")
    source = F.col(f"`{column.name}`")
    if kind == "TIME":
        micros = time_micros(source)
        if name == "io.debezium.time.MicroTime":
            value = micros
        elif name == "io.debezium.time.NanoTime":
            value = micros * 1000
        elif name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
            value = F.floor(micros / 1000)
        else:
            return None  # IsoTime: text the Python reader makes
    elif kind == "BIT":
        width = column.length or 1
        value = source != 0 if width == 1 else _little_endian(source, (width + 7) // 8)
    elif kind == "BIGINT" and column.unsigned and field["type"] == "int64":
        # Read as DECIMAL(20,0); values over 2^63 - 1 wrap, as the events carry them.
        wrap = F.lit(decimal.Decimal(2**64))
        value = F.when(source >= F.lit(decimal.Decimal(2**63)), source - wrap).otherwise(source)
    elif kind == "DATETIME":
        if name in connect_types.MILLIS and (column.length or 0) > 3:
            return None  # the events keep milliseconds of a finer value
        value = source  # read as an instant of the UTC session: the cast gives its wall clock
    elif _same_value(kind, field):
        value = source  # the cast below makes CHAR(n) a plain string, which no reader pads
    else:
        return None
    value = value.cast(target)
    zero = mapping.convert(None)  # a NOT NULL column's zero date (null as read): the epoch
    if zero is not None:
        value = F.coalesce(value, F.lit(connect_types.delta_value(field)(zero)).cast(target))
    return value.alias(column.name)


# Columns whose value as Spark reads it is their Delta value, in another type at most.
_AS_READ = (
    INT_TYPES.keys() | CHAR_TYPES | {"DATE", "TIMESTAMP", "YEAR", "FLOAT", "DOUBLE", "ENUM", "SET", "JSON"}
)


def _same_value(kind: str, field: dict[str, Any]) -> bool:
    if kind in ("DECIMAL", "NUMERIC"):
        return field.get("name") == connect_types.DECIMAL  # not as a string or a double
    if kind in BINARY_TYPES:
        return field["type"] == "bytes"  # not as hex or base64 text
    return kind in _AS_READ


def time_micros(text: Column) -> Column:
    """MySQL's text of a TIME ('-838:59:59.000000' to '838:59:59.000000') in microseconds."""
    pattern = r"^(-?)(\d+):(\d+):(\d+)(?:\.(\d{1,6}))?$"

    def part(n: int) -> Column:
        return F.regexp_extract(text, pattern, n)

    seconds = (part(2).cast("bigint") * 60 + part(3).cast("bigint")) * 60 + part(4).cast("bigint")
    micros = seconds * 1_000_000 + F.rpad(part(5), 6, "0").cast("bigint")
    return F.when(text.isNull(), F.lit(None)).when(part(1) == "-", -micros).otherwise(micros)


def _little_endian(number: Column, size: int) -> Column:
    """The low `size` bytes of a BIGINT, least significant first (Debezium's Bits)."""
    hexed = F.lpad(F.hex(number), 16, "0")  # a negative BIGINT (BIT(64)) in two's complement
    pairs = [F.substring(hexed, 17 - 2 * i, 2) for i in range(1, size + 1)]
    return F.unhex(F.concat(*pairs))


def jdbc_unsupported(form: StagedForm) -> list[str]:
    """The staged columns (not shaped) whose Delta value Spark cannot compute from what its
    JDBC reader reads; they send the table to the Python reader."""
    out = []
    for name in form.columns:
        column = form.schema.column(name)
        if (
            name not in form.shaped
            and column is not None
            and jdbc_column(column, form.mappings[name]) is None
        ):
            out.append(
                f"{name} ({column.type_name} as {form.mappings[name].schema.get('name') or 'its event value'})"
            )
    return out
