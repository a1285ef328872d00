"""A reshard mid-stream (shard 80- split into 80-c0 and c0-, as Vitess's Reshard does):
followed onto the new shards with nothing lost and an epoch that orders the new shards'
events after their parent's, or, with `vitess.stop_on_reshard`, a stop that says where
to go on from."""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict

import pytest

from cdc_core.events.ordering import OrderKey
from tests.support.streamer import payloads, run_to_exit, start_process, stop_process, wait_for
from tests.support.vtgate.cluster import vitess_connector

pytestmark = pytest.mark.integration


@pytest.fixture
def keyspace(vitess):
    name = f"rs_{uuid.uuid4().hex[:10]}"
    name = vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE items (id INT PRIMARY KEY, v INT)")
    yield name
    vitess.drop_keyspace(name)


def write(vitess, keyspace: str, ids, v: int) -> None:
    todo: dict[str, list] = defaultdict(list)
    for i in ids:
        todo[vitess.shard_of(keyspace, i)].append(
            ("INSERT INTO items VALUES (%s, %s) ON DUPLICATE KEY UPDATE v = VALUES(v)", (i, v))
        )
    vitess.write(keyspace, todo)


def test_a_split_shard_is_followed_with_nothing_lost_and_its_keys_ordered_after_the_split(
    vitess, keyspace, tmp_path
):
    c = vitess_connector(vitess, tmp_path, keyspace)
    topic = f"tm.{keyspace}.items"
    ids = list(range(1, 201))
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        time.sleep(1)
        write(vitess, keyspace, ids, 1)
        wait_for(lambda: len(payloads(c, topic)) >= 200, 60, message="the first writes")
        vitess.split_shard(keyspace, "80-", {"80-c0": 2, "c0-": 3})
        write(vitess, keyspace, ids, 2)  # routed to -80, 80-c0 and c0- now
        wait_for(lambda: len(payloads(c, topic)) >= 400, 60, message="the writes after the split")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = payloads(c, topic)
    latest: dict[int, dict] = {}
    for e in events:
        key = e["after"]["id"]
        newer = key not in latest or OrderKey.from_transaction_block(
            e["transaction"]
        ) > OrderKey.from_transaction_block(latest[key]["transaction"])
        assert newer, f"key {key}: an event after the split orders before one from its parent shard"
        latest[key] = e
    assert {k: e["after"]["v"] for k, e in latest.items()} == dict.fromkeys(ids, 2)
    shards_after = {e["source"]["shard"] for e in events if e["after"]["v"] == 2}
    assert shards_after == {"-80", "80-c0", "c0-"}
    last = json.loads(events[-1]["source"]["vgtid"])
    assert sorted(s["shard"] for s in last) == ["-80", "80-c0", "c0-"]
    status = json.loads((c.state / "status.json").read_text())
    assert (
        sorted(json.loads(status["committed"]["source"]["vgtid"]), key=lambda s: s["shard"])[1]["shard"]
        == "80-c0"
    )


def test_stop_on_reshard_stops_after_everything_before_it_with_the_new_shards_position(
    vitess, keyspace, tmp_path
):
    c = vitess_connector(vitess, tmp_path, keyspace, {"vitess.stop_on_reshard": True})
    topic = f"tm.{keyspace}.items"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        time.sleep(1)
        write(vitess, keyspace, range(1, 101), 1)
        wait_for(lambda: len(payloads(c, topic)) >= 100, 60, message="the writes before the split")
        vitess.split_shard(keyspace, "80-", {"80-c0": 2, "c0-": 3})
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    status = json.loads((c.state / "status.json").read_text())
    assert status["state"] == "failed"
    assert (
        "was resharded" in status["error"] and "80-c0" in status["error"] and "vitess.gtid" in status["error"]
    )
    assert len(payloads(c, topic)) == 100
    again = run_to_exit(c, timeout=60)  # a restart stops at the same place, with the same words
    assert again.returncode == 1 and "was resharded" in again.stdout + again.stderr
