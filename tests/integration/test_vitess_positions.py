"""Where a Vitess stream starts and what keeps it alive: an explicit VGTID per shard
(`vitess.shard`, `vitess.gtid`), VTGate's heartbeats, and the tablets' keyspace
heartbeats streamed as `<keyspace>.heartbeat` rows when asked for."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.support.streamer import payloads, read_log, running_in_process, wait_for
from tests.support.vtgate.cluster import vitess_connector

pytestmark = pytest.mark.integration


@pytest.fixture
def keyspace(vitess):
    name = f"ps_{uuid.uuid4().hex[:10]}"
    name = vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE items (id INT PRIMARY KEY, v INT)")
    yield name
    vitess.drop_keyspace(name)


def write(vitess, keyspace: str, key: int) -> None:
    vitess.write(keyspace, {vitess.shard_of(keyspace, key): [("INSERT INTO items VALUES (%s, 1)", (key,))]})


def test_a_stream_starts_at_the_vgtid_given_for_each_shard(vitess, keyspace, tmp_path):
    write(vitess, keyspace, 1)
    start = [{"keyspace": keyspace, "shard": s, "gtid": vitess.position(keyspace, s)} for s in ("-80", "80-")]
    for key in (2, 3, 4, 5):
        write(vitess, keyspace, key)
    extra = {"vitess.shard": "-80,80-", "vitess.gtid": json.dumps(start)}
    c = vitess_connector(vitess, tmp_path, keyspace, extra)
    with running_in_process(c):
        write(vitess, keyspace, 6)
        wait_for(lambda: len(payloads(c, f"tm.{keyspace}.items")) >= 5, 60, message="the events")
    assert sorted(e["after"]["id"] for e in payloads(c, f"tm.{keyspace}.items")) == [2, 3, 4, 5, 6]


def test_a_vgtid_for_other_shards_than_vitess_shard_is_refused_by_name(vitess, keyspace, tmp_path):
    start = [{"keyspace": keyspace, "shard": "-80", "gtid": vitess.position(keyspace, "-80")}]
    c = vitess_connector(
        vitess, tmp_path, keyspace, {"vitess.shard": "-80,80-", "vitess.gtid": json.dumps(start)}
    )
    with running_in_process(c) as streamer:
        wait_for(lambda: streamer.exit_reason, 30, message="the refusal")
    assert "vitess.gtid" in streamer.exit_reason and "vitess.shard" in streamer.exit_reason


def test_heartbeats_from_vtgate_and_the_keyspace_heartbeat_rows(vitess, keyspace, tmp_path):
    extra = {
        "vitess.stream.keyspace.heartbeats": True,
        "heartbeat.interval.ms": 1000,
        "table.include.list": f"{keyspace}\\.items,{keyspace}\\.heartbeat",
    }
    c = vitess_connector(vitess, tmp_path, keyspace, extra)
    with running_in_process(c) as streamer:
        wait_for(lambda: streamer.committed is not None, 30, message="the first position")
        for shard, index in (("-80", 0), ("80-", 1)):  # what a tablet's heartbeat writer does
            with vitess.server(index) as conn, conn.cursor() as cur:
                for tick in range(2):
                    cur.execute(
                        "INSERT INTO _vt.heartbeat VALUES (%s, 101, %s) ON DUPLICATE KEY UPDATE ts = VALUES(ts)",
                        (f"{keyspace}:{shard}", time.time_ns() + tick),
                    )
        wait_for(
            lambda: len(payloads(c, f"tm.{keyspace}.heartbeat")) >= 4, 60, message="the keyspace heartbeats"
        )
        wait_for(lambda: read_log(c, "__debezium-heartbeat.tm"), 30, message="Tidemark's heartbeat")
    beats = payloads(c, f"tm.{keyspace}.heartbeat")
    assert {b["source"]["shard"] for b in beats} == {"-80", "80-"}
    assert [b["op"] for b in beats if b["source"]["shard"] == "-80"] == ["c", "u"]
    assert all(b["after"]["tabletUid"] == 101 for b in beats)
