"""TRUNCATE landed: a truncate event ends every row of its table older than it.

A truncate event (`op` `t`: MySQL's TRUNCATE TABLE, emitted when `skipped.operations`
leaves `t` out) has no key and no row. Its order key is the table's truncation mark:
every row whose last change is older than the mark no longer exists at the source.

Landing it takes two steps, each safe to repeat:
- the rows already in the table that the mark ends are ended where they lie (a latest-row
  table's become tombstones at the mark; an SCD2 table's current versions get a delete
  version at the mark), in one commit that needs no key, since a batch holding only the
  truncate has no keyed event to name the table's key;
- the batch's own events older than the mark are left out (SCD2: kept as history, each
  key ended by a delete version at the mark), and the rest MERGEd as always.

The mark is kept as a table property (`tidemark.truncated`, versioned JSON), so an event
older than it that arrives in a later batch (a transaction held back, a replay) is left
out too, even for a key the table never held. A table state between the two commits is
one the source had: just after the truncate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.merge.changes import ORDER_KEY, newest_per_key
from spark_jobs.merge.delta_apply import property_value, set_property
from spark_jobs.merge.scd2 import CURRENT, END
from spark_jobs.sql_names import column, quoted

PROPERTY = "tidemark.truncated"
_VERSION = 1


@dataclass(frozen=True, order=True)
class Mark:
    """A truncate's order key (epoch, rank, total_order), with its source time and
    transaction for the rows it ends."""

    order: tuple[int, int, int]
    ts_ms: int = field(default=0, compare=False)
    txn_id: str | None = field(default=None, compare=False)

    def to_json(self) -> str:
        return json.dumps(
            {"version": _VERSION, "order": list(self.order), "ts_ms": self.ts_ms, "txn_id": self.txn_id}
        )

    @classmethod
    def from_json(cls, text: str) -> Mark:
        data = property_value(PROPERTY, text, _VERSION)
        return cls(tuple(data["order"]), int(data.get("ts_ms") or 0), data.get("txn_id"))  # type: ignore[arg-type]


def batch_marks(parsed: DataFrame, topics: set[str]) -> dict[str, list[Mark]]:
    """Per topic among `topics`, its truncates in the parsed batch, oldest first (one small
    aggregation: truncates are rare, and the filter comes first)."""
    if not topics:
        return {}
    mark = F.struct("p_epoch", "p_rank", "p_total_order", "p_ts_ms", "p_txn_id")
    rows = (
        parsed.where((F.col("p_op") == "t") & F.col("topic").isin(*sorted(topics)))
        .groupBy("topic")
        .agg(F.collect_set(mark).alias("marks"))
        .collect()
    )
    return {r.topic: sorted(Mark((m[0], m[1], m[2]), m[3] or 0, m[4]) for m in r.marks) for r in rows}


def stored_mark(properties: dict[str, str]) -> Mark | None:
    """The table's truncation mark (`delta_apply.stored_properties`), None when it was
    never truncated."""
    value = properties.get(PROPERTY)
    return Mark.from_json(value) if value is not None else None


def keep_mark(spark: SparkSession, path: str, mark: Mark) -> None:
    set_property(spark, path, PROPERTY, mark.to_json())


def older(mark: Mark) -> Column:
    """Rows (with the order key columns) older than `mark`."""
    (e, r, o), (me, mr, mo) = ORDER_KEY, mark.order
    return (
        (F.col(e) < me)
        | ((F.col(e) == me) & (F.col(r) < mr))
        | ((F.col(e) == me) & (F.col(r) == mr) & (F.col(o) < mo))
    )


def _ended_as(mark: Mark) -> dict[str, Column]:
    """The bookkeeping of a row the truncate ends."""
    e, r, o = ORDER_KEY
    return {
        e: F.lit(mark.order[0]).cast(T.LongType()),
        r: F.lit(mark.order[1]).cast(T.LongType()),
        o: F.lit(mark.order[2]).cast(T.LongType()),
        "_cdc_op": F.lit("t"),
        "_cdc_source_ts": F.timestamp_millis(F.lit(mark.ts_ms)),
        "_cdc_txn_id": F.lit(mark.txn_id).cast(T.StringType()),
        "_cdc_deleted": F.lit(True),
    }


def end_stored(spark: SparkSession, path: str, mark: Mark, scd2: bool) -> None:
    """End the rows of the table at `path` older than `mark`; repeated, it changes nothing
    (the rows it ended are no longer live)."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    if not scd2:
        table.update(~F.col("_cdc_deleted") & older(mark), _ended_as(mark))
        return
    current = spark.read.format("delta").load(path).where(F.col(CURRENT) & older(mark))
    # Each current version is matched by every value it holds (its key among them: no key
    # is named here) and closed at the mark; its delete version at the mark is inserted.
    compared = [f.name for f in current.schema.fields if not isinstance(f.dataType, T.VariantType)]
    closing = current.withColumn("_cdc_role", F.lit("close"))
    deleting = current.withColumns(
        {**_ended_as(mark), **{c: F.lit(None).cast(T.LongType()) for c in END}, CURRENT: F.lit(False)}
    ).withColumn("_cdc_role", F.lit("delete"))
    same = " AND ".join(f"t.{quoted(c)} <=> s.{quoted(c)}" for c in compared)
    (
        table.alias("t")
        .merge(closing.unionByName(deleting).alias("s"), f"s._cdc_role = 'close' AND {same}")
        .whenMatchedUpdate(
            set={**{c: F.lit(v) for c, v in zip(END, mark.order, strict=True)}, CURRENT: F.lit(False)}
        )
        .whenNotMatchedInsert(
            condition="s._cdc_role = 'delete'",
            values={c: f"s.{quoted(c)}" for c in current.columns},
        )
        .execute()
    )


def with_ends(
    rows: DataFrame, marks: list[Mark], keys: tuple[str, ...], stored: DataFrame | None = None
) -> DataFrame:
    """The batch's rows and, per key, the delete at each mark (oldest first) that ends it:
    at the first mark after the key's newest change before it, unless that change was a
    delete. `stored`: the table's live rows, ended with the batch's own when a truncate is
    new to the table. A latest-row MERGE keeps each key's newest; SCD2 keeps every version,
    so a replay of several truncates in one batch ends each version where the source did."""
    base = rows
    if stored is not None:
        base = rows.unionByName(
            stored.select(*[column(c) for c in rows.columns if c in stored.columns]), allowMissingColumns=True
        )
    out, lower = rows, None
    for mark in marks:
        between = older(mark) if lower is None else older(mark) & ~older(lower)
        last = newest_per_key(base.where(between), keys).where(~F.col("_cdc_deleted"))
        out = out.unionByName(last.withColumns(_ended_as(mark)).select(*[column(c) for c in rows.columns]))
        lower = mark
    return out
