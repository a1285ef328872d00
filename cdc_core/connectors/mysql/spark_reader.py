"""The Spark chunk job's JVM path on MySQL/MariaDB (`cdc_core.connector.SparkWindowReader`).

A batch of windows is one `read.jdbc(predicates=...)`, one partition per window, so rows
are decoded by the JVM driver rather than by Python (`jdbc.py`: the URL, the forced types
and the literals of each window's WHERE text). Each column is then staged as read (stream
release) or as the Delta merge lands its events (lakehouse release): an expression from
the value Spark read, or none where Spark cannot give that value exactly, and the table
is read by Python on the executors instead.

Loaded only inside Spark jobs: the rest of the connector never imports pyspark.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.connectors.mysql import jdbc
from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES
from cdc_core.schema.model import Column as TableColumn
from cdc_core.snapshot.chunks import ChunkPlan, Key
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.source import ColumnMapping
from spark_jobs.merge import connect_types

# Spark's marker of a CHAR(n)/VARCHAR(n) string column (the JDBC reader gives ENUM and SET,
# which the driver reports as CHAR, the same).
CHAR_VARCHAR_TYPE = "__CHAR_VARCHAR_TYPE_STRING"


class MySqlSparkReader:
    sql_conf = jdbc.SPARK_SQL_CONF

    def __init__(self, params: dict[str, Any]) -> None:
        self.url, self.options = jdbc.jdbc_url(params), jdbc.jdbc_options(params)

    def unreadable(self, form: StagedForm, lakehouse: bool) -> list[str]:
        found = jdbc.unreadable_columns(form.schema)
        return found + (lakehouse_unsupported(form) if lakehouse else [])

    def read(
        self, spark: Any, form: StagedForm, plan: ChunkPlan, windows: Sequence[tuple[Key | None, Key | None]]
    ) -> Any:
        reader = spark.read
        for name, value in self.options.items():
            reader = reader.option(name, value)
        as_text = jdbc.custom_schema(form.schema)
        if as_text:
            reader = reader.option("customSchema", as_text)
        predicates = [jdbc.predicate(plan, lo, hi) for lo, hi in windows]
        return reader.jdbc(self.url, jdbc.source_table(form.schema), predicates=predicates)

    def staged_column(self, frame: Any, column: TableColumn, mapping: ColumnMapping, lakehouse: bool) -> Any:
        if lakehouse:
            value = lakehouse_column(column, mapping)
            assert value is not None, column.name  # such tables go to the Python reader
            return value
        return as_staged(frame, column)


def as_staged(frame: Any, column: TableColumn) -> Any:
    """A column as it is staged in stream mode: CHAR and VARCHAR values as plain strings
    (Spark keeps a char(n) type in the Parquet schema it writes, and a Spark that reads the
    file again pads its values to n with spaces: 'paid' would become 'paid     '); a
    DATETIME, read as an instant of the UTC session, as the wall-clock time it is."""
    name = column.name
    selected = F.col(f"`{name}`")
    if column.type_name.upper() == "DATETIME":
        return selected.cast(T.TimestampNTZType()).alias(name)
    if CHAR_VARCHAR_TYPE in frame.schema[name].metadata:
        return selected.cast("string").alias(name)
    return selected


def lakehouse_column(column: TableColumn, mapping: ColumnMapping) -> Column | None:
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


def lakehouse_unsupported(form: StagedForm) -> list[str]:
    """The staged columns (not shaped) whose Delta value Spark cannot compute from what its
    JDBC reader reads; they send the table to the Python reader."""
    out = []
    for name in form.columns:
        column = form.schema.column(name)
        if (
            name not in form.shaped
            and column is not None
            and lakehouse_column(column, form.mappings[name]) is None
        ):
            out.append(
                f"{name} ({column.type_name} as {form.mappings[name].schema.get('name') or 'its event value'})"
            )
    return out
