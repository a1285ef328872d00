"""A column added at the source with a DEFAULT: the rows that existed before it get it.

`ALTER TABLE t ADD COLUMN c ... DEFAULT x` gives every existing row `x` at the source,
and no event says so: the binlog holds the statement, not the rows. Delta adds `c` from
the first event that carries it, so every row last written before the ALTER held NULL
where the source holds `x` until its next change (a probe on MariaDB showed it). The
default is in the column's field schema (`default`, as Debezium writes it), so:

- rows already in Delta, when a batch brings the column to a table that lacks it, get
  it in one commit of their own before the batch's MERGE (a crash between the two
  finds the column there on the replay, filled);
- rows of the same batch read with a schema from before the column (events older than
  every event that carries it) get it as they are typed.

A default the field schema cannot state is left out: a column without one (MySQL's
implicit default of a NOT NULL column, which Debezium does not write either) and a
temporal default of the epoch, which is how CURRENT_TIMESTAMP is written.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.merge import connect_types
from spark_jobs.merge.records import Shape, row_fields

_EPOCH_DEFAULTS = (0, "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z")


def defaults(shapes: list[Shape]) -> dict[str, Column]:
    """Each column of `shapes` with a default the events state, as a literal of its Delta
    type."""
    found: dict[str, Column] = {}
    for shape in shapes:
        if shape.schema is None:
            continue
        for field in row_fields(shape.schema):
            value = field.get("default")
            if value is None or field["field"] in found or _current_time(field, value):
                continue
            if field.get("name") == connect_types.DOCUMENT:
                continue
            delta = connect_types.delta_value(field)(value)
            found[field["field"]] = F.lit(delta).cast(connect_types.delta_type(field))
    return found


def _current_time(field: dict[str, Any], value: Any) -> bool:
    name = field.get("name") or ""
    return ("time" in name.lower() or "date" in name.lower()) and value in _EPOCH_DEFAULTS


def older_shapes(parsed: DataFrame, topic: str, shapes: list[Shape]) -> dict[int, dict[str, Column]]:
    """For each shape of a batch without a defaulted column that a later shape has, the
    columns to give its rows. Shapes that differ are rare (a DDL inside the batch), so
    the one aggregation this takes is run only then."""
    stated = defaults(shapes)
    columns = {
        s.schema_id: {f["field"] for f in row_fields(s.schema)} for s in shapes if s.schema is not None
    }
    lacking = {sid: [c for c in stated if c not in have] for sid, have in columns.items()}
    if not any(lacking.values()):
        return {}
    order = F.struct("p_epoch", "p_rank", "p_total_order")
    spans = {
        r["schema_id"]: (tuple(r["first"]), tuple(r["last"]))
        for r in parsed.where(F.col("topic") == topic)
        .groupBy("schema_id")
        .agg(F.min(order).alias("first"), F.max(order).alias("last"))
        .collect()
    }
    fills: dict[int, dict[str, Column]] = {}
    for sid, missing in lacking.items():
        for c in missing:
            carrying = [spans[s][0] for s, have in columns.items() if c in have and s in spans]
            if sid in spans and carrying and spans[sid][1] < min(carrying):
                fills.setdefault(sid, {})[c] = stated[c]
    return fills


def stored_fills(
    stored: T.StructType | None, incoming: T.StructType, shapes: list[Shape]
) -> dict[str, Column]:
    """The defaulted columns a batch brings to a Delta table that lacks them."""
    if stored is None:
        return {}
    have = {f.name for f in stored.fields}
    return {c: v for c, v in defaults(shapes).items() if c not in have and c in incoming.fieldNames()}


def fill_stored(session: SparkSession, path: str, fills: dict[str, Column]) -> None:
    """The columns added to the Delta table with their defaults in every row, in one
    commit (the table's layout and properties stay)."""
    table = session.read.format("delta").load(path)
    for name, value in fills.items():
        table = table.withColumn(name, value)
    table.write.format("delta").mode("overwrite").option("mergeSchema", "true").save(path)
