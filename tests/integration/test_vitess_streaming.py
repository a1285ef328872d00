"""The Vitess connector on a two-shard keyspace behind the VTGate double: a transaction
spanning both shards, `kill -9` of the streamer and of VTGate, DDL mid-stream, and the
type mapping of seed 004 for both of VStream's phases (the copy phase and the binlog)."""

from __future__ import annotations

import datetime as dt
import json
import signal
import time
import uuid
from collections import defaultdict
from decimal import Decimal

import pytest

from cdc_core.events.ordering import OrderKey
from tests.support.streamer import payloads, read_log, running_in_process, start_process, wait_for
from tests.support.vtgate.cluster import vitess_connector

pytestmark = pytest.mark.integration


@pytest.fixture
def keyspace(vitess):
    name = f"vt_{uuid.uuid4().hex[:10]}"
    name = vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(32), qty INT)")
    yield name
    vitess.drop_keyspace(name)


def ids_on(vitess, keyspace: str, shard: str, count: int, start: int = 1) -> list[int]:
    found, i = [], start
    while len(found) < count:
        if vitess.shard_of(keyspace, i) == shard:
            found.append(i)
        i += 1
    return found


def insert(vitess, keyspace: str, ids: list[int], name: str = "x") -> None:
    """One application transaction: a transaction on every shard it touches."""
    todo: dict[str, list] = defaultdict(list)
    for i in ids:
        todo[vitess.shard_of(keyspace, i)].append(
            ("INSERT INTO items (id, name, qty) VALUES (%s, %s, %s)", (i, name, i))
        )
    vitess.write(keyspace, todo)


def test_a_transaction_spanning_two_shards_is_one_transaction_per_shard_in_order(vitess, keyspace, tmp_path):
    c = vitess_connector(vitess, tmp_path, keyspace)
    low, high = ids_on(vitess, keyspace, "-80", 3), ids_on(vitess, keyspace, "80-", 2)
    with running_in_process(c) as streamer:
        wait_for(lambda: streamer.committed is not None, 30, message="the first position")
        insert(vitess, keyspace, [*low, *high])
        for i in (*low, *high):
            todo = {vitess.shard_of(keyspace, i): [("UPDATE items SET qty = qty + 1 WHERE id = %s", (i,))]}
            vitess.write(keyspace, todo)
        wait_for(lambda: len(payloads(c, f"tm.{keyspace}.items")) >= 10, 60, message="the events")
    events = payloads(c, f"tm.{keyspace}.items")
    assert sorted(e["after"]["id"] for e in events if e["op"] == "c") == sorted([*low, *high])
    for e in events:
        shard = vitess.shard_of(keyspace, e["after"]["id"])
        assert e["source"]["shard"] == shard and e["source"]["keyspace"] == keyspace
        assert e["source"]["connector"] == "vitess" and e["source"]["db"] == ""
        vgtid = json.loads(e["source"]["vgtid"])
        assert {s["shard"] for s in vgtid} == {"-80", "80-"}
        assert e["transaction"]["id"] == e["source"]["vgtid"]  # seed 004: the VGTID is the id
    # the application transaction became one transaction per shard: 3 rows and 2 rows
    boundaries = payloads(c, "tm.transaction")
    ends = [b["event_count"] for b in boundaries if b["status"] == "END"]
    assert sorted(ends[:2]) == [2, 3] and ends[2:] == [1] * 5
    # per shard, in log order, every event's order key is above the one before
    for shard in ("-80", "80-"):
        keys = [
            OrderKey.from_transaction_block(e["transaction"]) for e in events if e["source"]["shard"] == shard
        ]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), shard
        # the rank is the shard's GTID sequence (MariaDB flavor: domain-server-sequence)
        last = json.loads(
            next(e for e in reversed(events) if e["source"]["shard"] == shard)["source"]["vgtid"]
        )
        gtid = next(s["gtid"] for s in last if s["shard"] == shard)
        assert keys[-1].rank == int(gtid.rsplit("-", 1)[1])


def identity(event: dict) -> str:
    return json.dumps(
        {k: v for k, v in event.items() if k not in ("ts_ms", "ts_us", "ts_ns")}, sort_keys=True
    )


def test_kill_9_of_the_streamer_and_of_vtgate_loses_nothing_and_repeats_identically(
    vitess, keyspace, tmp_path
):
    c = vitess_connector(vitess, tmp_path, keyspace, {"max.batch.size": 200})
    topic = f"tm.{keyspace}.items"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        time.sleep(1)
        insert(vitess, keyspace, list(range(1, 12_001)))  # two large shard transactions
        wait_for(lambda: len(read_log(c, topic)) > 2000, 60, message="part of the transactions")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = start_process(c)
        wait_for(lambda: len(read_log(c, topic)) > 7000, 90, message="more of the transactions")
        vitess.kill()  # VTGate gone mid-stream: the streamer retries until it is back
        time.sleep(2)
        vitess.start()
        for i in range(12_001, 12_101):
            insert(vitess, keyspace, [i])
        wait_for(
            lambda: len({e["after"]["id"] for e in payloads(c, topic)}) >= 12_100, 120, message="every row"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        if vitess.process is None or vitess.process.poll() is not None:
            vitess.start()
    events = payloads(c, topic)
    by_key: dict[int, set[str]] = defaultdict(set)
    for e in events:
        by_key[e["after"]["id"]].add(identity(e))
    assert len(by_key) == 12_100
    repeated = {k: v for k, v in by_key.items() if len(v) > 1}
    assert not repeated, f"repeats differ from what was delivered first: {list(repeated.items())[:2]}"
    ends = [b for b in payloads(c, "tm.transaction") if b["status"] == "END"]
    assert {b["id"] for b in ends} >= {e["transaction"]["id"] for e in events}


def test_after_kill_9_what_was_handed_on_comes_back_in_the_same_shard_order(vitess, keyspace, tmp_path):
    """A transaction's id is its VGTID, which holds the other shards' positions too, and
    VStream interleaves the shards differently on every call: the repeats of a restart
    keep the order the shards were first handed on in, so they are byte for byte the
    first deliveries (a consumer waiting for a transaction's END would otherwise wait
    forever for the first, cut delivery's)."""
    low, high = ids_on(vitess, keyspace, "-80", 6), ids_on(vitess, keyspace, "80-", 6)
    c = vitess_connector(vitess, tmp_path, keyspace)
    with running_in_process(c) as streamer:  # a committed position before the writes
        wait_for(lambda: streamer.committed is not None, 30, message="the first position")
    c = vitess_connector(vitess, tmp_path, keyspace, {"offset.flush.interval.ms": 600_000})
    topic = f"tm.{keyspace}.items"
    proc = start_process(c)
    try:
        for n, (a, b) in enumerate(zip(low, high, strict=True)):  # -80, 80-, -80, ...: one at a time
            insert(vitess, keyspace, [a])
            wait_for(lambda n=n: len(read_log(c, topic)) == 2 * n + 1, 30, message="the -80 row")
            insert(vitess, keyspace, [b])
            wait_for(lambda n=n: len(read_log(c, topic)) == 2 * n + 2, 30, message="the 80- row")
        proc.send_signal(signal.SIGKILL)  # nothing committed since the first position
        proc.wait()
        proc = start_process(c)
        wait_for(lambda: len(read_log(c, topic)) >= 24, 60, message="the repeats")
        time.sleep(1)
    finally:
        if proc.poll() is None:
            proc.kill()
    events = payloads(c, topic)
    first, repeated = events[:12], events[12:]
    assert [e["after"]["id"] for e in first] == [i for pair in zip(low, high, strict=True) for i in pair]
    assert [identity(e) for e in repeated] == [identity(e) for e in first]
    ends = [identity(b) for b in payloads(c, "tm.transaction") if b["status"] == "END"]
    assert len(ends) == 24 and ends[12:] == ends[:12]


def test_a_column_added_mid_stream_is_in_the_events_after_it_and_in_the_schema_change_topic(
    vitess, keyspace, tmp_path
):
    c = vitess_connector(vitess, tmp_path, keyspace)
    row = ids_on(vitess, keyspace, "-80", 2)
    with running_in_process(c) as streamer:
        wait_for(lambda: streamer.committed is not None, 30, message="the first position")
        insert(vitess, keyspace, [row[0]])
        vitess.execute(keyspace, "ALTER TABLE items ADD COLUMN note VARCHAR(16) DEFAULT 'n'")
        insert(vitess, keyspace, [row[1]])
        wait_for(lambda: len(payloads(c, f"tm.{keyspace}.items")) >= 2, 60, message="the events")
        wait_for(lambda: len(read_log(c, "tm")) >= 3, 60, message="the schema changes")
    before, after = payloads(c, f"tm.{keyspace}.items")
    assert "note" not in before["after"] and after["after"]["note"] == "n"
    changes = [v for _, v, _ in read_log(c, "tm")]
    ddl = [v for v in changes if v["ddl"]]
    assert len(ddl) == 2 and all("ADD COLUMN note" in v["ddl"] for v in ddl)  # one per shard, as Debezium
    described = [v for v in changes if not v["ddl"] and v["tableChanges"]]
    columns = [col["name"] for col in described[-1]["tableChanges"][0]["table"]["columns"]]
    assert columns == ["id", "name", "qty", "note"]


TYPES = {
    "ti": ("TINYINT", -128, -128),
    "bo": ("BOOLEAN", 1, 1),
    "us": ("SMALLINT UNSIGNED", 65535, 65535),
    "mi": ("MEDIUMINT", -8388608, -8388608),
    "ui": ("INT UNSIGNED", 4294967295, 4294967295),
    "bi": ("BIGINT", -(2**63), -(2**63)),
    "ub": ("BIGINT UNSIGNED", 2**64 - 1, "18446744073709551615"),
    "fl": ("FLOAT", 1.1, 1.100000023841858),
    "db": ("DOUBLE", 3.14, 3.14),
    "de": ("DECIMAL(5,2)", Decimal("0.50"), "0.50"),
    "dn": ("DECIMAL(20,0)", Decimal(1), "1"),
    "ch": ("CHAR(4)", "ab", "ab"),
    "vc": ("VARCHAR(16)", "héllo", "héllo"),
    "tx": ("TEXT", "long text", "long text"),
    "bn": ("BINARY(4)", b"ab", "YWIAAA=="),
    "vb": ("VARBINARY(8)", b"\x00\xff", "AP8="),
    "bl": ("BLOB", b"blob", "YmxvYg=="),
    "en": ("ENUM('small','medium','large')", "medium", "medium"),
    "st": ("SET('a','b','c')", "a,c", "a,c"),
    "yr": ("YEAR", 2024, 2024),
    "b1": ("BIT(1)", 1, True),
    "bt": ("BIT(12)", 2053, "CAU="),
    "dt": ("DATE", dt.date(2020, 1, 2), 18263),
    "tm": ("TIME(3)", "-01:02:03.250", -3_723_250_000),
    "d0": ("DATETIME", dt.datetime(2018, 6, 20, 6, 37, 3), 1529476623000),
    "d6": ("DATETIME(6)", dt.datetime(2018, 6, 20, 6, 37, 3, 123), 1529476623000123),
    "ts": ("TIMESTAMP(3) NULL", dt.datetime(2020, 2, 13, 1, 2, 3, 120000), "2020-02-13T01:02:03.120Z"),
    "js": ("JSON", '{"a": 1}', '{"a": 1}'),
}


def test_the_seeds_type_mapping_in_the_copy_phase_and_in_the_binlog(vitess, tmp_path):
    """Every type of seed 004's table, once copied (snapshot.mode: initial) and once
    streamed: the same event value from both VStream phases' text forms."""
    name = f"vt_{uuid.uuid4().hex[:10]}"
    name = vitess.create_keyspace(name, {"0": 0})
    try:
        columns = ", ".join(f"{col} {kind}" for col, (kind, _, _) in TYPES.items())
        vitess.execute(name, f"CREATE TABLE typed (id INT PRIMARY KEY, {columns})")
        marks = ", ".join(["%s"] * (len(TYPES) + 1))
        values = [v for _, v, _ in TYPES.values()]
        statement = f"INSERT INTO typed VALUES ({marks})"
        vitess.write(name, {"0": [(statement, [1, *values])]})  # there before the connector: copied
        c = vitess_connector(vitess, tmp_path, name, {"snapshot.mode": "initial"})
        with running_in_process(c) as streamer:
            wait_for(lambda: payloads(c, f"tm.{name}.typed"), 60, message="the copied row")
            vitess.write(name, {"0": [(statement, [2, *values])]})  # streamed from the binlog
            wait_for(lambda: len(payloads(c, f"tm.{name}.typed")) >= 2, 60, message="the streamed row")
            assert streamer.committed is not None
        copied, streamed = payloads(c, f"tm.{name}.typed")[:2]
        assert copied["op"] == "c" and copied["source"]["snapshot"] == "false"  # as Debezium's copy phase
        for col, (_kind, _value, expected) in TYPES.items():
            assert copied["after"][col] == expected, f"{col} (copy phase): {copied['after'][col]!r}"
            assert streamed["after"][col] == expected, f"{col} (binlog): {streamed['after'][col]!r}"
        schema = {f["field"]: f for f in read_log_schema(c, f"tm.{name}.typed")}
        assert schema["ts"]["name"] == "io.debezium.time.ZonedTimestamp"
        assert schema["en"]["parameters"] == {"allowed": "small,medium,large"}
        assert schema["ub"]["type"] == "string" and schema["fl"]["type"] == "double"
    finally:
        vitess.drop_keyspace(name)


def read_log_schema(c, topic: str) -> list[dict]:
    from tests.support.streamer import read_raw

    _, value, _ = read_raw(c, topic)[-1]
    envelope = value["schema"]["fields"]
    return next(f for f in envelope if f["field"] == "after")["fields"]
