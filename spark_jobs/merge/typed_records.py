"""Typed files of the Parquet event log as parsed records, with no JSON to parse.

A typed file (`cdc_core.sinks.parquet_log`) holds each event's envelope as columns and its
Connect schemas once in the footer, so the columns `records.parse` takes out of JSON are
read straight from it: the `FLAT` fields, and the row image (after, or before for a
delete) in the types `records.image_type` gives. The parts are not cached: reading their
few columns again costs less than holding them.

Key and payload stay JSON text for the few uses that need text (a held-back record goes
to the pending store as the value the converter would have written, see `cutting.value_text`);
they are lazy expressions, rendered only for the records that use them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.events.envelope import with_schema
from spark_jobs.merge.known_schemas import known_ids
from spark_jobs.merge.records import FLAT, PAYLOAD, Shape, Shapes, image_type
from spark_jobs.merge.typed_figures import Figures, FileSpan, typed_figures


@dataclass(frozen=True)
class TypedPart:
    """One topic's typed files of one schema: `offset, ts, key, value, headers`."""

    topic: str
    frame: DataFrame
    key_schema: str  # the Connect schemas as JSON text ('' for a table without a key)
    value_schema: str
    key_schemas: bool  # whether the converters write them with the payloads
    value_schemas: bool
    span: FileSpan  # the files `frame` reads, and its offsets


def connect_json(column: Column, schema: str, with_it: bool) -> Column:
    """A typed payload as the JSON converter writes it (nulls kept, as Connect does)."""
    payload = F.to_json(column, {"ignoreNullFields": "false"})
    if with_it and schema:
        payload = F.concat(F.lit('{"schema":' + schema + ',"payload":'), payload, F.lit("}"))
    return F.when(column.isNotNull(), payload)


def typed_batch(
    parts: list[TypedPart], not_rows: set[str], others: Shapes
) -> tuple[DataFrame, Shapes, Figures]:
    """The parts as `records.parse` gives records (`topic, key, offset, schema_id, payload,
    present`, the `FLAT` fields, a row column per change-event schema), their shapes (a
    schema the batch's JSON records have too keeps its column: `others`) and their census
    and order keys (`typed_figures`, read from the files without a Spark job)."""
    spark = parts[0].frame.sparkSession
    ids = {text: i for i, text in known_ids(spark, [(p.topic, p.value_schema) for p in parts]).items()}
    shapes: dict[tuple[str, str], Shape] = {}
    for n, part in enumerate(parts):
        if (part.topic, part.value_schema) not in shapes:
            column = "" if part.topic in not_rows else f"row_t{n}"
            key = _key_shape(part)
            schema = json.loads(part.value_schema)
            shapes[(part.topic, part.value_schema)] = Shape(
                part.topic, ids[part.value_schema], schema, part.value_schema, key, column
            )
    found = _grouped(shapes).adopting(others)
    frames = []
    for part in parts:
        shape = next(s for s in found.of(part.topic) if s.schema_id == ids[part.value_schema])
        frames.append(_parsed(part, shape))
    parsed = frames[0]
    for frame in frames[1:]:
        parsed = parsed.unionByName(frame, allowMissingColumns=True)
    figures = typed_figures([(p.topic, ids[p.value_schema], _key_shape(p), p.span) for p in parts])
    return parsed, found, figures


def _key_shape(part: TypedPart) -> str | None:
    """The part's keys without their values (`key_sets.key_shape`): a part has one key
    schema, and a table whose key changed has a part per key."""
    return with_schema(part.key_schema.encode(), b"{}").decode() if part.key_schema else None


def _grouped(shapes: dict[tuple[str, str], Shape]) -> Shapes:
    by_topic: dict[str, list[Shape]] = {}
    for shape in shapes.values():
        by_topic.setdefault(shape.topic, []).append(shape)
    return Shapes(by_topic)


def _parsed(part: TypedPart, shape: Shape) -> DataFrame:
    value_type = part.frame.schema["value"].dataType
    value = F.col("value")
    fields = [_field(value, value_type, PAYLOAD, path).alias(name) for name, path in FLAT.items()]
    rows = []
    if shape.column:
        image = F.when(value.getField("op") == "d", value.getField("before")).otherwise(
            value.getField("after")
        )
        rows.append(image.cast(image_type(shape)).alias(shape.column))
    key = (
        F.col("key") if not part.key_schema else connect_json(F.col("key"), part.key_schema, part.key_schemas)
    )
    return part.frame.select(
        F.lit(part.topic).alias("topic"),
        key.alias("key"),
        "offset",
        # A tombstone is in its delete's file but has no schema, as on the JSON path.
        F.when(value.isNotNull(), F.lit(shape.schema_id)).alias("schema_id"),
        connect_json(value, "", False).alias("payload"),
        value.isNotNull().alias("present"),
        *fields,
        *rows,
    )


def _field(value: Column, value_type: T.DataType, payload: T.StructType, path: tuple[str, ...]) -> Column:
    """`value`'s field at `path`, as `PAYLOAD` types it (null where the envelope has none)."""
    target: T.DataType = payload
    for name in path:
        assert isinstance(target, T.StructType)
        target = target[name].dataType
    column = value
    for name in path:
        if not isinstance(value_type, T.StructType) or name not in value_type.names:
            return F.lit(None).cast(target)
        column, value_type = column.getField(name), value_type[name].dataType
    return column.cast(target)
