"""A record's value cut into its Connect schema and its payload, as bytes, not parsed.

Parsing the schema S of `{"schema": S, "payload": P}` on every event would cost more than
the MERGE. `cut_known`: where S is a schema the merge has seen
(`spark_jobs.merge.known_schemas`), the value starts with `{"schema":S,"payload":`,
compared as bytes, and the payload follows. `cut`, for the others: the streamer writes
exactly `{"schema":S,"payload":P}`, and the first `,"payload":` is then the top-level key
unless S itself holds an object key "payload" — in which case the cut-off S is not valid
JSON, which `records.collect_shapes` notices, so the batch is cut again the slow way
(`cut(records, fast=False)`: a JSON parse per record). A value in any other form (other
spacing or key order, or no schema) takes the slow way per record. Each record keeps its
schema's hash (`schema_id`) and its payload text; `value_text` puts a held-back record's
value together again, byte for byte. A schemaless value that names its schema by
reference (`REFERENCE`, see `cdc_core.pipeline.schema_references`) is its payload whole,
with the schema its reference names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.merge.records import REFERENCE, carried

OPEN, CUT = '{"schema":', ',"payload":'  # a value in the streamer's form: OPEN schema CUT payload }
_WRAPPED = "schema STRING, payload STRING"


def _head() -> Column:
    """`{"schema":S` of a value in the streamer's form (a byte search, no parse), else null."""
    value = F.col("value")
    head = F.substring_index(value, CUT, 1)
    shaped = value.startswith(OPEN) & value.endswith("}")
    return F.when(shaped & (F.octet_length(head) < F.octet_length(value)), head)


def _known_index(known: Sequence[tuple[str, str]]) -> Column:
    """The index in `known` of the (topic, schema) whose exact prefix the value has."""
    if not known:
        return F.lit(None).cast("int")
    value = F.col("value")
    index = None
    for i, (topic, text) in enumerate(known):
        this = (F.col("topic") == topic) & value.startswith(OPEN + text + CUT)
        index = F.when(this, F.lit(i)) if index is None else index.when(this, F.lit(i))
    assert index is not None
    return F.when(value.endswith("}"), index)


def _referenced(records: DataFrame, choices: Mapping[str, object]) -> Column:
    """Per record, what `choices` holds for the schema reference it carries, else null."""
    if not choices or REFERENCE not in records.columns:
        return F.lit(None)
    found = None
    for digest, choice in choices.items():
        this = F.col(REFERENCE) == digest
        found = F.when(this, F.lit(choice)) if found is None else found.when(this, F.lit(choice))
    assert found is not None
    return found


def bytes_between(start: str, length: str) -> Column:
    """The value's bytes from the (1-based) byte `start`, `length` of them, as text: a
    string's substring counts characters, walking the schema's bytes one by one."""
    return F.expr(f"CAST(substring(CAST(value AS BINARY), {start}, {length}) AS STRING)")


def cut(records: DataFrame, fast: bool = True, references: Mapping[str, str] | None = None) -> DataFrame:
    """`topic, key, schema, schema_id, payload` per record of `topic, key, value`
    (`payload` null for a tombstone), the schema found by searching (`_head`) or named by
    reference (`references`: digest → schema text); the records' `POSITION` columns pass
    through."""
    # Each step is a projection of its own, so the head and the wrapper are found once per
    # record; the wrapper is parsed only for records the search does not take.
    head = _head() if fast else F.lit(None).cast("string")
    position = carried(records)
    named = _referenced(records, references or {}).cast("string")
    headed = records.select(
        "topic", "key", *position, "value", F.when(named.isNull(), head).alias("_head"), named.alias("_named")
    )
    wrapped = F.when(F.col("_head").isNull() & F.col("_named").isNull(), F.from_json("value", _WRAPPED))
    parsed = headed.select("*", wrapped.alias("_wrapped"))
    fast_cut = F.col("_head").isNotNull()
    schema = bytes_between(f"{len(OPEN) + 1}", f"octet_length(_head) - {len(OPEN)}")
    # The payload is cut by byte offsets on the binary form, as above.
    start = f"octet_length(_head) + {len(CUT) + 1}"
    rest = bytes_between(start, f"octet_length(value) - ({start})")
    slow_payload = F.coalesce(F.col("_wrapped.payload"), F.col("value"))
    by_name = F.col("_named").isNotNull() & F.col("value").isNotNull()
    texts = parsed.select(
        "topic",
        "key",
        *position,
        F.when(by_name, F.col("_named"))
        .when(fast_cut, schema)
        .otherwise(F.col("_wrapped.schema"))
        .alias("schema"),
        F.when(by_name, F.col("value")).when(fast_cut, rest).otherwise(slow_payload).alias("payload"),
    )
    return texts.select(
        "topic", "key", *position, "schema", F.xxhash64("schema").alias("schema_id"), "payload"
    )


def cut_known(
    records: DataFrame, known: Sequence[tuple[str, str]], references: Mapping[str, int] | None = None
) -> DataFrame:
    """`cut`'s columns for records whose (topic, schema text) is one of `known`, with the
    id `cut` would give it, in one projection with no search; `schema` is null. A record
    naming its schema by reference takes the index `references` gives its digest (into
    `known`), and its value whole as payload. Other records keep their value as `payload`
    with a null `schema_id`, for `cut`."""
    offsets = F.array(*[F.lit(len((OPEN + text + CUT).encode())) for _, text in known])
    ids = F.array(*[F.xxhash64(F.lit(text)) for _, text in known])  # folded to constants
    # `when`: Spark 4.2 folds element_at of a one-element literal array to the element,
    # even for a null index.
    k = F.col("_k")
    position = carried(records)
    named = _referenced(records, references or {}).cast("int")
    index = F.coalesce(named, _known_index(known))
    matched = records.select(
        "topic", "key", *position, "value", index.alias("_k"), named.isNotNull().alias("_named")
    ).select("*", F.when(k.isNotNull(), F.element_at(offsets, k + 1)).alias("_offset"))
    by_prefix = bytes_between("_offset + 1", "octet_length(value) - _offset - 1")
    whole = F.col("_named") & F.col("value").isNotNull()
    return matched.select(
        "topic",
        "key",
        *position,
        F.lit(None).cast("string").alias("schema"),
        F.when(k.isNotNull() & F.col("value").isNotNull(), F.element_at(ids, k + 1)).alias("schema_id"),
        F.when(whole, F.col("value"))
        .when(k.isNotNull(), by_prefix)
        .otherwise(F.col("value"))
        .alias("payload"),
    )


def value_text(schemas: dict[int, str]) -> Column:
    """The record's value again from `schema_id` and `payload` (for records held back),
    with `schemas` mapping each schema id of the batch to its text."""
    schema = F.lit(None).cast("string")
    for schema_id, text in schemas.items():
        schema = F.when(F.col("schema_id") == F.lit(schema_id), F.lit(text)).otherwise(schema)
    wrapped = F.concat(F.lit(OPEN), schema, F.lit(CUT), F.col("payload"), F.lit("}"))
    return F.when(schema.isNotNull(), wrapped).otherwise(F.col("payload"))
