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

A NOT NULL column added without a default gets MySQL's implicit one, which Debezium does
not write: the zero of its type (0, 0.0, '', false), an ENUM's first value, or for a
temporal column the zero date, which the streamer writes as the epoch in such a column.
Such a column's field schema says `optional: false` and states no default; no other
source can add one to a table with rows. (One the source fills otherwise, an
AUTO_INCREMENT or a generated column, is filled the same: neither says so in its
schema.)

Left out, as the field schema cannot state them: a temporal default of the epoch (how
CURRENT_TIMESTAMP is written), and the implicit default of a NOT NULL YEAR, bit, binary,
JSON or spatial column (a BINARY(n)'s n zero bytes, whose length the schema does not
give). A DECIMAL written as text (decimal.handling.mode=string) is a plain string to the
schema, so it gets '', not '0'.
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
            if field["field"] in found or field.get("name") == connect_types.DOCUMENT:
                continue
            if value is None:
                implicit = _implicit(field)
                if implicit is not None:
                    found[field["field"]] = implicit
                continue
            if _current_time(field, value):
                continue
            delta = connect_types.delta_value(field)(value)
            found[field["field"]] = F.lit(delta).cast(connect_types.delta_type(field))
    return found


_ZEROS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "float": 0.0,
    "double": 0.0,
    "float32": 0.0,  # (Connect's names as older streamers wrote them)
    "float64": 0.0,
    "boolean": False,
    "string": "",
}


def _implicit(field: dict[str, Any]) -> Column | None:
    """MySQL's implicit default of a NOT NULL column with none of its own, as a literal of
    its Delta type; None where it is not the zero of a plain type or an ENUM's first value."""
    if field.get("optional", True):
        return None
    name = field.get("name")
    if name == connect_types.ENUM:
        allowed = (field.get("parameters") or {}).get("allowed")
        value: Any = allowed.split(",")[0] if allowed else None
    elif name == connect_types.DECIMAL:
        value = 0
    elif name is None and field["type"] in _ZEROS:
        value = _ZEROS[field["type"]]
    elif name in _EPOCHS:  # a zero date, written as the epoch (as the streamer writes one)
        return F.lit(connect_types.delta_value(field)(_EPOCHS[name])).cast(connect_types.delta_type(field))
    else:
        return None
    return None if value is None else F.lit(value).cast(connect_types.delta_type(field))


_EPOCHS: dict[str, Any] = {
    **dict.fromkeys(
        (
            "io.debezium.time.Date",
            "io.debezium.time.Timestamp",
            "io.debezium.time.MicroTimestamp",
            "io.debezium.time.NanoTimestamp",
            "io.debezium.time.Time",
            "io.debezium.time.MicroTime",
            "io.debezium.time.NanoTime",
            "org.apache.kafka.connect.data.Date",
            "org.apache.kafka.connect.data.Time",
            "org.apache.kafka.connect.data.Timestamp",
        ),
        0,
    ),
    "io.debezium.time.ZonedTimestamp": "1970-01-01T00:00:00Z",
}


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
