"""`snapshot.mode: when_needed`: a committed position the source can no longer resume
from (an oplog that rolled over, purged binlogs) does not stop the streamer. It says so
loudly, starts again at the source's position now and snapshots every captured table;
everything written while it was down reaches the log as the snapshot reads it, with order
keys above every event delivered before, so a consumer applying them ends equal to the
source. A row deleted while the position was lost stays downstream: no event tells of it
(as documented). Without when_needed the streamer stops with the way back, as before."""

from __future__ import annotations

import uuid

import pytest
from bson import json_util

from tests.support.mongo.capture import AS_CLIENT, connector, synced
from tests.support.snapshots import finished, status
from tests.support.streamer import (
    admin,
    payloads,
    read_log,
    running_in_process,
    start_process,
    stop_process,
    topic,
    wait_for,
    write_connector,
)

pytestmark = pytest.mark.integration


def applied_documents(c, table_topic: str) -> dict:
    """`_id` → document, the topic applied in log order."""
    state = {}
    for key, value, _ in read_log(c, table_topic):
        _id = json_util.loads(key["id"], json_options=AS_CLIENT)
        if value is None or value["op"] == "d":
            state.pop(_id, None)
        else:
            state[_id] = json_util.loads(value["after"], json_options=AS_CLIENT)
    return state


def test_a_change_stream_position_the_oplog_lost_starts_again_with_a_snapshot(mongo_test_server, tmp_path):
    mongodb = mongo_test_server
    client = mongodb.client()
    db = client[f"mg_{uuid.uuid4().hex[:10]}"]
    db.create_collection("debezium_signal")
    db["t"].insert_many([{"_id": i, "v": 0} for i in range(200)])
    c = connector(
        mongodb, tmp_path, db.name, {"snapshot.mode": "when_needed", "incremental.snapshot.chunk.size": 50}
    )
    t = f"{c.prefix}.{db.name}.t"
    proc = start_process(c)
    try:
        # no offsets yet: when_needed snapshots as initial does
        wait_for(lambda: finished(c, "initial") is not None, 120, interval=0.3, message="the first snapshot")
        db["t"].update_one({"_id": 5}, {"$set": {"v": 1}})
        synced(db, c)
        assert stop_process(proc) == 0
        first_run = payloads(c, t)
        assert sum(e["op"] == "r" for e in first_run) == 200

        # while it is down: writes, a delete, and the oplog rolls over past its position
        db["t"].insert_many([{"_id": i, "v": 0} for i in range(200, 220)])
        db["t"].update_one({"_id": 5}, {"$set": {"v": 2}})
        db["t"].delete_one({"_id": 6})
        assert mongodb.forget_history()["forgotten"] > 0

        proc = start_process(c)
        wait_for(
            lambda: finished(c, "when_needed") is not None, 120, interval=0.3, message="the new snapshot"
        )
        db["t"].update_one({"_id": 7}, {"$set": {"v": 3}})  # streaming goes on
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = c.path.with_suffix(".log").read_text()
    assert "THE COMMITTED POSITION CAN NO LONGER BE RESUMED" in log and "when_needed" in log, log[-3000:]
    assert "resume token" in status(c)["position_lost"]["reason"]
    source = {d["_id"]: d for d in db["t"].find()}
    state = applied_documents(c, t)
    assert state.pop(6) == {"_id": 6, "v": 0}, "the row deleted while the position was lost"
    assert state == source
    later = [e for e in payloads(c, t)[len(first_run) :] if e["op"] in ("r", "u")]
    before = max(e["transaction"]["transaction_epoch"] for e in first_run)
    assert later and min(e["transaction"]["transaction_epoch"] for e in later) > before, (
        "events after the loss must order after every event before it"
    )
    client.drop_database(db.name)
    client.close()


def test_without_when_needed_a_lost_position_still_stops_the_streamer(mongo_test_server, tmp_path):
    mongodb = mongo_test_server
    client = mongodb.client()
    db = client[f"mg_{uuid.uuid4().hex[:10]}"]
    db.create_collection("debezium_signal")
    c = connector(mongodb, tmp_path, db.name, {"snapshot.mode": "initial"})
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        db["t"].insert_one({"_id": 1})
        synced(db, c)
        assert stop_process(proc) == 0
        db["t"].insert_one({"_id": 2})
        mongodb.forget_history()
        proc = start_process(c)
        assert proc.wait(90) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    log = c.path.with_suffix(".log").read_text()
    assert "snapshot.mode: when_needed" in log and "CAN NO LONGER BE RESUMED" not in log
    client.drop_database(db.name)
    client.close()


@pytest.mark.exclusive  # purges the binlogs every other streamer reads
def test_a_purged_binlog_position_starts_again_with_a_snapshot(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
        cur.executemany("INSERT INTO t VALUES (%s, 0)", [(i,) for i in range(100)])
    c = write_connector(
        tmp_path,
        scratch_db,
        {
            "snapshot.mode": "when_needed",
            "signal.data.collection": "tidemark.debezium_signal",
            "incremental.snapshot.chunk.size": 30,
        },
    )
    with running_in_process(c):
        wait_for(lambda: finished(c, "initial") is not None, 120, interval=0.3, message="the first snapshot")
        with db.cursor() as cur:
            cur.execute("UPDATE t SET v = 1 WHERE id = 5")
        wait_for(lambda: any(e["op"] == "u" for e in payloads(c, topic(c, scratch_db, "t"))), 60)
    first_run = payloads(c, topic(c, scratch_db, "t"))
    with db.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (500, 0)")  # written while stopped, then purged
        cur.execute("UPDATE t SET v = 2 WHERE id = 5")
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]

        def purged():
            cur.execute(f"PURGE BINARY LOGS TO '{current}'")
            cur.execute("SHOW BINARY LOGS")
            return [r[0] for r in cur.fetchall()] == [current]

        wait_for(purged, 30, interval=0.5, message="the old binlogs to be purged")
    with running_in_process(c) as streamer:
        wait_for(
            lambda: finished(c, "when_needed") is not None, 120, interval=0.3, message="the new snapshot"
        )
        with db.cursor() as cur:
            cur.execute("UPDATE t SET v = 3 WHERE id = 7")
        wait_for(
            lambda: any(e["after"] == {"id": 7, "v": 3} for e in payloads(c, topic(c, scratch_db, "t"))), 60
        )
        assert streamer.position_lost is not None
    state = {}
    for key, value, _ in read_log(c, topic(c, scratch_db, "t")):
        if value is None or value["op"] == "d":
            state.pop(key["id"], None)
        else:
            state[key["id"]] = value["after"]
    with db.cursor() as cur:
        cur.execute("SELECT id, v FROM t")
        assert state == {i: {"id": i, "v": v} for i, v in cur.fetchall()}
    later = payloads(c, topic(c, scratch_db, "t"))[len(first_run) :]
    before = max(e["transaction"]["transaction_epoch"] for e in first_run)
    assert min(e["transaction"]["transaction_epoch"] for e in later) > before
