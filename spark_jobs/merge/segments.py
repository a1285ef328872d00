"""A table's batch cut where its key changes (`key_sets`), each part landed by its own key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark_jobs.merge.changes import ORDER_KEY, TableChanges
from spark_jobs.merge.key_sets import KEY_SET, index_of
from spark_jobs.sql_names import columns

OrderKey = tuple[int, int, int]


@dataclass(frozen=True)
class Segment:
    """Rows of one table's batch under one key, and the order key of the first of them
    (None: not worked out, the batch has one key)."""

    keys: tuple[str, ...]
    rows: DataFrame
    start: OrderKey | None = None


def _order() -> Column:
    return F.struct(*[F.col(c) for c in ORDER_KEY])


def _at(order: OrderKey) -> Column:
    return F.struct(*[F.lit(v).cast(T.LongType()).alias(c) for c, v in zip(ORDER_KEY, order, strict=True)])


def segments(rows: DataFrame, sets: Sequence[tuple[str, ...]]) -> list[Segment]:
    """`rows` (with `KEY_SET`) cut where their key set changes, oldest first, without
    `KEY_SET`. One small aggregation when each key's rows follow the previous key's (a key
    changed, perhaps more than once); when they interleave (a key changed and changed
    back), the change points by one pass in order key order."""
    keyed = rows.where(F.col(KEY_SET).isNotNull())
    spans = sorted(
        (
            (tuple(r.lo), tuple(r.hi), r[KEY_SET])
            for r in keyed.groupBy(KEY_SET)
            .agg(F.min(_order()).alias("lo"), F.max(_order()).alias("hi"))
            .collect()
        ),
        key=lambda s: s[0],
    )
    if all(a[1] < b[0] for a, b in pairwise(spans)):
        starts = [(lo, index) for lo, _, index in spans]
    else:
        by_order = Window.orderBy(*columns(ORDER_KEY))
        changed = keyed.select(KEY_SET, *columns(ORDER_KEY), F.lag(KEY_SET).over(by_order).alias("_previous"))
        points = changed.where(F.col("_previous").isNull() | (F.col("_previous") != F.col(KEY_SET))).collect()
        starts = sorted((tuple(r[c] for c in ORDER_KEY), r[KEY_SET]) for r in points)
    out = []
    for n, (start, index) in enumerate(starts):
        these = F.lit(True) if n == 0 else _order() >= _at(start)
        if n + 1 < len(starts):
            these = these & (_order() < _at(starts[n + 1][0]))
        out.append(Segment(tuple(sets[index]), rows.where(these).drop(KEY_SET), start))  # type: ignore[arg-type]
    return out


def first_order(rows: DataFrame) -> OrderKey | None:
    """The order key of the oldest of `rows` (None: no rows)."""
    found = rows.select(F.min(_order()).alias("lo")).first()
    return tuple(found.lo) if found is not None and found.lo is not None else None  # type: ignore[return-value]


def with_windows(
    changes: TableChanges | None, windows: DataFrame, window_keys: tuple[str, ...]
) -> tuple[DataFrame, tuple[tuple[str, ...], ...]]:
    """A table's change rows (if any) and its released snapshot rows (read under
    `window_keys`) together, and the key sets when they are more than one."""
    if changes is None:
        return windows, ()
    rows, keys, sets = changes.rows, changes.key_columns, changes.key_sets
    if not sets and (not keys or set(keys) == set(window_keys)):
        return rows.unionByName(windows, allowMissingColumns=True), ()
    if not sets:
        sets, rows = (keys,), rows.withColumn(KEY_SET, F.lit(0))
    index = index_of(window_keys, sets)
    if index is None:
        sets, index = (*sets, window_keys), len(sets)
    return rows.unionByName(windows.withColumn(KEY_SET, F.lit(index)), allowMissingColumns=True), sets
