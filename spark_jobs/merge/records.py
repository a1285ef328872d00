"""Records (`topic, key, value` as JSON text) parsed once per batch, straight into types.

A value with its Connect schema is `{"schema": S, "payload": P}`, and S is most of it
(about 3 KB for ten columns, the same text on every event of a table). Parsing S on every
event would cost more than the MERGE, so each record is handled in two steps:

1. `cut`: the schema is cut out of the text, not parsed. The streamer writes exactly
   `{"schema":S,"payload":P}`, and the first `,"payload":` is then the top-level key
   unless S itself holds an object key "payload" — in which case the cut-off S is not
   valid JSON, which `collect_shapes` notices, so the batch is cut again the slow way
   (`cut(records, fast=False)`: a JSON parse per record). A value in any other form
   (other spacing or key order, or no schema) takes the slow way per record. Each
   record keeps its schema's hash (`schema_id`) and its payload text.
2. `parse`: with the batch's few distinct schemas in hand (`collect_shapes`), each
   payload is parsed once, into the fields every record kind has (`p`: op, source,
   transaction; status, id, data_collections of BEGIN/END; data_collection of a release)
   and, for a change event, its row image in JSON types (`row_<n>`, one column per
   schema).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge import connect_types

RECORDS = "topic STRING, key STRING, value STRING"
_OPEN, _CUT = '{"schema":', ',"payload":'
_WRAPPED = "schema STRING, payload STRING"
_TRANSACTION = T.StructType(
    [
        T.StructField("id", T.StringType()),
        T.StructField("total_order", T.LongType()),
        T.StructField("transaction_epoch", T.LongType()),
        T.StructField("transaction_rank", T.LongType()),
    ]
)
_COUNTS = T.ArrayType(
    T.StructType(
        [T.StructField("data_collection", T.StringType()), T.StructField("event_count", T.LongType())]
    )
)
# Built as types, not parsed from DDL text: parsing needs a running SparkContext, and this
# module is imported before the job builds its session.
PAYLOAD = T.StructType(
    [
        T.StructField("op", T.StringType()),
        T.StructField(
            "source",
            T.StructType(
                [
                    T.StructField("ts_ms", T.LongType()),
                    T.StructField("db", T.StringType()),
                    T.StructField("table", T.StringType()),
                ]
            ),
        ),
        T.StructField("transaction", _TRANSACTION),
        T.StructField("status", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("data_collections", _COUNTS),
        T.StructField("data_collection", T.StringType()),
    ]
)


def _head() -> Column:
    """`{"schema":S` of a value in the streamer's form (a byte search, no parse), else null."""
    value = F.col("value")
    head = F.substring_index(value, _CUT, 1)
    shaped = value.startswith(_OPEN) & value.endswith("}")
    return F.when(shaped & (F.octet_length(head) < F.octet_length(value)), head)


def cut(records: DataFrame, fast: bool = True) -> DataFrame:
    """`topic, key, schema, schema_id, payload` per record of `topic, key, value`
    (`payload` null for a tombstone)."""
    # Each step is a projection of its own, so the head and the wrapper are found once per
    # record; the wrapper is parsed only for records the fast cut does not take.
    head = _head() if fast else F.lit(None).cast("string")
    headed = records.select("topic", "key", "value", head.alias("_head"))
    wrapped = F.when(F.col("_head").isNull(), F.from_json("value", _WRAPPED))
    parsed = headed.select("*", wrapped.alias("_wrapped"))
    fast_cut = F.col("_head").isNotNull()
    schema = F.expr(f"CAST(substring(CAST(_head AS BINARY), {len(_OPEN) + 1}) AS STRING)")
    # The payload is cut by byte offsets on the binary form: a string's substring counts
    # characters from the start.
    start = f"octet_length(_head) + {len(_CUT) + 1}"
    rest = F.expr(
        f"CAST(substring(CAST(value AS BINARY), {start}, octet_length(value) - ({start})) AS STRING)"
    )
    slow_payload = F.coalesce(F.col("_wrapped.payload"), F.col("value"))
    texts = parsed.select(
        "topic",
        "key",
        F.when(fast_cut, schema).otherwise(F.col("_wrapped.schema")).alias("schema"),
        F.when(fast_cut, rest).otherwise(slow_payload).alias("payload"),
    )
    return texts.select("topic", "key", "schema", F.xxhash64("schema").alias("schema_id"), "payload")


def value_text(schemas: dict[int, str]) -> Column:
    """The record's value again from `schema_id` and `payload` (for records held back),
    with `schemas` mapping each schema id of the batch to its text."""
    schema = F.lit(None).cast("string")
    for schema_id, text in schemas.items():
        schema = F.when(F.col("schema_id") == F.lit(schema_id), F.lit(text)).otherwise(schema)
    wrapped = F.concat(F.lit(_OPEN), schema, F.lit(_CUT), F.col("payload"), F.lit("}"))
    return F.when(schema.isNotNull(), wrapped).otherwise(F.col("payload"))


@dataclass(frozen=True)
class Shape:
    """One schema seen on a topic in the batch, with a sample key."""

    topic: str
    schema_id: int
    schema: dict[str, Any] | None
    text: str | None
    key: str | None
    column: str  # the parsed row's column (`parse`)


@dataclass(frozen=True)
class Shapes:
    by_topic: dict[str, list[Shape]] = field(default_factory=dict)
    cut_wrong: bool = False  # a schema was cut short: cut the batch again with fast=False

    def of(self, topic: str) -> list[Shape]:
        return self.by_topic.get(topic, [])

    def all(self) -> list[Shape]:
        return [s for shapes in self.by_topic.values() for s in shapes]

    def texts(self) -> dict[int, str]:
        return {s.schema_id: s.text for s in self.all() if s.text is not None}


def collect_shapes(cuts: DataFrame, fast: bool, not_rows: set[str]) -> Shapes:
    """The distinct schemas per topic: their ids from `cuts` (one small aggregation), each
    one's text and a sample key from the first record that has it (`cuts` is cached: the
    repeated schema text costs little there, as Spark's in-memory columns keep a
    dictionary of distinct values). A schema that is not JSON after a fast cut means the
    cut was wrong (`Shapes.cut_wrong`). Records of `not_rows` (transaction boundaries,
    releases) carry no row to parse."""
    found = cuts.where(F.col("payload").isNotNull()).groupBy("topic", "schema_id").count().collect()
    by_topic: dict[str, list[Shape]] = {}
    for n, row in enumerate(sorted(found, key=lambda r: (r.topic, r.schema_id))):
        sample = (
            cuts.where(
                (F.col("topic") == row.topic)
                & (F.col("schema_id") == F.lit(row.schema_id))
                & F.col("payload").isNotNull()
            )
            .select("key", "schema")
            .limit(1)
            .collect()
        )
        text = sample[0].schema if sample else None
        schema = None
        if text is not None:
            try:
                schema = json.loads(text)
            except ValueError:
                schema = None
            if not isinstance(schema, dict):
                if fast:
                    return Shapes(cut_wrong=True)
                raise TidemarkError(f"an event's Connect schema on {row.topic} is not a JSON object")
        key = sample[0].key if sample else None
        column = f"row_{n}" if row.topic not in not_rows and schema is not None else ""
        by_topic.setdefault(row.topic, []).append(Shape(row.topic, row.schema_id, schema, text, key, column))
    return Shapes(by_topic)


def row_fields(value_schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's field schemas, from an envelope's Connect schema."""
    for part in value_schema.get("fields", []):
        if part.get("field") in ("after", "before") and part.get("type") == "struct":
            return list(part["fields"])
    raise TidemarkError("an event's schema has no before/after struct")


def image_type(shape: Shape) -> T.StructType:
    """The row as read from the event's JSON (`connect_types.json_type` per field)."""
    assert shape.schema is not None
    return T.StructType(
        [T.StructField(f["field"], connect_types.json_type(f)) for f in row_fields(shape.schema)]
    )


def parse(cuts: DataFrame, shapes: Shapes) -> DataFrame:
    """`topic, key, schema_id, payload, p` and a `row_<n>` column per change-event schema
    (null on other records): each payload parsed once, with the schema of its kind."""
    payload = F.col("payload")
    rows = [s for s in shapes.all() if s.column]
    is_row = F.lit(False)
    full = []
    for shape in rows:
        this = (F.col("topic") == shape.topic) & (F.col("schema_id") == F.lit(shape.schema_id))
        is_row = is_row | this
        image = image_type(shape)
        read_as = T.StructType(
            [T.StructField("before", image), T.StructField("after", image), *PAYLOAD.fields]
        )
        full.append(F.when(this, F.from_json(payload, read_as)).alias(f"_{shape.column}"))
    staged = cuts.drop("schema").select(
        "*", F.when(~is_row, F.from_json(payload, PAYLOAD)).alias("_p"), *full
    )
    p = F.col("_p")
    for shape in rows:
        v = F.col(f"_{shape.column}")
        # F.struct is never null itself: without the `when`, coalesce would stop at it.
        p = F.coalesce(p, F.when(v.isNotNull(), F.struct(*[v[f.name].alias(f.name) for f in PAYLOAD.fields])))
    images = [
        F.when(F.col(f"_{s.column}.op") == "d", F.col(f"_{s.column}.before"))
        .otherwise(F.col(f"_{s.column}.after"))
        .alias(s.column)
        for s in rows
    ]
    return staged.select("topic", "key", "schema_id", "payload", p.alias("p"), *images)


def recognised() -> Column:
    """The payload parsed as a record the merge knows: a change event (`op`), a
    transaction boundary (`status`) or a release (`data_collection`). Malformed JSON
    parses to all-null fields, so it is not."""
    return F.coalesce(F.col("p.op"), F.col("p.status"), F.col("p.data_collection")).isNotNull()


def check_recognised(parsed: DataFrame) -> None:
    """Records whose payload is not a JSON event are an error naming the topic: merging
    around them would lose them."""
    bad = parsed.where(F.col("payload").isNotNull() & ~recognised()).groupBy("topic").count().collect()
    if bad:
        detail = ", ".join(f"{r['count']} on {r.topic}" for r in sorted(bad, key=lambda r: r.topic))
        raise TidemarkError(
            f"records whose value is not a JSON event ({detail}): nothing of this batch was merged"
        )
