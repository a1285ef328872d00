"""The census's proof that a batch holds whole transactions (spark_jobs/merge/transaction_fingerprint.py)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.support.events import event, row, transaction

pytestmark = pytest.mark.integration

PREFIX = "tm"
_TABLES = ("shop.a", "shop.b")


def _batch(rng: random.Random, transactions: int) -> list[tuple]:
    """Records as the parse flattens them (`topic, present, p_total_order, p_txn_id,
    p_status, p_id, p_data_collections`): complete transactions of 1..6 events over two
    tables, each with its BEGIN and END."""
    records = []
    for t in range(transactions):
        txn, counts = f"0-1-{t}", Counter(rng.choice(_TABLES) for _ in range(rng.randint(1, 6)))
        records.append((f"{PREFIX}.transaction", True, None, None, "BEGIN", txn, None))
        n = 0
        for table, count in counts.items():
            for _ in range(count):
                n += 1
                records.append((f"{PREFIX}.{table}", True, n, txn, None, None, None))
        ends = [(table, count) for table, count in counts.items()]
        records.append((f"{PREFIX}.transaction", True, None, None, "END", txn, ends))
    return records


def _changed(rng: random.Random, records: list[tuple]) -> tuple[str, list[tuple]]:
    """One of the ways a batch differs from whole transactions, or stays whole."""
    events = [i for i, r in enumerate(records) if r[2] is not None]
    ends = [i for i, r in enumerate(records) if r[4] == "END"]
    out = list(records)
    kind = rng.choice(
        ["as is", "event missing", "event twice", "END missing", "END twice", "count more", "count less",
         "number past the END", "numbers swapped across", "standalone", "no transaction", "tombstone",
         "END without id", "large", "large, one missing", "many tables", "many tables, one missing", "count below 0", "twice and missing"]
    )  # fmt: skip
    if kind == "event missing":
        del out[rng.choice(events)]
    elif kind == "event twice":
        out.append(out[rng.choice(events)])
    elif kind == "END missing":
        del out[rng.choice(ends)]
    elif kind == "END twice":
        out.append(out[rng.choice(ends)])
    elif kind in ("count more", "count less"):
        i = rng.choice(ends)
        (table, count), *rest = out[i][6]
        out[i] = (*out[i][:6], [(table, count + (1 if kind == "count more" else -1)), *rest])
    elif kind == "number past the END":
        r = out[rng.choice(events)]
        out.append((r[0], True, 7, r[3], None, None, None))
    elif kind == "numbers swapped across":  # one event of each of two transactions trades ids
        i, j = rng.sample(events, 2)
        out[i], out[j] = (*out[i][:3], out[j][3], *out[i][4:]), (*out[j][:3], out[i][3], *out[j][4:])
    elif kind == "standalone":  # complete by itself: no id
        out.append((f"{PREFIX}.shop.a", True, 1, None, None, None, None))
    elif kind == "no transaction":
        out.append((f"{PREFIX}.shop.a", True, None, None, None, None, None))
    elif kind == "tombstone":
        out.append((f"{PREFIX}.shop.a", False, None, None, None, None, None))
    elif kind == "END without id":
        i = rng.choice(ends)
        out[i] = (*out[i][:5], None, out[i][6])
    elif kind in ("large", "large, one missing"):  # more events than a long has bits
        big = [(f"{PREFIX}.shop.a", True, n, "0-1-big", None, None, None) for n in range(1, 301)]
        out += big[:-1] if kind == "large, one missing" else big
        out.append((f"{PREFIX}.transaction", True, None, None, "END", "0-1-big", [("shop.a", 300)]))
    elif kind in ("many tables", "many tables, one missing"):  # an END listing 20 tables
        tables = [f"shop.t{n}" for n in range(20)]
        events = [(f"{PREFIX}.{t}", True, n, "0-1-wide", None, None, None) for n, t in enumerate(tables, 1)]
        out += events[1:] if kind == "many tables, one missing" else events
        out.append((f"{PREFIX}.transaction", True, None, None, "END", "0-1-wide", [(t, 1) for t in tables]))
    elif kind == "count below 0":
        out.append((f"{PREFIX}.transaction", True, None, None, "END", "0-1-less", [("shop.a", -1)]))
    elif kind == "twice and missing":  # the count alone would match
        i, j = rng.sample(events, 2)
        out[j] = out[i]
    rng.shuffle(out)
    return kind, out


def _whole(records: list[tuple]) -> bool:
    """The rule spelt out: the events in hand that belong to a transaction are exactly
    the numbers 1..N of each END in hand, each once, and every END has an id and a count
    of at least 0."""
    events = Counter((r[3], r[2]) for r in records if r[1] and r[2] is not None and r[3] is not None)
    ends = [(r[5], sum(c for _, c in r[6])) for r in records if r[1] and r[4] == "END"]
    expected = Counter((txn, n) for txn, count in ends for n in range(1, count + 1))
    return all(txn is not None and count >= 0 for txn, count in ends) and events == expected


def test_a_batch_is_taken_as_whole_exactly_when_its_events_are_its_ends_numbers(spark):
    """200 batches, each of whole transactions or changed in one way (an event or END
    missing or twice, a count off by one, an event numbered past its END, ids traded, a
    repeat standing in for a missing event, a transaction of 300 events whole or not, one
    over many tables, changes outside any transaction): the census's figures say whole
    exactly when the rule does."""

    from spark_jobs.merge.transaction_fingerprint import figures, marks, whole

    rng = random.Random(22)
    batches = [_changed(rng, _batch(rng, rng.randint(2, 12))) for _ in range(200)]
    rows = [(n, *r) for n, (_, records) in enumerate(batches) for r in records]
    schema = (
        "batch INT, topic STRING, present BOOLEAN, p_total_order LONG, p_txn_id STRING, p_status STRING, "
        "p_id STRING, p_data_collections ARRAY<STRUCT<data_collection: STRING, event_count: LONG>>"
    )
    frame = spark.createDataFrame(rows, schema)
    # Split by topic and batch as the census groups them, then joined per batch.
    marked = frame.select("batch", "topic", *marks(PREFIX))
    per_group = marked.groupBy("batch", "topic").agg(*figures()).orderBy("batch").collect()
    found = {n: whole([r for r in per_group if r.batch == n]) for n in range(len(batches))}
    expected = {n: _whole(records) for n, (_, records) in enumerate(batches)}
    kinds = {n: kind for n, (kind, _) in enumerate(batches)}
    assert {n: (kinds[n], found[n]) for n in found} == {n: (kinds[n], expected[n]) for n in found}
    assert {kinds[n] for n in found if found[n]} >= {
        "as is",
        "standalone",
        "no transaction",
        "tombstone",
        "large",
    }
    assert not any(
        found[n] for n in found if kinds[n] in ("event missing", "END missing", "twice and missing")
    )


def test_a_whole_batch_is_merged_without_counting_its_transactions(spark, tmp_path, monkeypatch):
    """A Kafka-like batch of whole transactions is split as whole; one that ends inside a
    transaction is counted, and its open transaction held back until its END comes."""
    from spark_jobs import delta_merge
    from spark_jobs.delta_merge import apply_aligned
    from spark_jobs.merge.delta_apply import live_rows
    from spark_jobs.merge.transactions import PendingStore
    from tests.support.merge_forms import in_form

    counted = []
    exact = delta_merge.split_complete

    def split_complete(*args, **kwargs):
        counted.append(True)
        return exact(*args, **kwargs)

    monkeypatch.setattr(delta_merge, "split_complete", split_complete)
    pending = PendingStore(spark, str(tmp_path / "held"))

    def aligned(batch_id: int, records: list[dict]) -> list[tuple]:
        given = in_form(spark, records, "json", tmp_path / "forms")
        apply_aligned(
            spark, root=str(tmp_path), prefix="tm", reached={}, pending=pending, batch_id=batch_id, **given
        )
        return sorted((r.id, r.name) for r in live_rows(spark, f"{tmp_path}/shop.accounts").collect())

    table = {"shop.accounts": 2}
    whole = [
        transaction("BEGIN", 1),
        event("c", (0, 1, 1), after=row(1, "a")),
        event("c", (0, 1, 2), after=row(2, "b")),
        transaction("END", 1, table),
        event("c", (0, 2, 1), after=row(3, "c"), standalone=True),
    ]
    assert aligned(1, whole) == [(1, "a"), (2, "b"), (3, "c")]
    assert counted == []
    open_one = [transaction("BEGIN", 3), event("u", (0, 3, 1), before=row(1, "a"), after=row(1, "a3"))]
    assert aligned(2, open_one) == [(1, "a"), (2, "b"), (3, "c")]
    assert counted == [True]
    rest = [event("d", (0, 3, 2), before=row(2, "b")), transaction("END", 3, table)]
    assert aligned(3, rest) == [(1, "a3"), (3, "c")]  # with what batch 2 held: whole again
    assert counted == [True]
