"""Parsed change records (`spark_jobs.merge.records.parse`) to typed change rows.

Output, per table: the row's columns (after-image, or before-image of a delete) in their
Delta types, and the bookkeeping of DESIGN.md §5 — `_cdc_epoch`, `_cdc_rank`,
`_cdc_total_order` (the order key), `_cdc_op`, `_cdc_source_ts`, `_cdc_txn_id`,
`_cdc_deleted`.

Row types come from the Connect schema each event carries (`schemas.enable`, the
default). Events of one table with different schemas (a column added mid-batch) are read
each with its own schema and unioned by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.errors import TidemarkError
from spark_jobs.merge import added_columns, connect_types
from spark_jobs.merge.key_sets import KEY_HEAD, KEY_SET, distinct_sets, head_shape, index_of, key_set_index
from spark_jobs.merge.records import Shape, Shapes, document_envelope, row_fields
from spark_jobs.sql_names import columns, quoted
from spark_jobs.table_checksum import BOOKKEEPING_PREFIX

PATCH = "_cdc_patch"  # a document update's change alone (JSON text); see spark_jobs.merge.patches
ORDER_KEY = ("_cdc_epoch", "_cdc_rank", "_cdc_total_order")
CHANGE_OPS = ("c", "u", "d", "r")
_RANK = "_cdc_newest_rank"  # for a moment, in `newest_per_key`


@dataclass(frozen=True)
class TableChanges:
    """One table's change rows in a batch."""

    topic: str
    key_columns: tuple[str, ...]  # empty: no event of the batch had one (`merge_keys`)
    rows: DataFrame
    # More than one: the table's key changed within the batch, and each row's `KEY_SET`
    # is the index of its key here (`key_sets`); else empty.
    key_sets: tuple[tuple[str, ...], ...] = ()
    documents: bool = False  # a document source's: `_id` and `document` (`records.DOCUMENT_FIELDS`)


def key_columns(key_text: str | None, topic: str) -> tuple[str, ...]:
    if key_text is None:
        raise _no_key(topic)
    key = json.loads(key_text)
    if isinstance(key, dict) and "schema" in key and "payload" in key:
        return tuple(f["field"] for f in key["schema"]["fields"])
    return tuple(key)


def _no_key(topic: str) -> TidemarkError:
    return TidemarkError(
        f"events on {topic} have no key: a Delta MERGE needs one. Give the table one in the connector's "
        "message.key.columns: the merge keys its keyless events by it, those already written included; "
        "nothing of this batch was merged"
    )


def merge_keys(
    changes: TableChanges | None, released: tuple[str, ...] | None, configured: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """What a table's batch is MERGEd by: its events' key, else its released windows'.
    None of either: the batch holds truncates of the table alone (a truncate has no key),
    or rows of a table without a key, which are MERGEd by the `configured` columns
    (`message.key.columns`) or refused."""
    keys = (changes.key_columns if changes is not None else ()) or released or ()
    if keys or changes is None or changes.rows.isEmpty():
        return keys
    if not configured:
        raise _no_key(changes.topic)
    named = {c.lower(): c for c in changes.rows.columns}  # as MySQL names columns: in any case
    missing = [c for c in configured if c.lower() not in named]
    if missing:
        raise TidemarkError(
            f"events on {changes.topic}: message.key.columns names {missing}, not row columns"
        )
    return tuple(named[c.lower()] for c in configured)


def table_changes(parsed: DataFrame, topics: set[str], shapes: Shapes) -> list[TableChanges]:
    """The typed change rows of each of `topics` in `parsed` (`records.parse`), one frame
    per topic."""
    out = []
    for topic in sorted(topics):
        variants = shapes.of(topic)
        if not variants:
            continue
        documents = document_envelope(variants[0].schema)
        # A truncate has no key: the key comes from the batch's keyed events, and a batch
        # holding only truncates of the table has none (nor rows to MERGE by one).
        sets = (
            ()
            if documents
            else distinct_sets([key_columns(k, topic) for v in variants for k in v.keys or [v.key] if k])
        )
        keys = ("_id",) if documents else sets[0] if sets else ()
        if len(sets) < 2:
            sets = ()
        older = added_columns.older_shapes(parsed, topic, variants) if len(variants) > 1 else {}
        frames = []
        for shape in variants:
            if shape.schema is None:
                raise TidemarkError(
                    f"events on {topic} carry no schema and name none: set value.converter.schemas.enable (the "
                    "default), or keep tidemark.schema.references on with its <prefix>.schemas topic, so the "
                    "merge knows each column's type"
                )
            _check_reserved(topic, shape)
            these = (F.col("topic") == topic) & (F.col("schema_id") == F.lit(shape.schema_id))
            frame = _typed(parsed.where(these), shape, sets, _head_sets(shapes.heads, sets, topic))
            for name, value in older.get(shape.schema_id, {}).items():  # a column added later
                frame = frame.withColumn(name, value)
            frames.append(frame)
        rows = frames[0]
        for frame in frames[1:]:
            rows = rows.unionByName(frame, allowMissingColumns=True)
        missing = [k for k in {*keys, *(c for s in sets for c in s)} if k not in rows.columns]
        if missing:
            raise TidemarkError(f"events on {topic}: key column(s) {sorted(missing)} are not row columns")
        out.append(TableChanges(topic, keys, rows, sets, documents))
    return out


def _check_reserved(topic: str, shape: Shape) -> None:
    """A source column named like the bookkeeping (`_cdc_op`, ...) would be two columns of
    one name in Delta: refused, naming it, before anything of the batch is merged."""
    assert shape.schema is not None
    taken = [f["field"] for f in row_fields(shape.schema) if f["field"].startswith(BOOKKEEPING_PREFIX)]
    if taken:
        raise TidemarkError(
            f"events on {topic}: column(s) {taken} begin with {BOOKKEEPING_PREFIX!r}, which the merge keeps for "
            "its bookkeeping columns; nothing of this batch was merged (leave them out with "
            "column.exclude.list, or rename them at the source)"
        )


def _head_sets(
    heads: tuple[str, ...], sets: tuple[tuple[str, ...], ...], topic: str
) -> tuple[int | None, ...]:
    """Per key head the batch was parsed with (`Shapes.heads`), which of `sets` its keys are."""
    if not sets:
        return ()
    return tuple(index_of(key_columns(head_shape(head), topic), sets) for head in heads)


def _typed(
    parsed: DataFrame,
    shape: Shape,
    key_sets: tuple[tuple[str, ...], ...] = (),
    head_sets: tuple[int | None, ...] = (),
) -> DataFrame:
    """The parsed row image (JSON types) in its Delta types, with the bookkeeping (and
    each row's `KEY_SET` among `key_sets`, when there are several: a row whose key the
    parse left out has the one of its key head, `head_sets`)."""
    assert shape.schema is not None
    fields = row_fields(shape.schema)
    row = parsed.where(F.col("p_op").isin(*CHANGE_OPS))
    images: list[Column] = [
        connect_types.convert(F.col(f"{shape.column}.{quoted(f['field'])}"), f).alias(f["field"])
        for f in fields
    ]
    if document_envelope(shape.schema):  # an update's change alone, for `patches.rebuilt`
        images.append(F.col(f"{shape.column}.patch").alias(PATCH))
    return row.select(
        *images,
        F.col("p_epoch").alias("_cdc_epoch"),
        F.col("p_rank").alias("_cdc_rank"),
        F.col("p_total_order").alias("_cdc_total_order"),
        F.col("p_op").alias("_cdc_op"),
        F.timestamp_millis(F.col("p_ts_ms")).alias("_cdc_source_ts"),
        F.col("p_txn_id").alias("_cdc_txn_id"),
        (F.col("p_op") == "d").alias("_cdc_deleted"),
        *([_key_set(parsed, key_sets, head_sets).alias(KEY_SET)] if key_sets else []),
    )


def _key_set(
    parsed: DataFrame, key_sets: tuple[tuple[str, ...], ...], head_sets: tuple[int | None, ...]
) -> Column:
    head = F.col(KEY_HEAD) if KEY_HEAD in parsed.columns else None
    return key_set_index(F.col("key"), key_sets, head, head_sets)


# Bytes a value takes in a Spark row, roughly (a text column: a short text and its length).
_WIDTH = {
    T.BooleanType: 1,
    T.ByteType: 1,
    T.ShortType: 2,
    T.IntegerType: 4,
    T.DateType: 4,
    T.FloatType: 4,
    T.StringType: 32,
    T.BinaryType: 32,
    T.DecimalType: 16,
}


def estimated_bytes(schema: T.StructType, rows: int) -> int:
    """What `rows` rows of `schema` take in memory, as a broadcast would hold them."""
    width = sum(8 + _WIDTH.get(type(f.dataType), 8) for f in schema.fields)
    return rows * width


def newest_per_key(rows: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """The newest event per key by order key (epoch, rank, total_order; nulls lowest); the
    order of events in the batch does not matter. Ranked in one sort after the shuffle by
    key: `max_by` over the order key sorts twice, since Spark aggregates a struct by
    sorting, before and after the shuffle (see `spark_jobs.session.local_defaults` for the
    ranking's own partial top-1)."""
    latest = Window.partitionBy(*columns(keys)).orderBy(*[F.col(c).desc_nulls_last() for c in ORDER_KEY])
    return rows.withColumn(_RANK, F.row_number().over(latest)).where(F.col(_RANK) == 1).drop(_RANK)
