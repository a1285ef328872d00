"""Change events MERGEd into Delta by order key: typed, idempotent, safe against late,
duplicate and shuffled delivery."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pytest

from tests.support.events import FIELDS, TOPIC, event, row, tombstone

pytestmark = pytest.mark.integration


def merge(spark, root, records):
    from spark_jobs.delta_merge import apply_batch

    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    apply_batch(spark, frame, str(root), "tm", {TOPIC: len(records)})


def live(spark, root):
    from spark_jobs.merge.delta_apply import live_rows

    return sorted((r.id, r.name) for r in live_rows(spark, f"{root}/shop.accounts").collect())


def test_rows_land_with_their_source_types(spark, tmp_path):
    merge(spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "ann", cents=-12345))])
    stored = spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()[0]
    assert stored.balance == decimal.Decimal("-123.45")
    assert stored.opened == dt.date(2024, 2, 29)
    assert stored.seen == dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    assert stored.tag == bytearray(b"\xca\xfe")
    assert (stored._cdc_epoch, stored._cdc_rank, stored._cdc_total_order) == (0, 1, 1)
    assert stored._cdc_op == "c" and stored._cdc_deleted is False


def test_an_older_update_after_a_delete_does_not_bring_the_row_back(spark, tmp_path):
    merge(
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "ann")), event("c", (0, 1, 2), after=row(2, "bob"))],
    )
    merge(spark, tmp_path, [event("d", (0, 5, 1), before=row(1, "ann")), tombstone(1)])
    merge(spark, tmp_path, [event("u", (0, 3, 1), before=row(1, "ann"), after=row(1, "ann-late"))])
    assert live(spark, tmp_path) == [(2, "bob")]
    # A delete of a key the table never saw still leaves a tombstone for late events to meet.
    merge(spark, tmp_path, [event("d", (0, 9, 1), before=row(3, "cy"))])
    merge(spark, tmp_path, [event("c", (0, 8, 1), after=row(3, "cy"))])
    assert live(spark, tmp_path) == [(2, "bob")]
    # A newer create after the delete does bring it back.
    merge(spark, tmp_path, [event("c", (1, 0, 1), after=row(1, "ann-again"))])
    assert live(spark, tmp_path) == [(1, "ann-again"), (2, "bob")]


def test_duplicates_and_a_replayed_batch_change_nothing(spark, tmp_path):
    batch = [
        event("c", (0, 1, 1), after=row(1, "a1")),
        event("u", (0, 2, 1), before=row(1, "a1"), after=row(1, "a2")),
        event("u", (0, 2, 1), before=row(1, "a1"), after=row(1, "a2")),  # delivered twice
        event("c", (0, 2, 2), after=row(2, "b1")),
    ]
    merge(spark, tmp_path, batch)
    first = sorted(map(tuple, spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()))
    merge(spark, tmp_path, batch)
    merge(spark, tmp_path, batch[:2])
    again = sorted(map(tuple, spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()))
    assert again == first
    assert live(spark, tmp_path) == [(1, "a2"), (2, "b1")]


def history(n_keys: int, n_events: int, seed: int) -> list[dict]:
    """A random in-order history of creates, updates and deletes over a few keys."""
    rng = random.Random(seed)
    alive: dict[int, str] = {}
    events = []
    for rank in range(1, n_events + 1):
        key = rng.randrange(n_keys)
        if key not in alive:
            alive[key] = f"v{rank}"
            events.append(event("c", (0, rank, 1), after=row(key, alive[key])))
        elif rng.random() < 0.25:
            events.append(event("d", (0, rank, 1), before=row(key, alive.pop(key))))
        else:
            events.append(event("u", (0, rank, 1), before=row(key, alive[key]), after=row(key, f"v{rank}")))
            alive[key] = f"v{rank}"
    return events, sorted(alive.items())


def test_shuffled_delivery_in_any_batching_gives_the_in_order_table(spark, tmp_path):
    events, expected = history(n_keys=12, n_events=120, seed=7)
    rng = random.Random(3)
    shuffled = events[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.sample(range(1, len(shuffled)), 3))
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        merge(spark, tmp_path, shuffled[lo:hi])
    assert live(spark, tmp_path) == expected


def test_an_added_column_appears_in_the_table(spark, tmp_path):
    from cdc_core.events.connect_schema import field

    wider = [*FIELDS, field("int32", "tier")]
    merge(spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "ann"))])
    merge(
        spark,
        tmp_path,
        [event("c", (0, 2, 1), after=row(2, "bob", extra={"tier": 3}), fields=wider),
         event("u", (0, 2, 2), before=row(1, "ann"), after=row(1, "ann", extra={"tier": 1}), fields=wider)],
    )  # fmt: skip
    rows = sorted(
        (r.id, r.tier) for r in spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()
    )
    assert rows == [(1, 1), (2, 3)]


def test_each_commit_records_the_source_offsets_it_reached(spark, tmp_path):
    import json

    from delta.tables import DeltaTable

    merge(
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "ann")), event("c", (0, 2, 1), after=row(2, "b"))],
    )
    last = DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").history(1).collect()[0]
    assert json.loads(last.userMetadata) == {"tidemark": {"topic": TOPIC, "reached": 2}}
