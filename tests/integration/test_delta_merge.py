"""Change events MERGEd into Delta by order key: typed, idempotent, safe against late,
duplicate and shuffled delivery. A test taking `form` runs with its records given in
each encoding the merge reads (JSON with schemas, the Parquet log's typed files;
tests/support/merge_forms.py says why schemaless JSON has tests of its own); the others test what no form changes (Delta layout, table creation, housekeeping)
or one form's own input (JSON spacing, text that is not JSON)."""

from __future__ import annotations

import datetime as dt
import decimal
import random
from pathlib import Path

import pytest

from tests.support.events import FIELDS, TOPIC, event, row, tombstone, truncate
from tests.support.merge_forms import FORMS, in_form, schemaless

pytestmark = pytest.mark.integration


@pytest.fixture(params=FORMS)
def form(request) -> str:
    """The form the merge reads a test's records in (tests/support/merge_forms.py)."""
    return request.param


def merge(spark, root, records, options=None):
    merge_as("json", spark, root, records, options)


def merge_as(form, spark, root, records, options=None):
    """One batch of `records` given to the merge in `form`."""
    from spark_jobs.delta_merge import apply_batch

    given = in_form(spark, records, form, Path(root).parent / f"{Path(root).name}.forms")
    apply_batch(spark, root=str(root), prefix="tm", reached={TOPIC: len(records)}, options=options, **given)


def live(spark, root):
    from spark_jobs.merge.delta_apply import live_rows

    return sorted((r.id, r.name) for r in live_rows(spark, f"{root}/shop.accounts").collect())


def merge_aligned(spark, root, pending, form, batch_id, records):
    """`apply_aligned` on `records` in `form`, as batch `batch_id` of a merge into `root`."""
    from spark_jobs.delta_merge import apply_aligned

    given = in_form(spark, records, form, root / "forms")
    apply_aligned(spark, root=str(root), prefix="tm", reached={}, pending=pending, batch_id=batch_id, **given)


def test_rows_land_with_their_source_types(spark, tmp_path, form):
    merge_as(form, spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "ann", cents=-12345))])
    stored = spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()[0]
    assert stored.balance == decimal.Decimal("-123.45")
    assert stored.opened == dt.date(2024, 2, 29)
    assert stored.seen == dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    assert stored.tag == bytearray(b"\xca\xfe")
    assert (stored._cdc_epoch, stored._cdc_rank, stored._cdc_total_order) == (0, 1, 1)
    assert stored._cdc_op == "c" and stored._cdc_deleted is False


def test_an_older_update_after_a_delete_does_not_bring_the_row_back(spark, tmp_path, form):
    merge_as(
        form,
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "ann")), event("c", (0, 1, 2), after=row(2, "bob"))],
    )
    merge_as(form, spark, tmp_path, [event("d", (0, 5, 1), before=row(1, "ann")), tombstone(1)])
    merge_as(form, spark, tmp_path, [event("u", (0, 3, 1), before=row(1, "ann"), after=row(1, "ann-late"))])
    assert live(spark, tmp_path) == [(2, "bob")]
    # A delete of a key the table never saw still leaves a tombstone for late events to meet.
    merge_as(form, spark, tmp_path, [event("d", (0, 9, 1), before=row(3, "cy"))])
    merge_as(form, spark, tmp_path, [event("c", (0, 8, 1), after=row(3, "cy"))])
    assert live(spark, tmp_path) == [(2, "bob")]
    # A newer create after the delete does bring it back.
    merge_as(form, spark, tmp_path, [event("c", (1, 0, 1), after=row(1, "ann-again"))])
    assert live(spark, tmp_path) == [(1, "ann-again"), (2, "bob")]


def test_duplicates_and_a_replayed_batch_change_nothing(spark, tmp_path, form):
    batch = [
        event("c", (0, 1, 1), after=row(1, "a1")),
        event("u", (0, 2, 1), before=row(1, "a1"), after=row(1, "a2")),
        event("u", (0, 2, 1), before=row(1, "a1"), after=row(1, "a2")),  # delivered twice
        event("c", (0, 2, 2), after=row(2, "b1")),
    ]
    merge_as(form, spark, tmp_path, batch)
    first = sorted(map(tuple, spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()))
    merge_as(form, spark, tmp_path, batch)
    merge_as(form, spark, tmp_path, batch[:2])
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


def test_shuffled_delivery_in_any_batching_gives_the_in_order_table(spark, tmp_path, form):
    events, expected = history(n_keys=12, n_events=120, seed=7)
    rng = random.Random(3)
    shuffled = events[:]
    rng.shuffle(shuffled)
    cuts = sorted(rng.sample(range(1, len(shuffled)), 3))
    for lo, hi in zip([0, *cuts], [*cuts, len(shuffled)], strict=True):
        merge_as(form, spark, tmp_path, shuffled[lo:hi])
    assert live(spark, tmp_path) == expected


def test_an_added_column_appears_in_the_table(spark, tmp_path, form):
    from cdc_core.events.connect_schema import field

    wider = [*FIELDS, field("int32", "tier")]
    merge_as(form, spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "ann"))])
    merge_as(
        form,
        spark,
        tmp_path,
        [event("c", (0, 2, 1), after=row(2, "bob", extra={"tier": 3}), fields=wider),
         event("u", (0, 2, 2), before=row(1, "ann"), after=row(1, "ann", extra={"tier": 1}), fields=wider)],
    )  # fmt: skip
    rows = sorted(
        (r.id, r.tier) for r in spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()
    )
    assert rows == [(1, 1), (2, 3)]


def test_a_column_added_with_a_default_gives_it_to_the_rows_from_before_it(spark, tmp_path, form):
    """`ALTER TABLE ... ADD COLUMN ... DEFAULT x` gives every existing row x at the source
    and no event says so: rows already in Delta and rows of the batch read with the schema
    from before the column get the default its field schema states; rows changed after it
    keep their own values, NULL included; a default of the epoch in a temporal column (how
    CURRENT_TIMESTAMP is written) states nothing and is left out. A NOT NULL column added
    without a default (MySQL gives the rows its type's zero, an ENUM's first value, or the
    zero date, which the streamer writes as the epoch) states none in its schema, as
    Debezium writes it, and gets that implicit one."""
    from cdc_core.events.connect_schema import field

    wider = [
        *FIELDS,
        field("int32", "tier", default=5),
        field("string", "plan", default="basic"),
        field("int64", "since", logical="io.debezium.time.Timestamp", default=0),
        field("int32", "score", optional=False),
        field("string", "code", optional=False),
        field(
            "string",
            "level",
            optional=False,
            logical="io.debezium.data.Enum",
            parameters={"allowed": "lo,hi"},
        ),
        field("int32", "born", optional=False, logical="io.debezium.time.Date"),
        field("double", "ratio", optional=False),
    ]
    added = {"score": 7, "code": "c4", "level": "hi", "born": 1, "ratio": 0.5}
    merge_as(form, spark, tmp_path, [event("c", (0, 1, n), after=row(n, f"r{n}")) for n in (1, 2, 3)])
    merge_as(
        form,
        spark,
        tmp_path,
        [event("u", (0, 2, 1), before=row(2, "r2"), after=row(2, "two")),  # before the ALTER
         event("c", (0, 3, 1), after=row(4, "r4", extra={"tier": 9, "plan": "pro", "since": 123, **added}),
               fields=wider),
         event("u", (0, 3, 2), before=row(3, "r3", extra={"tier": 5, "plan": "basic", "since": None, **added}),
               after=row(3, "r3", extra={"tier": None, "plan": "gold", "since": None, **added}), fields=wider),
         event("c", (0, 3, 3), after=row(5, "r5", extra={"tier": 1, "plan": "pro", "since": 1, **added}),
               fields=wider),
         event("d", (0, 3, 4), before=row(5, "r5", extra={"tier": 1, "plan": "pro", "since": 1, **added}),
               fields=wider),
         tombstone(5)],  # in the delete's file of the Parquet log, as the streamer writes it
    )  # fmt: skip
    table = spark.read.format("delta").load(f"{tmp_path}/shop.accounts")
    rows = sorted(
        (r.id, r.name, r.tier, r.plan, r.since, r.score, r.code, r.level, r.born, r.ratio)
        for r in table.where("NOT _cdc_deleted").collect()
    )
    assert rows == [
        (1, "r1", 5, "basic", None, 0, "", "lo", dt.date(1970, 1, 1), 0.0),
        (2, "two", 5, "basic", None, 0, "", "lo", dt.date(1970, 1, 1), 0.0),
        (3, "r3", None, "gold", None, 7, "c4", "hi", dt.date(1970, 1, 2), 0.5),
        (
            4,
            "r4",
            9,
            "pro",
            dt.datetime(1970, 1, 1, 0, 0, 0, 123000),
            7,
            "c4",
            "hi",
            dt.date(1970, 1, 2),
            0.5,
        ),
    ]


@pytest.mark.parametrize("scd2", [False, True], ids=["latest", "scd2"])
def test_a_column_named_as_delta_refuses_is_added_to_a_table_mapping_names(spark, tmp_path, form, scd2):
    from delta.tables import DeltaTable

    from cdc_core.events.connect_schema import field
    from spark_jobs.merge.options import MergeOptions

    options = MergeOptions(scd2=r"shop\.accounts") if scd2 else None
    odd = "due (date), x=y"
    wider = [*FIELDS, field("string", odd)]
    merge_as(form, spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "ann"))], options)
    path = f"{tmp_path}/shop.accounts"
    assert "delta.columnMapping.mode" not in DeltaTable.forPath(spark, path).detail().first().properties
    later = row(2, "bob", extra={odd: "soon"})
    merge_as(form, spark, tmp_path, [event("c", (0, 2, 1), after=later, fields=wider)], options)
    table = DeltaTable.forPath(spark, path)
    assert table.detail().first().properties["delta.columnMapping.mode"] == "name"
    assert sorted((r.id, r[odd]) for r in table.toDF().collect()) == [(1, None), (2, "soon")]


def test_each_commit_records_the_source_offsets_it_reached(spark, tmp_path, form):
    import json

    from delta.tables import DeltaTable

    merge_as(
        form,
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "ann")), event("c", (0, 2, 1), after=row(2, "b"))],
    )
    last = DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").history(1).collect()[0]
    assert json.loads(last.userMetadata) == {"tidemark": {"topic": TOPIC, "reached": 2}}


def test_a_first_batch_creates_its_table_in_one_commit_and_a_lost_race_merges(spark, tmp_path, monkeypatch):
    """A new table is written holding its first batch (one pass over the batch, its
    positions on the commit), then its key is recorded (`rekeying`: a commit of its own,
    positions on it too, as it is the batch's last); a merge that finds the table created
    by another after it looked MERGEs instead, order-key guard included."""
    import json

    from delta.tables import DeltaTable

    from spark_jobs.merge import delta_apply

    merge(
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "ann")), event("c", (0, 2, 1), after=row(2, "b"))],
    )
    history = DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").history().collect()
    assert [(h.version, h.operation) for h in history] == [(1, "SET TBLPROPERTIES"), (0, "WRITE")]
    for commit in history:
        assert json.loads(commit.userMetadata) == {"tidemark": {"topic": TOPIC, "reached": 2}}

    looked = []
    real = delta_apply.table_exists
    monkeypatch.setattr(
        delta_apply, "table_exists", lambda *a: real(*a) if looked else looked.append(1) or False
    )
    merge(
        spark,
        tmp_path,
        [event("u", (0, 0, 1), after=row(1, "older")), event("u", (0, 3, 1), after=row(2, "bob"))],
    )
    assert looked, "the merge did not take the table for new"
    assert live(spark, tmp_path) == [(1, "ann"), (2, "bob")]
    assert DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").history(1).collect()[0].operation == "MERGE"


def test_tables_merged_side_by_side_each_commit_their_own_positions(spark, tmp_path):
    """Four tables MERGEd at once (`--parallel-tables`), each in a session of its own: every
    commit records its own table's topic and offsets (a commit's user metadata is a
    session setting, which one shared session would swap between tables)."""
    import json

    from delta.tables import DeltaTable

    from spark_jobs.delta_merge import apply_batch
    from spark_jobs.merge.options import MergeOptions

    records, reached = [], {}
    for t in range(5):
        topic = f"tm.shop.accounts_{t}"
        these = [
            {**event("c", (0, t, k), after=row(k, f"t{t}-{k}")), "topic": topic} for k in range(1, t + 2)
        ]
        records += these
        reached[topic] = 100 + t
    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    apply_batch(spark, frame, str(tmp_path), "tm", reached, options=MergeOptions(parallel_tables=4))
    for t in range(5):
        path = f"{tmp_path}/shop.accounts_{t}"
        last = DeltaTable.forPath(spark, path).history(1).collect()[0]
        assert json.loads(last.userMetadata) == {
            "tidemark": {"topic": f"tm.shop.accounts_{t}", "reached": 100 + t}
        }
        stored = sorted((r.id, r.name) for r in spark.read.format("delta").load(path).collect())
        assert stored == [(k, f"t{t}-{k}") for k in range(1, t + 2)]
    assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata", None) is None


def release_record(staged, excluded, order):
    import json

    epoch, rank, total = order
    payload = {"snapshot": "s1", "window": "w1", "data_collection": "shop.accounts", "staged": staged, "rows": 3,
               "key_columns": ["id"], "excluded_keys": [{"id": k} for k in excluded], "source": {},
               "ts_ms": 1_700_000_000_000, "transaction": {"id": "0-1-9", "total_order": total,
               "data_collection_order": total, "transaction_epoch": epoch, "transaction_rank": rank}}  # fmt: skip
    return {
        "topic": "tm.snapshot_releases",
        "key": json.dumps({"window": "w1"}),
        "value": json.dumps(payload),
    }


def test_a_fast_path_release_gives_the_table_its_op_r_events_would(spark, tmp_path, form):
    import datetime as dt
    import decimal

    stream = [
        event("c", (0, 1, 1), after=row(1, "a-before-window")),
        event("u", (0, 4, 1), before=row(3, "c"), after=row(3, "c-changed-in-window")),
    ]
    staged_rows = [(i, n, decimal.Decimal("0.00"), dt.date(2024, 2, 29), dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
                    bytearray(b"\xca\xfe")) for i, n in ((1, "a"), (2, "b"), (3, "c"))]  # fmt: skip
    staged = str(tmp_path / "staged" / "w1.parquet")
    spark.createDataFrame(
        staged_rows, "id INT, name STRING, balance DECIMAL(12,2), opened DATE, seen TIMESTAMP_NTZ, tag BINARY"
    ).coalesce(1).write.parquet(staged)
    hw = (0, 5, 1)
    merge_as(form, spark, tmp_path / "fast", [*stream, release_record(staged, excluded=[3], order=hw)])
    as_events = [event("r", hw, after=row(i, n)) for i, n in ((1, "a"), (2, "b"))]
    merge_as(form, spark, tmp_path / "events", [*stream, *as_events])
    assert live(spark, tmp_path / "fast") == live(spark, tmp_path / "events")
    assert live(spark, tmp_path / "fast") == [(1, "a"), (2, "b"), (3, "c-changed-in-window")]
    # The release alone, in a later batch, against the existing table: the same again.
    merge_as(form, spark, tmp_path / "later", stream)
    merge_as(form, spark, tmp_path / "later", [release_record(staged, excluded=[3], order=hw)])
    assert live(spark, tmp_path / "later") == live(spark, tmp_path / "events")


@pytest.mark.timeout(600)  # OPTIMIZE and VACUUM took 144 s in CI on 2 cores
def test_housekeeping_collects_tombstones_only_past_their_retention(spark, tmp_path):
    from spark_jobs.delta_housekeeping import delta_tables, housekeep

    merge(
        spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "a")), event("c", (0, 1, 2), after=row(2, "b"))]
    )
    merge(spark, tmp_path, [event("d", (0, 2, 1), before=row(1, "a"))])
    path = f"{tmp_path}/shop.accounts"
    assert delta_tables(spark, str(tmp_path)) == [path]
    # The delete happened (source time) in 2023: a century's retention keeps it.
    assert housekeep(spark, path, 24 * 365 * 100, 168)["tombstones_collected"] == 0
    assert spark.read.format("delta").load(path).where("_cdc_deleted").count() == 1
    assert housekeep(spark, path, 24, 168)["tombstones_collected"] == 1
    assert spark.read.format("delta").load(path).where("_cdc_deleted").count() == 0
    assert live(spark, tmp_path) == [(2, "b")]


def test_a_batch_never_commits_part_of_a_source_transaction(spark, tmp_path, form):
    import json

    from delta.tables import DeltaTable

    from spark_jobs.merge.delta_apply import table_exists
    from spark_jobs.merge.positions import read_at_common_position
    from spark_jobs.merge.transactions import PendingStore
    from tests.support.events import transaction

    pending = PendingStore(spark, str(tmp_path / "held"))

    def aligned(batch_id, records):
        merge_aligned(spark, tmp_path, pending, form, batch_id, records)

    table = {"shop.accounts": 3}
    # Transaction 7 (three rows) is cut by the batch boundary: nothing of it lands.
    aligned(
        1,
        [
            transaction("BEGIN", 7),
            event("c", (0, 7, 1), after=row(1, "a")),
            event("c", (0, 7, 2), after=row(2, "b")),
        ],
    )
    assert not table_exists(spark, f"{tmp_path}/shop.accounts")
    second = [
        event("c", (0, 7, 3), after=row(3, "c")),
        transaction("END", 7, table),
        transaction("BEGIN", 8),
        event("u", (0, 8, 1), before=row(1, "a"), after=row(1, "a8")),
        transaction("END", 8, {"shop.accounts": 1}),
        transaction("BEGIN", 9),
        event("u", (0, 9, 1), before=row(2, "b"), after=row(2, "b9")),  # its END comes later
    ]
    aligned(2, second)
    assert live(spark, tmp_path) == [(1, "a8"), (2, "b"), (3, "c")]
    path = f"{tmp_path}/shop.accounts"
    last = json.loads(DeltaTable.forPath(spark, path).history(1).collect()[0].userMetadata)["tidemark"]
    assert (last["upto"], last["first"], last["last"]) == ([0, 8], [0, 7], [0, 8])  # 9 is held
    aligned(2, second)  # the same batch again (a crash before its checkpoint): the same result
    assert live(spark, tmp_path) == [(1, "a8"), (2, "b"), (3, "c")]
    aligned(3, [transaction("END", 9, {"shop.accounts": 1})])
    assert live(spark, tmp_path) == [(1, "a8"), (2, "b9"), (3, "c")]
    assert pending.read(4).count() == 0  # batch 3 held nothing (not batch 2's transaction 9)
    position, frames = read_at_common_position(spark, [path])
    assert position == (0, 9) and frames[path].where("NOT _cdc_deleted").count() == 3


def test_records_held_back_over_several_batches_keep_their_values(spark, tmp_path, form):
    """A transaction held back across three batches: what is held is each record as its
    source gave it (read again by position, or from the parse for records with none, such
    as those an earlier batch held), and lands whole once its END comes."""
    import json

    from spark_jobs.merge.transactions import PendingStore
    from tests.support.events import transaction

    pending = PendingStore(spark, str(tmp_path / "held"))

    def bare(value):  # the Parquet log's reader writes a field the payload left out as null
        if isinstance(value, dict):
            return {k: bare(v) for k, v in value.items() if v is not None}
        return [bare(v) for v in value] if isinstance(value, list) else value

    def canonical(text):
        return json.dumps(bare(json.loads(text)), sort_keys=True)

    def held(batch_id):
        rows = pending.read(batch_id).collect()
        return sorted((r.topic, canonical(r.key), canonical(r.value)) for r in rows)

    def given(records):
        return sorted((r["topic"], canonical(r["key"]), canonical(r["value"])) for r in records)

    first = [transaction("BEGIN", 7), event("c", (0, 7, 1), after=row(1, "a"))]
    merge_aligned(spark, tmp_path, pending, form, 1, first)
    assert held(2) == given(first)
    second = [
        event("c", (0, 7, 2), after=row(2, "b")),
        event("c", (0, 6, 1), after=row(3, "c"), standalone=True),
    ]
    merge_aligned(spark, tmp_path, pending, form, 2, second)
    assert held(3) == given(first + second[:1])
    assert live(spark, tmp_path) == [(3, "c")]
    if form == "json":  # byte for byte, as the streamer wrote them
        assert sorted(r.value for r in pending.read(3).collect()) == sorted(
            r["value"] for r in first + second[:1]
        )
    merge_aligned(spark, tmp_path, pending, form, 3, [transaction("END", 7, {"shop.accounts": 2})])
    assert live(spark, tmp_path) == [(1, "a"), (2, "b"), (3, "c")]
    assert pending.read(4).count() == 0


def test_an_event_delivered_twice_never_stands_in_for_a_missing_one(spark, tmp_path):
    """Completeness counts distinct events (by total_order): a repeated event with another
    missing holds the transaction back, in a small transaction (its events' bits in one
    long) and in one whose events' bits span two, the repeat in one, the gap in the other."""
    from spark_jobs.merge.delta_apply import table_exists
    from spark_jobs.merge.transactions import BLOCK, PendingStore
    from tests.support.events import transaction

    pending = PendingStore(spark, str(tmp_path / "held"))
    large = BLOCK + 7

    def aligned(batch_id, records):
        merge_aligned(spark, tmp_path, pending, "json", batch_id, records)

    def inserts(rank, orders):
        return [event("c", (0, rank, n), after=row(rank * 1000 + n, f"r{rank}")) for n in orders]

    # Transaction 1 (3 events): event 2 twice, event 3 missing. Transaction 2 (BLOCK + 7
    # events): event 5 twice, the last one missing. Both ENDs are in hand.
    aligned(
        1,
        [transaction("BEGIN", 1), *inserts(1, [1, 2, 2]), transaction("END", 1, {"shop.accounts": 3})]
        + [transaction("BEGIN", 2), *inserts(2, [5, *range(1, large)])]
        + [transaction("END", 2, {"shop.accounts": large})],
    )
    assert not table_exists(spark, f"{tmp_path}/shop.accounts")
    aligned(2, [*inserts(1, [3]), *inserts(2, [large])])  # the missing ones arrive
    landed = live(spark, tmp_path)
    assert len(landed) == 3 + large
    assert {r[0] // 1000 for r in landed} == {1, 2}


def test_a_standalone_change_lands_at_once_and_counts_for_the_positions(spark, tmp_path, form):
    """A change in no transaction (MongoDB's single-document writes: a null id, no
    BEGIN/END) is complete by itself, also while a transaction around it is held."""
    import json

    from delta.tables import DeltaTable

    from spark_jobs.merge.transactions import PendingStore
    from tests.support.events import transaction

    pending = PendingStore(spark, str(tmp_path / "held"))

    def aligned(batch_id, records):
        merge_aligned(spark, tmp_path, pending, form, batch_id, records)

    aligned(
        1,
        [
            event("c", (0, 6, 1), after=row(1, "a"), standalone=True),
            event("u", (0, 7, 1), before=row(1, "a"), after=row(1, "a7"), standalone=True),
            transaction("BEGIN", 9),
            event("c", (0, 9, 1), after=row(2, "b")),  # its END comes later
            event("c", (0, 8, 1), after=row(3, "c"), standalone=True),
        ],
    )
    assert live(spark, tmp_path) == [(1, "a7"), (3, "c")]
    meta = DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").history(1).collect()[0].userMetadata
    last = json.loads(meta)["tidemark"]
    assert (last["upto"], last["first"], last["last"]) == ([0, 8], [0, 6], [0, 8])
    assert pending.read(2).count() == 2  # transaction 9's BEGIN and event, nothing standalone
    aligned(2, [transaction("END", 9, {"shop.accounts": 1})])
    assert live(spark, tmp_path) == [(1, "a7"), (2, "b"), (3, "c")]


@pytest.mark.parametrize("scd2", [False, True], ids=["latest", "scd2"])
def test_an_event_older_than_a_truncate_merged_later_stays_out_even_for_a_new_key(spark, tmp_path, scd2):
    """A table's truncation mark outlives its batch: an older event merged later (a
    transaction held back, a replay) neither brings a truncated key back nor inserts a
    key the table never held, while a newer one lands. (After the parse, no input form
    changes this: both forms' truncates are in the pipeline test.)"""
    from spark_jobs.merge.options import MergeOptions
    from spark_jobs.merge.truncation import PROPERTY, Mark

    options = MergeOptions(scd2="shop.accounts" if scd2 else None)
    merge_as(
        "json",
        spark,
        tmp_path,
        [event("c", (0, 1, 1), after=row(1, "a"), standalone=True), truncate((0, 5, 1))],
        options,
    )
    assert live(spark, tmp_path) == []
    late = [
        event("u", (0, 2, 1), before=row(1, "a"), after=row(1, "a2"), standalone=True),
        event("c", (0, 3, 1), after=row(2, "b"), standalone=True),  # never in the table
        event("c", (0, 7, 1), after=row(3, "c"), standalone=True),
    ]
    merge_as("json", spark, tmp_path, late, options)
    assert live(spark, tmp_path) == [(3, "c")]
    properties = spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path}/shop.accounts`").collect()
    kept = next(Mark.from_json(r.value) for r in properties if r.key == PROPERTY)
    assert kept.order == (0, 5, 1)


def test_keyless_events_are_refused_until_message_key_columns_names_their_key(spark, tmp_path, form):
    """A table without a primary key has events without a key. The batch fails, naming the
    way out, with nothing merged; once the connector's message.key.columns names a key
    (in any case, as MySQL names columns), the same events land keyed by it."""
    from cdc_core.errors import TidemarkError
    from spark_jobs.merge.options import MergeOptions

    records = [
        event("c", (0, 1, 1), after=row(1, "a"), standalone=True),
        event("c", (0, 2, 1), after=row(2, "b"), standalone=True),
        event("u", (0, 3, 1), before=row(1, "a"), after=row(1, "a2"), standalone=True),
        event("d", (0, 4, 1), before=row(2, "b"), standalone=True),
    ]
    for record in records:
        record["key"] = None
    with pytest.raises(TidemarkError, match="have no key.*message.key.columns"):
        merge_as(form, spark, tmp_path, records)
    assert not (tmp_path / "shop.accounts").exists()
    merge_as(form, spark, tmp_path, records, MergeOptions(key_columns=r"shop\.accounts:ID"))
    assert live(spark, tmp_path) == [(1, "a2")]


def test_scd2_history_matches_the_sequence_of_changes_whatever_the_delivery(spark, tmp_path, form):
    from spark_jobs.merge.options import MergeOptions

    scd2 = MergeOptions(scd2=r"shop\.accounts")
    c1, u1, d1 = (
        event("c", (0, 1, 1), after=row(1, "a")),
        event("u", (0, 3, 1), before=row(1, "a"), after=row(1, "b")),
        event("d", (0, 5, 1), before=row(1, "b")),
    )
    c2 = event("c", (0, 2, 1), after=row(2, "x"))
    merge_as(form, spark, tmp_path, [d1, c1, c2], scd2)
    merge_as(form, spark, tmp_path, [u1, c1], scd2)  # a late update, and a repeat
    merge_as(form, spark, tmp_path, [u1], scd2)  # replayed
    history = sorted(
        (r.id, r._cdc_rank, r.name, r._cdc_end_rank, r._cdc_current, r._cdc_deleted)
        for r in spark.read.format("delta").load(f"{tmp_path}/shop.accounts").collect()
    )
    assert history == [
        (1, 1, "a", 3, False, False),
        (1, 3, "b", 5, False, False),
        (1, 5, "b", None, False, True),
        (2, 2, "x", None, True, False),
    ]
    assert live(spark, tmp_path) == [(2, "x")]


@pytest.mark.parametrize("layout", ["partition_by", "cluster_by"])
def test_a_new_table_is_partitioned_or_clustered_as_configured(spark, tmp_path, layout):
    from delta.tables import DeltaTable

    from spark_jobs.merge.options import MergeOptions

    options = MergeOptions(**{layout: {"shop.accounts": ("opened",)}})
    merge(spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "a"))], options)
    detail = DeltaTable.forPath(spark, f"{tmp_path}/shop.accounts").detail().collect()[0]
    columns = detail.partitionColumns if layout == "partition_by" else detail.clusteringColumns
    assert list(columns) == ["opened"]
    assert live(spark, tmp_path) == [(1, "a")]


def test_a_widened_column_widens_and_an_incompatible_change_applies_nothing(spark, tmp_path, form):
    from cdc_core.errors import TidemarkError
    from cdc_core.events.connect_schema import field

    merge_as(form, spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "a"))])
    bigger = [field("int64", "id", optional=False), *FIELDS[1:]]  # INT -> BIGINT at the source
    merge_as(form, spark, tmp_path, [event("c", (0, 2, 1), after=row(2**40, "big"), fields=bigger)])
    stored = spark.read.format("delta").load(f"{tmp_path}/shop.accounts")
    assert dict(stored.dtypes)["id"] == "bigint"
    assert live(spark, tmp_path) == [(1, "a"), (2**40, "big")]
    as_text = [*bigger[:2], field("string", "balance"), *FIELDS[3:]]  # DECIMAL -> text: no widening
    other = dict(event("c", (0, 3, 1), after=row(5, "other-table")), topic="tm.shop.others")
    with pytest.raises(TidemarkError, match="balance changed from decimal.12,2. to string"):
        merge_as(
            form,
            spark,
            tmp_path,
            [other, event("u", (0, 3, 2), after=row(1, "a2", extra={"balance": "1.00"}), fields=as_text)],
        )
    assert live(spark, tmp_path) == [(1, "a"), (2**40, "big")]
    from spark_jobs.merge.delta_apply import table_exists

    assert not table_exists(spark, f"{tmp_path}/shop.others")  # nothing of the batch applied


def test_any_json_spacing_and_a_schema_holding_a_payload_key_merge_alike(spark, tmp_path):
    import json

    from cdc_core.events.connect_schema import field

    batch = [event("c", (0, 1, 1), after=row(1, "a")), event("c", (0, 1, 2), after=row(2, "b"))]
    merge(spark, tmp_path / "compact", batch)
    # Spaced JSON (another producer's style) is read the slow way, per record.
    spaced = [dict(r, value=json.dumps(json.loads(r["value"]))) for r in batch]
    assert spaced[0]["value"].startswith('{"schema": {')
    merge(spark, tmp_path / "spaced", spaced)
    # A schema with an object key "payload" (in a field's parameters) defeats the fast
    # cut; the batch is parsed again the slow way.
    odd = [*FIELDS[:1], field("string", "name", parameters={"note": "n", "payload": "p"}), *FIELDS[2:]]
    tricky = [
        event("c", (0, 1, 1), after=row(1, "a"), fields=odd),
        event("c", (0, 1, 2), after=row(2, "b"), fields=odd),
    ]
    assert ',"payload":"p"' in tricky[0]["value"]
    merge(spark, tmp_path / "tricky", tricky)
    for name in ("spaced", "tricky"):
        assert live(spark, tmp_path / name) == live(spark, tmp_path / "compact") == [(1, "a"), (2, "b")]


def test_a_record_that_is_not_json_fails_the_batch_and_applies_nothing(spark, tmp_path):
    from cdc_core.errors import TidemarkError

    merge(spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "a"))])
    broken = dict(event("c", (0, 2, 1), after=row(2, "b")))
    broken["value"] = broken["value"][:-40]  # cut short, as by a faulty producer
    with pytest.raises(TidemarkError, match=f"not a JSON event .1 on {TOPIC}."):
        merge(spark, tmp_path, [event("u", (0, 2, 2), before=row(1, "a"), after=row(1, "a2")), broken])
    assert live(spark, tmp_path) == [(1, "a")]


def test_a_source_column_named_like_the_bookkeeping_fails_the_batch_naming_it(spark, tmp_path, form):
    from cdc_core.errors import TidemarkError
    from cdc_core.events.connect_schema import field

    merge_as(form, spark, tmp_path, [event("c", (0, 1, 1), after=row(1, "a"))])
    clash = [*FIELDS, field("string", "_cdc_op")]
    update = event("u", (0, 2, 1), before=row(1, "a"), after=row(1, "a2"))
    with pytest.raises(TidemarkError, match=r"\['_cdc_op'\] begin with '_cdc_'.*column.exclude.list"):
        merge_as(form, spark, tmp_path, [update, event("c", (0, 2, 2), after=row(2, "b", extra={"_cdc_op": "x"}), fields=clash)])  # fmt: skip
    assert live(spark, tmp_path) == [(1, "a")]


def test_a_release_leaves_out_its_excluded_keys_whatever_their_type(spark, tmp_path):
    """A release record carries the keys changed inside its window as event values (base64
    bytes, epoch microseconds, ...) with their fields' schemas; the merge compares them with
    the staged key columns, which hold the Delta types (found by a workload with BINARY(16)
    and DATETIME(6) keys: the merge failed on every run)."""
    import json

    from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes
    from cdc_core.schema.model import Column
    from spark_jobs.merge.releases import parse_release, release_rows

    key = [
        Column("bn", "BINARY", 16, nullable=False),
        Column("dt", "DATETIME", 6, nullable=False),
        Column("ts", "TIMESTAMP", 6, nullable=False),
        Column("u", "BIGINT", unsigned=True, nullable=False),
        Column("tm", "TIME", 6, nullable=False),
        Column("d", "DECIMAL", 20, 4, nullable=False),
    ]
    mappings = [MySqlTypeMapper(TypeModes()).map_column(c, optional=False) for c in key]
    utc = dt.UTC

    def canonical(n):  # a key as the streamer holds it (MySQL key_values' canonical form)
        return (
            bytes([n]) + bytes(15),
            dt.datetime(2024, 1, 2, 3, 4, 5, n),
            dt.datetime(2024, 1, 2, 3, 4, 5, n),
            2**64 - n,
            dt.timedelta(microseconds=-1_250_000 - n),
            decimal.Decimal(f"{n}.5000"),
        )

    def staged(n):  # the same key as the chunk job stages it for a lakehouse release
        bn, dtime, ts, u, _, d = canonical(n)
        return (bn, dtime, ts.replace(tzinfo=utc), u - 2**64, -1_250_000 - n, d, f"row {n}")

    path = str(tmp_path / "staged" / "w1.parquet")
    spark.createDataFrame(
        [staged(n) for n in (1, 2, 3)],
        "bn BINARY, dt TIMESTAMP_NTZ, ts TIMESTAMP, u BIGINT, tm BIGINT, d DECIMAL(20,4), v STRING",
    ).coalesce(1).write.parquet(path)
    payload = {
        "snapshot": "s1", "window": "w1", "data_collection": "shop.keyed", "staged": path, "rows": 3,
        "key_columns": [c.name for c in key], "key_schema": [m.schema for m in mappings],
        "excluded_keys": [{c.name: m.convert(v) for c, m, v in zip(key, mappings, canonical(n), strict=True)}
                          for n in (2, 7)],
        "source": {}, "ts_ms": 1, "transaction": {"id": "t", "total_order": 1, "data_collection_order": 1,
                                                   "transaction_epoch": 0, "transaction_rank": 5},
    }  # fmt: skip
    release = parse_release(json.dumps(payload))
    rows = release_rows(spark, [release], None).select("v").collect()
    assert sorted(r.v for r in rows) == ["row 1", "row 3"]


def test_schemaless_values_naming_their_schemas_land_as_values_with_schemas(spark, tmp_path):
    """Deliverable of schemas by reference: the same events, with their schemas or naming
    them, give the same Delta table, every column and type (an added column included)."""
    from cdc_core.events.connect_schema import field
    from spark_jobs.delta_merge import apply_aligned
    from spark_jobs.merge.known_schemas import KnownSchemas
    from spark_jobs.merge.transactions import PendingStore
    from tests.support.events import transaction

    wider = [*FIELDS, field("int64", "tier", logical="io.debezium.time.MicroTimestamp")]
    batches = [
        [
            transaction("BEGIN", 1),
            event("c", (0, 1, 1), after=row(1, "ann", cents=-12345)),
            event("c", (0, 1, 2), after=row(2, "bob", cents=7)),
            transaction("END", 1, {"shop.accounts": 2}),
            transaction("BEGIN", 2),
            event(
                "u", (0, 2, 1), before=row(1, "ann"), after=row(1, "ann2", extra={"tier": 5}), fields=wider
            ),
        ],
        [
            transaction("END", 2, {"shop.accounts": 2}),
            event("d", (0, 2, 2), before=row(2, "bob"), fields=wider),
            tombstone(2),
            transaction("BEGIN", 3),
            event("c", (0, 3, 1), after=row(3, "cy", extra={"tier": 1709251199123456}), fields=wider),
            transaction("END", 3, {"shop.accounts": 1}),
        ],
    ]
    catalogue: dict = {}
    for form in ("with", "without"):
        root = tmp_path / form
        pending, known = PendingStore(spark, str(root / "held")), KnownSchemas()
        for batch_id, batch in enumerate(batches, 1):
            records = batch if form == "with" else [schemaless(r, catalogue) for r in batch]
            known.refer(catalogue)
            schema = "topic STRING, key STRING, value STRING" + (
                ", schema_ref STRING" if form != "with" else ""
            )
            frame = spark.createDataFrame(records, schema)
            apply_aligned(spark, frame, str(root / "delta"), "tm", {}, pending, batch_id, known=known)
    tables = [
        spark.read.format("delta").load(str(tmp_path / f / "delta" / "shop.accounts"))
        for f in ("with", "without")
    ]
    assert tables[0].schema == tables[1].schema and "tier" in tables[0].columns
    rows = [sorted(map(tuple, t.collect()), key=str) for t in tables]
    assert rows[0] == rows[1] and len(rows[0]) == 3  # 2 is kept deleted, for late events to meet
    # Values naming a schema the merge cannot find: refused, nothing merged.
    from cdc_core.errors import TidemarkError

    lost = [schemaless(r, {}) for r in batches[1]]
    frame = spark.createDataFrame(lost, "topic STRING, key STRING, value STRING, schema_ref STRING")
    with pytest.raises(TidemarkError, match="tidemark.schema.references"):
        apply_aligned(
            spark, frame, str(tmp_path / "lost"), "tm", {}, PendingStore(spark, str(tmp_path / "h")), 1
        )
    assert not (tmp_path / "lost" / "shop.accounts").exists()
