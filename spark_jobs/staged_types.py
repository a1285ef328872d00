"""Snapshot rows staged for the lakehouse fast path, as the Delta table holds them.

On the fast path the Delta merge applies a window's staged Parquet as it is
(`spark_jobs/merge/releases.py`), so the chunk job stages each column as the merge lands
the column's `op=r` event: in its Delta type (`connect_types.delta_type` of the Connect
field the events carry; a column shaped by the column rules is a string) with that type's
value. Every staged file of a table then has the same schema, whatever its values (a
window where a column is all NULL, an empty window), and the merge creates or fills the
table with the types the events give it.

- A connector's Spark reader: an expression per column from the value Spark read
  (`SparkWindowReader.staged_column`); where Spark cannot give the Delta value exactly,
  the table is read by Python.
- The Python reader: each value to its event value by the connector's own type mapping,
  as the streamer makes it, then to its Delta value by `connect_types.delta_value`, the
  Python twin of what the merge does to the event.

In stream mode rows are staged as read instead, and the streamer makes the events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import types as T

from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import write_parquet, write_parquet_columns
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


def write_window_events(uri: str, form: StagedForm, values: Mapping[str, list[Any]]) -> int:
    """Stage a lakehouse window given in event form, column by column (a session's
    `read_chunk_events`): each column to its Delta values, none of them shaped by rules.
    Returns the number of rows."""
    types = arrow_types(delta_schema(form))
    columns: dict[str, list[Any]] = {}
    for name in form.columns:
        delta = connect_types.delta_value(staged_field(form, name))
        column = values[name]
        columns[name] = (
            column if delta is connect_types.same else [None if v is None else delta(v) for v in column]
        )
    write_parquet_columns(uri, columns, types)
    return len(next(iter(columns.values()), []))


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
