"""The one door: transaction numbering, key changes, tombstones, filters, masks, and
resuming inside a transaction without loss or duplicates (no database needed)."""

from __future__ import annotations

import dataclasses
import logging

import orjson
import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mysql.connector import PROPERTIES
from cdc_core.connectors.mysql.source_info import source_schema
from cdc_core.connectors.mysql.types import TypeModes, map_column
from cdc_core.events.envelope import NEWKEY_HEADER, OLDKEY_HEADER
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import RowChange, SnapshotRelease, TransactionBegin, TransactionCommit

CUSTOMERS = TableSchema(
    TableId("shop", "customers"),
    (
        Column("id", "INT", nullable=False),
        Column("email", "VARCHAR", length=80),
        Column("name", "VARCHAR", length=40),
    ),
    ("id",),
)
ORDERS = TableSchema(
    TableId("shop", "orders"), (Column("id", "INT", nullable=False), Column("total", "INT")), ("id",)
)
SECRETS = TableSchema(TableId("hr", "salaries"), (Column("id", "INT", nullable=False),), ("id",))


class FakeSource:
    connector_name = "mysql"

    def type_mapper(self):
        class Mapper:
            def map_column(self, column, optional=None):
                return map_column(column, TypeModes(), optional)

            def key_event_value(self, column):
                return self.map_column(column, optional=False).convert

            def staged_digest(self, table):
                return ""

        return Mapper()

    def source_schema(self):
        return source_schema("mysql")

    def shaper(self, schema, topic, rules, staged=None):
        from cdc_core.filters import RowShaper

        return RowShaper(schema, topic, rules, self.type_mapper(), staged)


def config(tmp_path, extra: str = ""):
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: t\nconnector.class: mysql\ntopic.prefix: srv\ndatabase.hostname: h\ndatabase.user: u\n"
        "database.server.id: 1\nkey.converter.schemas.enable: false\nvalue.converter.schemas.enable: false\n"
        "tidemark.schema.references: false\ntable.exclude.list: hr\\..*\n" + extra
    )
    return load_config(path, PROPERTIES, environ={})


def row(table, op, before=None, after=None):
    return RowChange(table, op, before, after, {"db": table.id.database, "table": table.id.table}, 1000)


def transaction(rank: int, *rows):
    restart = {"file": "f.000001", "pos": rank}
    return [
        TransactionBegin(f"0-1-{rank}", 0, rank, 1000, restart),
        *rows,
        TransactionCommit({"file": "f.000001", "pos": rank + 1}, 1000),
    ]


def decoded(records, context=False):
    """(topic, key, value, headers) of each record; Debezium's context headers (on every
    change event, tested apart) only with `context`."""
    return [
        (
            r.topic,
            orjson.loads(r.key) if r.key else None,
            orjson.loads(r.value) if r.value else None,
            {k: v for k, v in r.headers if context or not k.startswith("__debezium.context.")},
        )
        for r, _ in records
    ]


def without_processing_time(out):
    strip = {"ts_ms", "ts_us", "ts_ns"}
    return [
        (t, k, v and {f: x for f, x in v.items() if f not in strip or "status" in v}, h) for t, k, v, h in out
    ]


def test_multi_table_transaction_numbering_and_begin_end(tmp_path):
    d = Dispatcher(config(tmp_path), FakeSource(), AckTracker())
    items = transaction(
        7,
        row(CUSTOMERS, "c", after=(1, "a@x", "Ann")),
        row(ORDERS, "c", after=(10, 5)),
        row(SECRETS, "c", after=(1,)),  # excluded table: no event, no number
        row(ORDERS, "u", before=(10, 5), after=(10, 6)),
    )
    out = decoded(d.process(items))
    topics = [t for t, *_ in out]
    assert topics == [
        "srv.transaction",
        "srv.shop.customers",
        "srv.shop.orders",
        "srv.shop.orders",
        "srv.transaction",
    ]
    blocks = [v["transaction"] for t, _, v, _ in out if t != "srv.transaction"]
    assert [(b["total_order"], b["data_collection_order"]) for b in blocks] == [(1, 1), (2, 1), (3, 2)]
    assert {(b["id"], b["transaction_epoch"], b["transaction_rank"]) for b in blocks} == {("0-1-7", 0, 7)}
    begin, end = out[0][2], out[-1][2]
    assert begin["status"] == "BEGIN" and end["status"] == "END"
    assert end["event_count"] == 3
    assert end["data_collections"] == [
        {"data_collection": "shop.customers", "event_count": 1},
        {"data_collection": "shop.orders", "event_count": 2},
    ]
    assert out[3][2]["op"] == "u" and out[3][2]["before"] == {"id": 10, "total": 5}


def test_primary_key_change_is_delete_tombstone_create_with_headers(tmp_path):
    d = Dispatcher(config(tmp_path), FakeSource(), AckTracker())
    out = decoded(
        d.process(transaction(3, row(CUSTOMERS, "u", before=(1, "a", "A"), after=(2, "a", "A")))),
        context=True,
    )
    rows = [o for o in out if o[0] == "srv.shop.customers"]
    assert [(k, v and v["op"]) for _, k, v, _ in rows] == [
        ({"id": 1}, "d"),
        ({"id": 1}, None),
        ({"id": 2}, "c"),
    ]
    context = {
        "__debezium.context.connectorLogicalName": b'"srv"',
        "__debezium.context.taskId": b'"0"',
        "__debezium.context.connectorName": b'"mysql"',
    }
    run_id = rows[0][3]["__debezium.context.runId"]
    assert len(orjson.loads(run_id)) == 36  # a UUID per streamer run, as Debezium's
    assert rows[0][3] == {NEWKEY_HEADER: b'{"id":2}', **context, "__debezium.context.runId": run_id}
    assert rows[1][3] == rows[0][3]  # the tombstone carries the delete's headers
    assert rows[2][3] == {OLDKEY_HEADER: b'{"id":1}', **context, "__debezium.context.runId": run_id}
    assert [v["transaction"]["total_order"] for _, _, v, _ in rows if v] == [1, 2]


def test_tombstones_off_and_skipped_operations(tmp_path):
    d = Dispatcher(
        config(tmp_path, "tombstones.on.delete: false\nskipped.operations: u\n"), FakeSource(), AckTracker()
    )
    out = decoded(
        d.process(transaction(4, row(ORDERS, "u", (1, 1), (1, 2)), row(ORDERS, "d", before=(1, 2))))
    )
    assert [(v or {}).get("op") for t, _, v, _ in out if t == "srv.shop.orders"] == ["d"]


def test_masks_truncation_hash_exclusion_and_key_override(tmp_path):
    extra = (
        "column.mask.with.4.chars: shop.customers.email\n"
        "column.truncate.to.2.chars: shop.customers.name\n"
        "column.exclude.list: shop.orders.total\n"
        "message.key.columns: shop.orders:id,total\n"
    )
    d = Dispatcher(config(tmp_path, extra), FakeSource(), AckTracker())
    out = decoded(
        d.process(
            transaction(5, row(CUSTOMERS, "c", after=(1, "a@x", "Annabel")), row(ORDERS, "c", after=(9, 3)))
        )
    )
    customers = next(v for t, _, v, _ in out if t == "srv.shop.customers")
    assert customers["after"] == {"id": 1, "email": "****", "name": "An"}
    key, value = next((k, v) for t, k, v, _ in out if t == "srv.shop.orders")
    assert key == {"id": 9, "total": 3}  # key columns stay even when excluded from the value
    assert value["after"] == {"id": 9, "total": 3}


def test_a_truncate_is_skipped_by_default_with_a_warning_and_emitted_when_asked(tmp_path, caplog):
    """Debezium's default leaves truncates out; the copies downstream then keep the rows,
    which is said where it happens, with the way to land them."""
    truncate = transaction(5, row(ORDERS, "t"))
    with caplog.at_level(logging.WARNING, "tidemark.dispatcher"):
        out = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker()).process(truncate))
    assert [t for t, *_ in out if t == "srv.shop.orders"] == []
    assert (
        "TRUNCATE of shop.orders not emitted" in caplog.text and "skipped.operations to none" in caplog.text
    )
    d = Dispatcher(config(tmp_path, "skipped.operations: none\n"), FakeSource(), AckTracker())
    emitted = [(k, v["op"]) for t, k, v, _ in decoded(d.process(truncate)) if t == "srv.shop.orders"]
    assert emitted == [(None, "t")]


def test_hash_mask(tmp_path):
    d = Dispatcher(
        config(tmp_path, "column.mask.hash.SHA-256.with.salt.pepper: shop.customers.email\n"),
        FakeSource(),
        AckTracker(),
    )
    out = decoded(d.process(transaction(5, row(CUSTOMERS, "c", after=(1, "a@x", "A")))))
    import hashlib

    value = next(v for t, _, v, _ in out if t == "srv.shop.customers")
    assert value["after"]["email"] == hashlib.sha256(b"peppera@x").hexdigest()


@pytest.mark.parametrize("delivered", [0, 1, 2, 3])
def test_resume_inside_a_transaction_repeats_nothing_and_numbers_the_same(tmp_path, delivered):
    items = transaction(
        9,
        row(CUSTOMERS, "c", after=(1, "a", "A")),
        row(CUSTOMERS, "c", after=(2, "b", "B")),
        row(ORDERS, "c", after=(3, 3)),
    )
    full = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker()).process(items))
    resume = {
        "source": {"file": "f.000001", "pos": 9},
        "in_txn": True,
        "rows_done": delivered,
        "schema_seq": 0,
    }
    resumed = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker(), resume=resume).process(items))
    # Nothing delivered before is repeated (not even BEGIN), and what follows is identical
    # except for the processing time stamps.
    assert without_processing_time(resumed) == without_processing_time(full[1 + delivered :])


def test_offsets_follow_acknowledgements(tmp_path):
    tracker = AckTracker()
    d = Dispatcher(config(tmp_path), FakeSource(), tracker)
    records = d.process(transaction(2, row(ORDERS, "c", after=(1, 1)), row(ORDERS, "d", before=(1, 1))))
    for _, entry in records[:-1]:
        tracker.ack(entry)
    offset = tracker.take_committable()
    assert offset == {
        "source": {"file": "f.000001", "pos": 2},
        "in_txn": True,
        "rows_done": 2,
        "schema_seq": 0,
    }
    tracker.ack(records[-1][1])
    assert tracker.take_committable()["source"] == {"file": "f.000001", "pos": 3}


def test_a_standalone_change_has_no_begin_or_end_and_an_ordered_block_with_a_null_id(tmp_path):
    """A write outside any transaction of the source's (MongoDB's single-document writes):
    Debezium's MongoDB connector gives it no BEGIN/END; Tidemark keeps the order on it."""
    restart = {"file": "f.000001", "pos": 20}
    items = [
        TransactionBegin("token-20", 0, 20, 1000, restart, standalone=True),
        row(ORDERS, "c", after=(1, 1)),
        TransactionCommit({"file": "f.000001", "pos": 21}, 1000),
        *transaction(22, row(ORDERS, "u", before=(1, 1), after=(1, 2))),
    ]
    tracker = AckTracker()
    records = Dispatcher(
        config(tmp_path, "provide.transaction.metadata: true\n"), FakeSource(), tracker
    ).process(items)
    out = decoded(records)
    assert [t for t, *_ in out] == [
        "srv.shop.orders",
        "srv.transaction",
        "srv.shop.orders",
        "srv.transaction",
    ]
    blocks = [v["transaction"] for t, _, v, _ in out if t == "srv.shop.orders"]
    assert blocks[0] == {
        "id": None, "total_order": 1, "data_collection_order": 1, "transaction_epoch": 0, "transaction_rank": 20,
    }  # fmt: skip
    assert blocks[1]["id"] == "0-1-22" and statuses(out) == ["BEGIN", "END"]
    # Acknowledged, the standalone change's commit is the restart position after it.
    tracker.ack(records[0][1])
    assert tracker.take_committable()["source"] == {"file": "f.000001", "pos": 21}
    # Resumed inside it (delivered, not yet committed past): nothing is repeated.
    resume = {"source": restart, "in_txn": True, "rows_done": 1, "schema_seq": 0}
    again = Dispatcher(
        config(tmp_path, "provide.transaction.metadata: true\n"), FakeSource(), AckTracker(), resume=resume
    )
    assert without_processing_time(decoded(again.process(items))) == without_processing_time(out[1:])


# ---------------------------------------------------------------- BEGIN/END only around captured events


def release(table, window: str = "w1"):
    """A lakehouse release record's log item for `table` (one staged row, no exclusions)."""
    return SnapshotRelease(table, "s1", window, f"staged/{window}.parquet", 1, ("id",), [], {}, 1000)


def statuses(out):
    return [v["status"] for t, _, v, _ in out if t == "srv.transaction"]


def test_a_transaction_touching_only_uncaptured_tables_has_no_begin_and_no_end(tmp_path):
    tracker = AckTracker()
    d = Dispatcher(config(tmp_path), FakeSource(), tracker)
    records = d.process(transaction(4, row(SECRETS, "c", after=(1,)), row(SECRETS, "d", before=(1,))))
    assert records == []
    # Its commit still moves the committed position past it.
    assert tracker.take_committable()["source"] == {"file": "f.000001", "pos": 5}


def test_begin_goes_out_with_the_first_captured_event_under_its_offset(tmp_path):
    tracker = AckTracker()
    d = Dispatcher(config(tmp_path), FakeSource(), tracker)
    records = d.process(
        transaction(
            6,
            row(SECRETS, "c", after=(1,)),  # uncaptured: no BEGIN yet
            row(ORDERS, "c", after=(1, 1)),
            row(ORDERS, "d", before=(1, 1)),
        )
    )
    out = decoded(records)
    assert [(t, v and v.get("status", v.get("op"))) for t, _, v, _ in out] == [
        ("srv.transaction", "BEGIN"),
        ("srv.shop.orders", "c"),
        ("srv.shop.orders", "d"),
        ("srv.shop.orders", None),
        ("srv.transaction", "END"),
    ]
    assert out[0][2]["id"] == "0-1-6" and out[-1][2]["event_count"] == 2
    # BEGIN and the first event are one tracker entry: acknowledging BEGIN alone commits nothing.
    assert records[0][1] == records[1][1] != records[2][1]
    tracker.ack(records[0][1])
    assert tracker.take_committable() is None
    tracker.ack(records[1][1])
    assert tracker.take_committable() == {
        "source": {"file": "f.000001", "pos": 6},
        "in_txn": True,
        "rows_done": 2,
        "schema_seq": 0,
    }


def test_without_transaction_metadata_there_is_no_begin_or_end(tmp_path):
    d = Dispatcher(config(tmp_path, "provide.transaction.metadata: false\n"), FakeSource(), AckTracker())
    out = decoded(d.process(transaction(2, row(ORDERS, "c", after=(1, 1)))))
    assert [t for t, *_ in out] == ["srv.shop.orders"]


LOG = [
    *transaction(10, row(CUSTOMERS, "c", after=(1, "a", "A")), row(ORDERS, "c", after=(1, 1))),
    *transaction(20, row(SECRETS, "c", after=(1,)), row(SECRETS, "c", after=(2,))),
    *transaction(
        30,
        row(SECRETS, "c", after=(3,)),
        row(CUSTOMERS, "u", (1, "a", "A"), (1, "b", "A")),
        row(SECRETS, "d", before=(3,)),
        row(ORDERS, "d", before=(1, 1)),
        row(CUSTOMERS, "u", (1, "b", "A"), (2, "b", "A")),  # key change: two events
    ),
]


def read_from(offset) -> list:
    """The log as a connector resumes it from `offset`: inside a transaction from its
    start, else right after the position."""
    if offset is None:
        return LOG
    for i, item in enumerate(LOG):
        if offset["in_txn"] and isinstance(item, TransactionBegin) and item.restart == offset["source"]:
            return LOG[i:]
        if not offset["in_txn"] and isinstance(item, TransactionCommit) and item.position == offset["source"]:
            return LOG[i + 1 :]
    raise AssertionError(f"no such position {offset}")


def test_a_crash_after_any_acknowledged_prefix_delivers_each_begin_exactly_once(tmp_path):
    full = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker()).process(LOG))
    assert statuses(full) == ["BEGIN", "END", "BEGIN", "END"]
    entries = len(
        {entry for _, entry in Dispatcher(config(tmp_path), FakeSource(), AckTracker()).process(LOG)}
    )
    for acked in range(entries + 1):
        # The sink acknowledged the records of the first `acked` entries, then the streamer died.
        tracker = AckTracker()
        run = Dispatcher(config(tmp_path), FakeSource(), tracker).process(LOG)
        first = sorted({entry for _, entry in run})[:acked]
        done = [(r, e) for r, e in run if e in first]
        for _, entry in done:
            tracker.ack(entry)
        committed = tracker.take_committable()
        resumed = Dispatcher(config(tmp_path), FakeSource(), AckTracker(), resume=committed)
        after = decoded(resumed.process(read_from(committed)))
        assert without_processing_time(decoded(done) + after) == without_processing_time(full), acked


def test_a_restart_inside_a_transaction_before_its_first_captured_row_emits_its_begin_once(tmp_path):
    items = transaction(30, row(SECRETS, "c", after=(3,)), row(ORDERS, "c", after=(3, 3)))
    resume = {"source": {"file": "f.000001", "pos": 30}, "in_txn": True, "rows_done": 1, "schema_seq": 0}
    out = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker(), resume=resume).process(items))
    assert [(t, v.get("status", v.get("op"))) for t, _, v, _ in out] == [
        ("srv.transaction", "BEGIN"),
        ("srv.shop.orders", "c"),
        ("srv.transaction", "END"),
    ]


def test_a_release_record_opens_its_transaction_and_keeps_numbers_across_a_restart(tmp_path):
    items = transaction(40, release(ORDERS), row(ORDERS, "c", after=(5, 5)))
    full = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker()).process(items))
    assert [t for t, *_ in full] == [
        "srv.transaction",
        "srv.snapshot_releases",
        "srv.shop.orders",
        "srv.transaction",
    ]
    assert full[0][2]["status"] == "BEGIN" and full[1][2]["transaction"]["total_order"] == 1
    assert full[1][1] == {"data_collection": "shop.orders", "window": "w1"}
    assert full[1][2]["data_collection"] == "shop.orders"
    assert full[-1][2]["event_count"] == 2
    # Restart after the release was delivered: no second BEGIN, and the row keeps total_order 2.
    resume = {"source": {"file": "f.000001", "pos": 40}, "in_txn": True, "rows_done": 1, "schema_seq": 0}
    resumed = decoded(Dispatcher(config(tmp_path), FakeSource(), AckTracker(), resume=resume).process(items))
    assert without_processing_time(resumed) == without_processing_time(full[2:])


def test_offsets_inside_a_synthetic_transaction_name_it(tmp_path):
    """A restart inside a read-only release must replay it, whichever of its records was
    the last delivered: every offset inside it names the synthetic transaction."""
    tracker = AckTracker()
    d = Dispatcher(config(tmp_path), FakeSource(), tracker)
    position = {"file": "f.000001", "pos": 50}
    items = [
        TransactionBegin("snapshot-window-w1", 0, 50, 1000, position, synthetic="w1"),
        row(ORDERS, "r", after=(1, 1)),
        row(ORDERS, "r", after=(2, 2)),
        TransactionCommit(position, 1000),
    ]
    records = d.process(items)
    assert statuses(decoded(records)) == ["BEGIN", "END"]
    for _, entry in records[:-1]:
        tracker.ack(entry)
    assert tracker.take_committable() == {
        "source": position,
        "in_txn": True,
        "rows_done": 2,
        "schema_seq": 0,
        "synthetic": "w1",
    }


def test_a_crash_inside_a_transaction_that_cannot_be_read_again_closes_what_was_delivered(tmp_path):
    """A copy batch (Vitess) is read again from its start at a newer snapshot, not as it
    was: no row of it is suppressed after a restart, and the delivered part gets its END
    first, so a consumer waiting for complete transactions is never left waiting."""
    restart = {"file": "f.000001", "pos": 70}
    items = [
        TransactionBegin("copy-1", 1, 70, 1000, restart, replayable=False),
        row(ORDERS, "c", after=(1, 1)),
        row(ORDERS, "c", after=(2, 2)),
        TransactionCommit({"file": "f.000001", "pos": 71}, 1000),
    ]
    tracker = AckTracker()
    run = Dispatcher(config(tmp_path), FakeSource(), tracker).process(items)
    first_row_entry = run[1][1]  # BEGIN and the first row share an entry
    for _, entry in run:
        if entry == first_row_entry:
            tracker.ack(entry)
    committed = tracker.take_committable()
    assert committed["source"] == restart and not committed["in_txn"], "resumed inside a batch"
    assert committed["interrupted"]["id"] == "copy-1" and committed["interrupted"]["total"] == 1

    again = [
        TransactionBegin("copy-2", 1, 72, 1000, restart, replayable=False),
        row(ORDERS, "c", after=(1, 1)),
        row(ORDERS, "c", after=(2, 2)),
        TransactionCommit({"file": "f.000001", "pos": 73}, 1000),
    ]
    resumed = decoded(
        Dispatcher(config(tmp_path), FakeSource(), AckTracker(), resume=committed).process(again)
    )
    summary = [(v.get("status") or v["op"], v.get("id") or v["transaction"]["id"]) for _, _, v, _ in resumed]
    assert summary == [
        ("END", "copy-1"),  # the cut batch, closed with what was delivered of it
        ("BEGIN", "copy-2"),
        ("c", "copy-2"),  # nothing suppressed: the batch is copied again whole
        ("c", "copy-2"),
        ("END", "copy-2"),
    ]
    assert resumed[0][2]["event_count"] == 1
    assert resumed[0][2]["data_collections"] == [{"data_collection": "shop.orders", "event_count": 1}]


# ---------------------------------------------------------------- schemas by reference


def test_schemaless_values_name_their_schema_written_once_per_run_ahead_of_them(tmp_path):
    def run():
        c = config(tmp_path, "provide.transaction.metadata: true\n")
        c = dataclasses.replace(c, values={**c.values, "tidemark.schema.references": True})
        return decoded(Dispatcher(c, FakeSource(), AckTracker()).process(items), context=True)

    items = transaction(
        3,
        row(CUSTOMERS, "c", after=(1, "a", "A")),
        row(ORDERS, "c", after=(10, 5)),
        row(CUSTOMERS, "u", before=(1, "a", "A"), after=(1, "a", "B")),
        row(CUSTOMERS, "d", before=(1, "a", "B")),
    )
    out = run()
    assert [t for t, *_ in out] == [
        "srv.schemas", "srv.transaction", "srv.schemas", "srv.shop.customers", "srv.schemas",
        "srv.shop.orders", "srv.shop.customers", "srv.shop.customers", "srv.shop.customers", "srv.transaction",
    ]  # fmt: skip
    schemas = {k["id"]: v for t, k, v, _ in out if t == "srv.schemas"}
    assert {v["topic"] for v in schemas.values()} == {
        "srv.transaction",
        "srv.shop.customers",
        "srv.shop.orders",
    }
    for topic, _, value, headers in out:
        if topic == "srv.schemas":
            continue
        if value is None:  # a tombstone has no value to type
            assert "__tidemark.schema" not in headers
            continue
        named = schemas[headers["__tidemark.schema"].decode()]
        assert named["topic"] == topic and "payload" not in value and "schema" not in value
        if topic != "srv.transaction":
            assert named["schema"]["name"] == f"{topic}.Envelope"
            assert [f["field"] for f in named["schema"]["fields"]][:2] == ["before", "after"]
    assert [t for t, *_ in run()][:3] == ["srv.schemas", "srv.transaction", "srv.schemas"]  # a new run: again
