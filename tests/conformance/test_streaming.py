"""Conformance: streaming. Every source gives every operation its Debezium envelope, a key
change as delete + tombstone + create with the newkey/oldkey headers, BEGIN/END around
each transaction with total and per-table order, the ordered transaction metadata on every
event, and survives `kill -9` inside a large transaction with nothing lost and every
repeat identical."""

from __future__ import annotations

import json
import signal
from collections import defaultdict

import pytest

from cdc_core.events.ordering import OrderKey
from tests.conformance.source_fixture import Delete, Insert, Update, insert_rows
from tests.support.streamer import (
    payloads,
    read_log,
    running_in_process,
    start_process,
    stop_process,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def test_every_operation_has_its_envelope_key_change_headers_and_tombstone(source, ns, tmp_path):
    source.create_table(ns, "people", {"id": "int", "name": "text"}, ["id"])
    c = source.connector(tmp_path, ns)
    topic = source.topic(c, ns, "people")
    with running_in_process(c):
        source.apply(ns, insert_rows("people", [{"id": 1, "name": "Ann"}, {"id": 2, "name": "Bob"}]))
        source.apply(ns, [Update("people", {"id": 1}, {"name": "Anna"})])
        source.apply(ns, [Update("people", {"id": 2}, {"id": 20})])  # a key change
        source.apply(ns, [Delete("people", {"id": 1})])
        wait_for(lambda: len(read_log(c, topic)) >= 8, 60, message="the events")
    records = read_log(c, topic)
    shape = [(source.key(k), None if v is None else v["op"]) for k, v, _ in records]
    assert shape == [
        ({"id": 1}, "c"),
        ({"id": 2}, "c"),
        ({"id": 1}, "u"),
        ({"id": 2}, "d"),
        ({"id": 2}, None),  # the old key's tombstone
        ({"id": 20}, "c"),
        ({"id": 1}, "d"),
        ({"id": 1}, None),
    ]
    values = [v for _, v, _ in records]
    row = source.row
    assert values[0]["before"] is None and row(values[0]["after"]) == {"id": 1, "name": "Ann"}
    assert row(values[2]["after"]) == {"id": 1, "name": "Anna"}
    if values[2]["before"] is not None or source.key_change_headers:  # a document source's update
        assert row(values[2]["before"]) == {"id": 1, "name": "Ann"}  # has no before image by default
    assert values[6]["after"] is None
    if values[6]["before"] is not None or source.key_change_headers:
        assert row(values[6]["before"]) == {"id": 1, "name": "Anna"}
    headers = [h for _, _, h in records]
    if source.key_change_headers:
        assert source.key(json.loads(headers[3]["__debezium.newkey"])["payload"]) == {"id": 20}
        assert source.key(json.loads(headers[5]["__debezium.oldkey"])["payload"]) == {"id": 2}
    for event in (v for v in values if v is not None):
        assert event["source"]["connector"] == source.connector_name()
        assert event["source"]["snapshot"] == "false" and isinstance(event["ts_ms"], int)


def test_transactions_carry_begin_end_and_every_event_the_ordered_metadata(source, ns, tmp_path):
    source.create_table(ns, "a", {"id": "int", "v": "int"}, ["id"])
    source.create_table(ns, "b", {"id": "int", "v": "int"}, ["id"])
    c = source.connector(tmp_path, ns, {"provide.transaction.metadata": True})
    with running_in_process(c):
        source.apply(
            ns,
            [Insert("a", {"id": 1, "v": 1}), Insert("b", {"id": 1, "v": 1}), Insert("a", {"id": 2, "v": 1})],
        )
        source.apply(ns, [Update("a", {"id": 1}, {"v": 2}), Update("b", {"id": 1}, {"v": 2})])
        for v in range(3, 8):  # lone changes: each its own transaction, or in none
            source.apply(ns, [Update("a", {"id": 1}, {"v": v})])

        def events() -> list[dict]:
            return payloads(c, source.topic(c, ns, "a")) + payloads(c, source.topic(c, ns, "b"))

        transactions = 2 if source.standalone_changes else 7
        wait_for(
            lambda: len(payloads(c, f"{c.prefix}.transaction")) >= 2 * transactions and len(events()) >= 10,
            60,
            message="BEGIN and END records",
        )
    by_txn = defaultdict(list)
    for e in events():
        by_txn[e["transaction"]["id"]].append(e)
    if source.standalone_changes:  # in no transaction, yet ordered
        lone = by_txn.pop(None)
        assert [
            (e["transaction"]["total_order"], e["transaction"]["data_collection_order"]) for e in lone
        ] == [(1, 1)] * 5
    assert len(by_txn) == transactions
    boundaries = payloads(c, f"{c.prefix}.transaction")
    begins = [b for b in boundaries if b["status"] == "BEGIN"]
    ends = {b["id"]: b for b in boundaries if b["status"] == "END"}
    assert sorted(b["id"] for b in begins) == sorted(by_txn) == sorted(ends)
    first = sorted(by_txn[begins[0]["id"]], key=lambda e: e["transaction"]["total_order"])
    assert [e["transaction"]["total_order"] for e in first] == [1, 2, 3]
    assert [e["transaction"]["data_collection_order"] for e in first] == [1, 1, 2]
    assert ends[begins[0]["id"]]["event_count"] == 3
    counts = {d["data_collection"]: d["event_count"] for d in ends[begins[0]["id"]]["data_collections"]}
    assert counts == {source.collection(ns, "a"): 2, source.collection(ns, "b"): 1}
    # The ordered metadata rule: in log order every event's order key is greater than the
    # one before (so the newest event of a key is the one with the greatest key).
    in_log = [v for _, v, _ in read_log(c, source.topic(c, ns, "a")) if v is not None]
    keys = [OrderKey.from_transaction_block(e["transaction"]) for e in in_log]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    newest = max(in_log, key=lambda e: OrderKey.from_transaction_block(e["transaction"]))
    assert source.row(newest["after"]) == {"id": 1, "v": 7}


def identity(event: dict) -> str:
    """What a repeat must carry identically: all but the envelope's processing times."""
    return json.dumps(
        {k: v for k, v in event.items() if k not in ("ts_ms", "ts_us", "ts_ns")}, sort_keys=True
    )


def test_kill_9_inside_a_large_transaction_loses_nothing_and_repeats_identically(source, ns, tmp_path):
    rows, kills = 20_000, 2
    source.create_table(ns, "t", {"id": "int", "payload": "text"}, ["id"])
    c = source.connector(tmp_path, ns, {"max.batch.size": 256})
    topic = source.topic(c, ns, "t")
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        source.apply(
            ns, insert_rows("t", ({"id": i, "payload": f"row {i} " + "x" * 40} for i in range(rows)))
        )
        seen_at_kill = []
        for k in range(kills):
            target = rows * (k + 1) // (kills + 1)
            wait_for(lambda t=target: len(read_log(c, topic)) >= t, 120, interval=0.02, message="events")
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            seen_at_kill.append(len(read_log(c, topic)))
            proc = start_process(c)
        wait_for(lambda: len({identity(e) for e in payloads(c, topic)}) >= rows, 180, message="every row")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = payloads(c, topic)
    by_order = defaultdict(set)
    for e in events:
        by_order[e["transaction"]["total_order"]].add(identity(e))
    assert sorted(by_order) == list(range(1, rows + 1))  # every row of the transaction, once numbered
    assert all(len(v) == 1 for v in by_order.values())  # and a repeat is identical
    assert sorted({source.row(e["after"])["id"] for e in events}) == list(range(rows))
    assert len({e["transaction"]["id"] for e in events}) == 1
    assert seen_at_kill == sorted(seen_at_kill)
    assert len(events) - rows < rows  # only an unacknowledged tail repeats


def test_a_column_added_mid_stream_is_in_every_event_after_it(source, ns, tmp_path):
    if not source.schema_changes:
        pytest.skip(
            f"{source.name}: documents have no columns to add (a new field is in the documents that have it)"
        )
    source.create_table(ns, "t", {"id": "int", "v": "int"}, ["id"])
    c = source.connector(tmp_path, ns, {"include.schema.changes": True})
    topic = source.topic(c, ns, "t")
    with running_in_process(c):
        source.apply(ns, [Insert("t", {"id": 1, "v": 1})])
        source.add_column(ns, "t", "note", "text")
        source.apply(ns, [Insert("t", {"id": 2, "v": 2, "note": "new"}), Update("t", {"id": 1}, {"v": 3})])
        wait_for(lambda: len(payloads(c, topic)) >= 3, 60, message="the events")
    first, second, third = payloads(c, topic)
    assert first["after"] == {"id": 1, "v": 1}
    assert second["after"] == {"id": 2, "v": 2, "note": "new"}
    assert third["before"] == {"id": 1, "v": 1, "note": None} and third["after"] == {
        "id": 1,
        "v": 3,
        "note": None,
    }
    changes = payloads(c, c.prefix)  # the schema-change topic: the new definition of t
    assert any(
        [col["name"] for col in change["table"]["columns"]] == ["id", "v", "note"]
        for event in changes
        for change in event.get("tableChanges", [])
    )
