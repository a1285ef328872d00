"""Documents rebuilt for update events that carry their change alone.

A document source's update may hold no document, only what it changed (MongoDB's
`updateDescription` in `capture.mode: change_streams`, or an update whose lookup found
the document gone). Keeping the stored document would lose the change, so before the
MERGE each such event gets the document as it was after it: per key, the stored row
(unless it is a tombstone or newer than the batch) and the batch's events in order-key
order, each whole document taken as it is, each change applied to the document before
it by the connector's `DocumentPatches.apply`. Only keys with such an event are read
back from the table. An event older than the stored row is left as it is: the MERGE's
order-key guard drops it anyway.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from cdc_core.connector import DocumentPatches
from spark_jobs.merge.changes import ORDER_KEY, PATCH
from spark_jobs.sql_names import column, columns

_STORED, _STORED_DELETED = "stored", "stored-deleted"  # the stored row's place in a key's history
_STEP = T.StructType(
    [*(T.StructField(c, T.LongType()) for c in ORDER_KEY), T.StructField("document", T.StringType())]
)


def rebuilt(
    spark: SparkSession,
    rows: DataFrame,
    keys: tuple[str, ...],
    document: str,
    stored: DataFrame | None,
    patches: DocumentPatches,
) -> DataFrame:
    """`rows` without `PATCH`, each change-only event's `document` rebuilt; `stored`: the
    table as it is (None before it exists)."""
    pending = rows.where(F.col(PATCH).isNotNull() & column(document).isNull())
    if pending.isEmpty():
        return rows.drop(PATCH)
    touched = pending.select(*columns(keys)).distinct()
    steps = rows.join(touched, list(keys), "left_semi").select(
        *columns(keys), *ORDER_KEY, "_cdc_op", column(document).alias("_doc"), PATCH
    )
    if stored is not None:
        before = stored.join(touched, list(keys), "left_semi").select(
            *columns(keys),
            *ORDER_KEY,
            F.when(F.col("_cdc_deleted"), F.lit(_STORED_DELETED)).otherwise(F.lit(_STORED)).alias("_cdc_op"),
            column(document).alias("_doc"),
            F.lit(None).cast("string").alias(PATCH),
        )
        steps = steps.unionByName(before)
    # a plain UDF (rows, not Arrow batches), said outright: pyspark's inference from the
    # fold's type hints fails and warns before it comes to the same choice
    fold = F.udf(_folder(patches.apply), T.ArrayType(_STEP), useArrow=False)
    history = F.collect_list(F.struct(*ORDER_KEY, "_cdc_op", "_doc", PATCH))
    folded = (
        steps.groupBy(*columns(keys))
        .agg(fold(history).alias("_steps"))
        .select(*columns(keys), F.explode("_steps").alias("_s"))
        .select(
            *columns(keys),
            *[F.col(f"_s.{c}").alias(c) for c in ORDER_KEY],
            F.col("_s.document").alias("_rebuilt"),
        )
    )
    joined = rows.join(folded, [*keys, *ORDER_KEY], "left")
    whole = F.coalesce(column(document), F.col("_rebuilt")).alias(document)
    return joined.select(*[whole if c == document else column(c) for c in rows.columns if c != PATCH])


def _folder(apply: Any) -> Any:
    """The fold of one key's history (a UDF): the rebuilt document of each change-only
    event newer than the stored row."""

    def fold(history: list[Any]) -> list[tuple[Any, ...]]:
        def order(step: Any) -> tuple[int, ...]:
            return tuple(step[c] for c in ORDER_KEY)

        stored = [s for s in history if s["_cdc_op"] in (_STORED, _STORED_DELETED)]
        since = order(stored[0]) if stored else None
        events = sorted((s for s in history if s["_cdc_op"] not in (_STORED, _STORED_DELETED)), key=order)
        document = stored[0]["_doc"] if stored and stored[0]["_cdc_op"] == _STORED else None
        out = []
        for step in events:
            if since is not None and order(step) <= since:
                continue  # in the stored row already, or older: the MERGE drops it
            if step["_cdc_op"] == "d":
                document = None
            elif step["_doc"] is not None:
                document = step["_doc"]
            elif step[PATCH] is not None:
                document = apply(document, step[PATCH])
                out.append((*order(step), document))
        return out

    return fold
