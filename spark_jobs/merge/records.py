"""Records (`topic, key, value` as JSON text) parsed once per batch, straight into types.

A value with its Connect schema is `{"schema": S, "payload": P}`, and S is most of it
(about 2 KB for ten columns, the same text on every event of a table). Each record is
first cut into its schema's id and its payload text (`spark_jobs.merge.cutting`); then,
with the batch's schemas in hand (`collect_shapes`), `parse` reads each payload once,
into the fields every record kind has (`FLAT`: op, source time, transaction; status, id,
data_collections of BEGIN/END; data_collection of a release) and, for a change event,
its row image in JSON types (`row_<n>`, one column per schema).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge import connect_types
from spark_jobs.merge.census import Census
from spark_jobs.merge.json_reader import from_json
from spark_jobs.merge.key_sets import KEY_HEAD, head_index
from spark_jobs.sql_names import quoted

RECORDS = "topic STRING, key STRING, value STRING"
# A record's place in its topic, when the source gives one (Kafka): carried through the
# cut and the parse, so the offsets a batch reached are read from the parse's cache
# rather than by reading the source a second time.
POSITION = ("partition", "offset")
# A schemaless value's schema by reference (the `__tidemark.schema` header), when the
# source has it: carried like the position, for the value's cut (`spark_jobs.merge.cutting`).
REFERENCE = "schema_ref"
TRANSACTION_BLOCK = T.StructType(
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
        T.StructField("transaction", TRANSACTION_BLOCK),
        T.StructField("status", T.StringType()),
        T.StructField("id", T.StringType()),
        T.StructField("data_collections", _COUNTS),
        T.StructField("data_collection", T.StringType()),
    ]
)


def carried(frame: DataFrame) -> list[str]:
    """The `POSITION` and `REFERENCE` columns `frame` has."""
    return [c for c in (*POSITION, REFERENCE) if c in frame.columns]


@dataclass(frozen=True)
class Shape:
    """One schema seen on a topic in the batch, with a sample key."""

    topic: str
    schema_id: int
    schema: dict[str, Any] | None
    text: str | None
    key: str | None
    column: str  # the parsed row's column (`parse`)
    keys: tuple[str, ...] = ()  # the batch's keys of this schema without values (`census`)


@dataclass(frozen=True)
class Shapes:
    by_topic: dict[str, list[Shape]] = field(default_factory=dict)
    cut_wrong: bool = False  # a schema was cut short: cut the batch again with fast=False
    records: dict[str, int] = field(default_factory=dict)  # records with a payload, per topic
    # Per topic, the order keys of its first and last events, where a batch of typed files
    # alone told them (`typed_figures`): None otherwise.
    orders: dict[str, tuple[list[int], list[int]]] | None = None
    # The topics whose records include a truncate, where the batch's census told them
    # (`census.tally`, `typed_figures`): None otherwise.
    truncating: frozenset[str] | None = None
    # Per topic and partition, the highest offset of the batch's records, where they carry
    # Kafka's positions and the census took them (`census.tally`): None otherwise.
    reached: dict[str, dict[str, int]] | None = None
    # The key heads the batch was parsed with (`KEY_HEAD`), for the key sets of records
    # whose key the parse left out.
    heads: tuple[str, ...] = ()
    # Every transaction in the batch is complete, where its census told it
    # (`transaction_fingerprint`): None otherwise.
    whole: bool | None = None

    def of(self, topic: str) -> list[Shape]:
        return self.by_topic.get(topic, [])

    def all(self) -> list[Shape]:
        return [s for shapes in self.by_topic.values() for s in shapes]

    def texts(self) -> dict[int, str]:
        return {s.schema_id: s.text for s in self.all() if s.text is not None}

    def counted(self, counts: Census) -> Shapes:
        """These shapes with the number of records per topic, each taking the shapes of its
        keys (and a sample) from the batch's records of its schema where they have keys."""
        records: dict[str, int] = {}
        for (topic, _), (n, _, _) in counts.items():
            records[topic] = records.get(topic, 0) + n

        def sampled(shape: Shape) -> Shape:
            if (shape.topic, shape.schema_id) not in counts:
                return shape
            _, _, keys = counts[(shape.topic, shape.schema_id)]
            return replace(shape, key=keys[0] if keys else None, keys=keys)

        keyed = {topic: [sampled(s) for s in shapes] for topic, shapes in self.by_topic.items()}
        return Shapes(keyed, self.cut_wrong, records)

    def only(self, present: set[tuple[str, int]]) -> Shapes:
        """The shapes among `present` (topic, schema id) pairs."""
        kept: dict[str, list[Shape]] = {}
        for shape in self.all():
            if (shape.topic, shape.schema_id) in present:
                kept.setdefault(shape.topic, []).append(shape)
        return Shapes(kept)

    def adopting(self, other: Shapes) -> Shapes:
        """These shapes, each one `other` has too (same topic and schema) taking its
        column: the rows of one schema then land in one column when parsed parts of a
        batch are unioned."""
        theirs = {(s.topic, s.schema_id): s.column for s in other.all()}
        return Shapes(
            {
                topic: [replace(s, column=theirs.get((s.topic, s.schema_id), s.column)) for s in shapes]
                for topic, shapes in self.by_topic.items()
            },
            self.cut_wrong,
        )

    def __or__(self, other: Shapes) -> Shapes:
        """Both sets of shapes, each (topic, schema) once."""
        joined = {t: list(v) for t, v in self.by_topic.items()}
        seen = {(s.topic, s.schema_id) for s in self.all()}
        for topic, shapes in other.by_topic.items():
            joined.setdefault(topic, []).extend(s for s in shapes if (s.topic, s.schema_id) not in seen)
        return Shapes(joined)


def collect_shapes(cuts: DataFrame, fast: bool, not_rows: set[str]) -> Shapes:
    """The distinct schemas per topic, each with its text and a sample key, in one small
    aggregation (`cuts` is cached; any record of a schema id has that schema's text). A
    schema that is not JSON after a fast cut means the cut was wrong (`Shapes.cut_wrong`).
    Records of `not_rows` (transaction boundaries, releases) carry no row to parse; the
    others' rows get columns `row_<n>`."""
    found = (
        cuts.where(F.col("payload").isNotNull())
        .groupBy("topic", "schema_id")
        .agg(F.first("schema").alias("schema"), F.first("key").alias("key"))
        .collect()
    )
    by_topic: dict[str, list[Shape]] = {}
    for n, row in enumerate(sorted(found, key=lambda r: (r.topic, r.schema_id))):
        text = row.schema
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
        column = f"row_{n}" if row.topic not in not_rows and schema is not None else ""
        by_topic.setdefault(row.topic, []).append(
            Shape(row.topic, row.schema_id, schema, text, row.key, column)
        )
    return Shapes(by_topic)


# A document source's row (MongoDB's envelope: `after`/`before` are Extended JSON text):
# the record key's `id` as `_id`, and the document, which lands as a VARIANT column.
DOCUMENT = connect_types.DOCUMENT
DOCUMENT_FIELDS = (
    {"field": "_id", "type": "string", "optional": False},
    {"field": "document", "type": "string", "optional": True, "name": DOCUMENT},
)


def document_envelope(value_schema: dict[str, Any] | None) -> bool:
    """Whether the envelope carries documents as JSON text rather than a row struct."""
    for part in (value_schema or {}).get("fields", []):
        if part.get("field") == "after":
            return part.get("type") == "string" and part.get("name") == "io.debezium.data.Json"
    return False


def row_fields(value_schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's field schemas, from an envelope's Connect schema."""
    if document_envelope(value_schema):
        return [dict(f) for f in DOCUMENT_FIELDS]
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


def envelope_type(image: T.DataType, patch_field: str | None = None) -> T.StructType:
    """A change event's payload as parsed: its row images as `image`, with `PAYLOAD`, and
    a document source's change-only field (`DocumentPatches.field`) as JSON text."""
    patch = [T.StructField(patch_field, T.StringType())] if patch_field else []
    return T.StructType(
        [T.StructField("before", image), T.StructField("after", image), *PAYLOAD.fields, *patch]
    )


# The fields of `PAYLOAD` that the merge reads, as top-level columns of `parse`'s output
# (flat columns cost less to cache and to read back than one struct).
FLAT = {
    "p_op": ("op",),
    "p_ts_ms": ("source", "ts_ms"),
    "p_txn_id": ("transaction", "id"),
    "p_total_order": ("transaction", "total_order"),
    "p_epoch": ("transaction", "transaction_epoch"),
    "p_rank": ("transaction", "transaction_rank"),
    "p_status": ("status",),
    "p_id": ("id",),
    "p_data_collections": ("data_collections",),
    "p_data_collection": ("data_collection",),
}


def parse(
    cuts: DataFrame, shapes: Shapes, patch_field: str | None = None, heads: Sequence[str] = ()
) -> DataFrame:
    """`topic, key, schema_id, payload, present`, `KEY_HEAD`, the `FLAT` fields and a
    `row_<n>` column per change-event schema (null on other records): each payload parsed
    once, with the schema of its kind. A document's row has its event's `patch_field` as
    `patch`. `payload` is null where the source can give the record again (`_again`), and
    so is `key` where it starts with one of `heads` (`KEY_HEAD` tells which)."""
    payload = F.col("payload")
    spark = cuts.sparkSession
    rows = [s for s in shapes.all() if s.column]
    is_row = F.lit(False)
    full = []
    for shape in rows:
        this = (F.col("topic") == shape.topic) & (F.col("schema_id") == F.lit(shape.schema_id))
        is_row = is_row | this
        documents = document_envelope(shape.schema)
        envelope = (
            envelope_type(T.StringType(), patch_field) if documents else envelope_type(image_type(shape))
        )
        full.append(F.when(this, from_json(spark, payload, envelope)).alias(f"_{shape.column}"))
    # A record `cut_known` left uncut (no schema id) is parsed later, the general way.
    other = ~is_row & F.col("schema_id").isNotNull()
    staged = cuts.drop("schema").select(
        "*", F.when(other, from_json(spark, payload, PAYLOAD)).alias("_p"), *full
    )
    sources = ["_p", *[f"_{s.column}" for s in rows]]  # at most one is not null per record

    def flat(path: tuple[str, ...]) -> Column:
        found = []
        for source in sources:
            column = F.col(source)
            for name in path:
                column = column.getField(name)
            found.append(column)
        return F.coalesce(*found) if len(found) > 1 else found[0]

    images = [_image(s, patch_field).alias(s.column) for s in rows]
    fields = [flat(path).alias(name) for name, path in FLAT.items()]
    present = payload.isNotNull().alias("present")  # not a tombstone
    # `when(again, null)`, not `when(~again, payload)`: `is_row` is null where the schema
    # id is (not cut yet), and that payload is kept.
    again = _again(cuts, is_row)
    kept = F.when(again, F.lit(None).cast("string")).otherwise(payload).alias("payload")
    head = F.when(payload.isNotNull(), head_index(F.col("key"), heads))
    key = F.when(again & head.isNotNull(), F.lit(None).cast("string")).otherwise(F.col("key"))
    return staged.select(
        "topic",
        key.alias("key"),
        *carried(cuts),
        "schema_id",
        kept,
        present,
        head.alias(KEY_HEAD),
        *fields,
        *images,
    )


def _again(cuts: DataFrame, is_row: Column) -> Column:
    """Whether a record's payload is left out of the parse: a change event whose source
    can give it again by position (`held_records`), in its own schema's form. Most of a
    batch's bytes are its payloads, and the batch without them took 2.6 s less of 23.7 s
    at 1,000,000 events (the merge benchmark's inputs, README: "Changed on 2026-12-06");
    only records held back need them. Most of the rest is the key's text, with its
    schema; its head's index stands in for it."""
    if POSITION[1] not in cuts.columns:
        return F.lit(False)
    again = is_row & F.col(POSITION[1]).isNotNull()
    return again & F.col(REFERENCE).isNull() if REFERENCE in cuts.columns else again


def _image(shape: Shape, patch_field: str | None = None) -> Column:
    """A change event's row: its after image, or the before image of a delete. A document's
    row takes its `_id` from the record key (a delete has no document without pre-images)
    and its update's change alone as `patch` (`spark_jobs.merge.patches`)."""
    envelope = f"_{shape.column}"
    image = F.when(F.col(f"{envelope}.op") == "d", F.col(f"{envelope}.before")).otherwise(
        F.col(f"{envelope}.after")
    )
    if not document_envelope(shape.schema):
        return image
    key = F.coalesce(F.get_json_object("key", "$.payload.id"), F.get_json_object("key", "$.id"))
    patch = F.col(f"{envelope}.{quoted(patch_field)}") if patch_field else F.lit(None).cast("string")
    patch = F.when(F.col(f"{envelope}.op") == "u", patch)
    return F.when(
        F.col(envelope).isNotNull(), F.struct(key.alias("_id"), image.alias("document"), patch.alias("patch"))
    )
