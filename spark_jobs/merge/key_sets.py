"""A table whose primary key changed within a batch: its rows cut where the key changes.

`ALTER TABLE ... DROP PRIMARY KEY, ADD PRIMARY KEY (...)` changes the key of every later
event of the table (each is written with the new key schema) while its value schema may
stay as it was, so the key sets of a batch are counted from the record keys
(`census.census`), not from the value schemas. Events under different keys cannot be
deduplicated or MERGEd by one of them: keyed by the old key `(id)`, an insert of
`(id, a) = (1, 5)` and a delete of `(1, 1)` under the new key `(id, a)` are one key, and
one of them is lost. So the rows are cut into segments at each change of key, by order
key, and each segment lands by its own key, oldest first (`landing.land`). Rows without a
key (a keyless table that gains one) go with the segment their order key falls in.

Checking every record's key costs one short string cut per record in the census; the
per-row key set (`key_set_index`) is worked out only for tables whose batch holds more
than one.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

KEY_SET = "_cdc_key_set"  # a row's key set: its index in the table's key sets
WITH_SCHEMA = '{"schema":{'  # a Connect key's first bytes: its schema comes first
PAYLOAD_CUT = ',"payload":'
# A record key's head (`census.key_head`) as its index among the heads the parse was
# given (`records.parse`): a key the parse leaves out (its source gives it again) is
# known by it.
KEY_HEAD = "key_head"


def key_shape(key: Column) -> Column:
    """The record key without its values, as JSON text `changes.key_columns` reads like
    the key itself: one text per key schema (the Connect key as the streamer and Kafka
    Connect's converter write it: its schema, then its payload), or the list of the key's
    fields (any other key). Null for a record without a key."""
    schema_first = key.startswith(WITH_SCHEMA) & (F.instr(key, PAYLOAD_CUT) > 0)
    return F.when(
        schema_first, F.concat(F.substring_index(key, PAYLOAD_CUT, 1), F.lit(head_shape("")))
    ).otherwise(F.to_json(F.json_object_keys(_payload(key))))


def _payload(key: Column) -> Column:
    """The key's values: its payload when it carries its schema, else the key itself."""
    enveloped = (
        F.get_json_object(key, "$.schema").isNotNull() & F.get_json_object(key, "$.payload").isNotNull()
    )
    return F.when(enveloped, F.get_json_object(key, "$.payload")).otherwise(key)


def head_shape(head: str) -> str:
    """The shape (`key_shape`) of every key that starts with `head` (`census.key_head`)."""
    return head + PAYLOAD_CUT + "{}}"


def head_index(key: Column, heads: Sequence[str]) -> Column:
    """Which of `heads` (`census.key_head`: a key schema's text before its payload) a
    record key starts with, told by comparing bytes; null: none."""
    index = F.lit(None).cast(T.IntegerType())
    for n, text in reversed(list(enumerate(heads))):
        index = F.when(key.startswith(text + PAYLOAD_CUT), F.lit(n)).otherwise(index)
    return index


def distinct_sets(found: Sequence[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """The key sets among `found`, each once (a key's column order does not change what
    it matches), in the order first seen."""
    out: list[tuple[str, ...]] = []
    for keys in found:
        if keys and all(set(keys) != set(k) for k in out):
            out.append(keys)
    return tuple(out)


def index_of(keys: tuple[str, ...], sets: Sequence[tuple[str, ...]]) -> int | None:
    return next((n for n, k in enumerate(sets) if set(k) == set(keys)), None)


def key_set_index(
    key: Column,
    sets: Sequence[tuple[str, ...]],
    head: Column | None = None,
    head_sets: Sequence[int | None] = (),
) -> Column:
    """Which of `sets` a record key's fields are (null: none, or no key). A record whose
    key the parse left out (`records.KEY_HEAD`) has the one its `head` names: the
    `head_sets[n]`th for head n."""
    fields = F.array_sort(F.json_object_keys(_payload(key)))
    index = F.lit(None).cast(T.IntegerType())
    for n, keys in reversed(list(enumerate(sets))):
        index = F.when(fields == F.array(*[F.lit(c) for c in sorted(keys)]), F.lit(n)).otherwise(index)
    if head is None:
        return index
    for n, found in enumerate(head_sets):
        index = F.when(head == n, F.lit(found).cast(T.IntegerType())).otherwise(index)
    return index
