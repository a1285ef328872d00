"""A batch of records parsed once, and the topics a merge reads (`spark_jobs.delta_merge`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdc_core.transactions import TRANSACTION_VALUE_SCHEMA
from spark_jobs.merge.census import (
    Orders,
    Reached,
    check_recognised,
    joined_census,
    joined_orders,
    key_head,
    tally,
)
from spark_jobs.merge.cutting import cut, cut_known
from spark_jobs.merge.known_schemas import KnownSchemas
from spark_jobs.merge.records import POSITION, Shapes, carried, collect_shapes, parse
from spark_jobs.merge.typed_records import TypedPart, typed_batch
from spark_jobs.session import session_settings

log = logging.getLogger("spark_jobs.delta_merge")

# The parsed batch lives for one batch and is read a few times: compressing its cached
# columns cost more than it saved (1,000,000 events: about 2.5 s of a 31 s batch, measured
# in `python -m bench merge`), at the price of more memory or spill while it is held.
_COMPRESSED = "spark.sql.inMemoryColumnarStorage.compressed"


def data_topics(prefix: str) -> str:
    """The regex of the topics the merge reads: the connector's per-table topics, its
    snapshot release records and its transaction BEGIN/END records (not the schema-change
    topic named after the prefix itself, nor its one-part neighbours such as the schema
    references' `<prefix>.schemas`). A table topic has a database and a table, either of
    which may hold dots (a quoted MySQL name may)."""
    return rf"{re.escape(prefix)}\.([^.]+\..+|snapshot_releases|transaction)"


def boundary_topics(prefix: str) -> set[str]:
    """The topics whose records carry no row: transaction BEGIN/END and snapshot releases."""
    return {f"{prefix}.transaction", f"{prefix}.snapshot_releases"}


@contextmanager
def parsed_batch(
    records: DataFrame,
    prefix: str,
    known: KnownSchemas | None = None,
    patch_field: str | None = None,
    typed: Sequence[TypedPart] = (),
    fingerprint: bool = False,
) -> Iterator[tuple[DataFrame, Shapes]]:
    """The batch parsed once (`spark_jobs.merge.records`) and kept for the merge's passes.

    Records whose schema is known (`known`: from earlier batches of the run and a sample
    of this one) are cut by prefix and parsed in one pass. The others, if any, are cut by
    searching, their schemas collected, then parsed (cut again the slow way if the fast
    search cut wrong). Schemaless values that name their schema by reference
    (`known.references`) are cut as if they carried it. Records that are not JSON events
    fail the batch before anything is merged. `patch_field`: a document source's change-only field (`DocumentPatches`).
    `typed`: parts of the batch read from the Parquet event log's typed files, which need
    no parsing (`spark_jobs.merge.typed_records`), joined to the rest. `fingerprint`: the
    census also tells whether every transaction in hand is complete (`Shapes.whole`), for
    a batch to align."""
    known = known if known is not None else KnownSchemas()
    spark = records.sparkSession
    known.expect(f"{prefix}.transaction", TRANSACTION_VALUE_SCHEMA)
    texts_in_batch = known.sample(records)
    not_rows = boundary_topics(prefix)
    first = known.shapes(spark, not_rows)
    pairs = known.pairs()
    by_reference = {d: pairs.index(pair) for d, pair in known.references.items() if pair in pairs}
    texts = {d: text for d, (_, text) in known.references.items()}
    cached: list[DataFrame] = []
    with session_settings(spark, {_COMPRESSED: "false"}):
        try:
            if typed and not texts_in_batch:  # the Parquet log's typed files only: nothing to parse
                parsed, shapes, figures = typed_batch(list(typed), not_rows, Shapes())
                check_recognised(parsed, figures.census)
                known.learn(shapes)
                counted = shapes.counted(figures.census)
                yield parsed, replace(counted, orders=figures.orders, truncating=figures.truncating)
                return
            parsed, counts = None, {}
            told = prefix if fingerprint else None
            position = POSITION if all(c in records.columns for c in POSITION) else ()
            reached: Reached | None = None
            heads = sorted({h for h in (key_head(s.key) for s in first.all()) if h is not None})
            orders: Orders | None = None
            truncating: frozenset[str] | None = None
            whole: bool | None = None
            if pairs:
                parsed = parse(cut_known(records, pairs, by_reference), first, patch_field, heads).persist()
                cached.append(parsed)
                counts, orders, truncating, reached, whole = tally(parsed, heads, position, told)
            shapes = first.only(set(counts))
            uncut = {topic for topic, schema_id in counts if schema_id is None}
            if parsed is None or uncut:
                log.info("schemas not known yet on %s: cut by search", sorted(uncut) or "every topic")
                # The records `cut_known` left are in the cache with their value as payload.
                rest_records = (
                    records
                    if parsed is None
                    else parsed.where(F.col("schema_id").isNull() & F.col("payload").isNotNull()).select(
                        "topic", "key", *carried(parsed), F.col("payload").alias("value")
                    )
                )
                for fast in (True, False):
                    cuts = cut(rest_records, fast, texts).persist()
                    more = collect_shapes(cuts, fast, not_rows).adopting(shapes)
                    if not more.cut_wrong:
                        break
                    cuts.unpersist()
                rest = parse(cuts, more, patch_field, heads).persist()
                cached.append(rest)
                rest.count()  # built from `cuts` before they go
                cuts.unpersist()
                if parsed is not None:
                    done = parsed.where(F.col("schema_id").isNotNull() | F.col("payload").isNull())
                    rest = done.unionByName(rest, allowMissingColumns=True)
                parsed, shapes = rest, shapes | more
                counts, orders, truncating, reached, whole = tally(parsed, heads, position, told)
            if typed:
                more_rows, more, figures = typed_batch(list(typed), not_rows, shapes)
                parsed = parsed.unionByName(more_rows, allowMissingColumns=True)
                shapes, counts = shapes | more, joined_census(counts, figures.census)
                orders = joined_orders(orders, figures.orders)
                truncating = truncating | figures.truncating if truncating is not None else None
                reached = None  # typed files carry no partition: the caller knows what it read
                whole = None  # their transactions are not in the census
            check_recognised(parsed, counts)
            known.learn(shapes)
            counted = shapes.counted(counts)
            yield (
                parsed,
                replace(
                    counted,
                    orders=orders,
                    truncating=truncating,
                    reached=reached,
                    heads=tuple(heads),
                    whole=whole,
                ),
            )
        finally:
            for frame in cached:
                frame.unpersist()
