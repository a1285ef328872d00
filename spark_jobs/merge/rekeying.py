"""The key a latest-row table is MERGEd by, kept with the table, and what a new key takes.

The stored rows were MERGEd by the table's key, so each is alone under it, and tombstones
(`_cdc_deleted`) stay beside the live rows. Under a new primary key that is not wider than
the old one, a stored live row and the tombstones of other rows can share a key: after
`(id, a)` became `(a)`, the live `(1, 1)` and the tombstone of the deleted `(2, 1)` both
have `a = 1`, and a MERGE by `a` would update both, bringing the deleted row back as a
second live copy. So before the first MERGE by a new key, the stored rows it matches more
than once are cut to one: the live row (the source took the new key only if its live rows
were unique under it), else the newest tombstone. A wider key (`(id)` to `(id, a)`) needs
nothing: rows alone under the old key are alone under it too.

The key is a table property (`tidemark.key`, versioned JSON) with the order key from which
it holds, written only when it changes. Rows older than that (a batch replayed after a
crash, a transaction held back across the change) are MERGEd by the key they were written
with, guarded by order key as always, but a delete of a key the table lacks inserts no
tombstone: it would be one of the rows the cut removed, back beside the row that stayed,
and a later MERGE by another key would match both. A table merged before the key was kept
gets the key of its next batch, taken as unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from spark_jobs.merge.changes import ORDER_KEY
from spark_jobs.merge.delta_apply import property_value, set_property
from spark_jobs.sql_names import columns, quoted

PROPERTY = "tidemark.key"
_VERSION = 1


@dataclass(frozen=True)
class TableKey:
    columns: tuple[str, ...]
    since: tuple[int, ...] | None = None  # the order key it holds from; None: the table's first rows

    def same(self, keys: tuple[str, ...]) -> bool:
        return set(self.columns) == set(keys)

    def to_json(self) -> str:
        since = list(self.since) if self.since is not None else None
        return json.dumps({"version": _VERSION, "columns": list(self.columns), "since": since})

    @classmethod
    def from_json(cls, text: str) -> TableKey:
        data = property_value(PROPERTY, text, _VERSION)
        since = data.get("since")
        return cls(tuple(data["columns"]), tuple(since) if since is not None else None)


def stored_key(properties: dict[str, str]) -> TableKey | None:
    """The table's key (None: a new table, or one merged before keys were kept)."""
    text = properties.get(PROPERTY)
    return TableKey.from_json(text) if text is not None else None


def keep(spark: SparkSession, path: str, key: TableKey) -> None:
    set_property(spark, path, PROPERTY, key.to_json())


def single_under(spark: SparkSession, path: str, old: tuple[str, ...], new: tuple[str, ...]) -> int:
    """Cut the table's rows that share a `new` key to one each (the live row, else the
    newest tombstone); returns how many went. `old`: the key the rows were MERGEd by."""
    if set(old) <= set(new):
        return 0
    from delta.tables import DeltaTable

    stored = spark.read.format("delta").load(path)
    if any(c not in stored.columns for c in new):
        return 0  # a key column the rows lack is null in each: no MERGE by it matches them
    identity = [c for c in dict.fromkeys((*old, *ORDER_KEY)) if c in stored.columns]
    ranked = Window.partitionBy(*columns(new)).orderBy(
        F.col("_cdc_deleted").asc(), *[F.col(c).desc() for c in ORDER_KEY]
    )
    doomed = (
        stored.select(*columns(identity), F.row_number().over(ranked).alias("_n"))
        .where(F.col("_n") > 1)
        .drop("_n")
        .distinct()
        .persist()
    )
    try:
        count = doomed.count()
        if count:
            on = " AND ".join(f"t.{quoted(c)} <=> s.{quoted(c)}" for c in identity)
            DeltaTable.forPath(spark, path).alias("t").merge(
                doomed.alias("s"), on
            ).whenMatchedDelete().execute()
        return count
    finally:
        doomed.unpersist()
