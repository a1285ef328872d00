"""Vitess snapshots: the initial one through VStream's copy phase, cut by `kill -9` and
resumed from its last primary key; an incremental one over both shards of a keyspace
under concurrent writes, read in windows per shard; and the whole stream merged into
Delta, equal to the union of the shards."""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import defaultdict

import pytest

from cdc_core.connectors.registry import connector_of
from cdc_core.events.ordering import OrderKey
from cdc_core.signals.sending import send_signal
from tests.support.snapshots import finished
from tests.support.streamer import payloads, read_log, start_process, stop_process, wait_for
from tests.support.vtgate.cluster import vitess_connector

pytestmark = pytest.mark.integration


@pytest.fixture
def keyspace(vitess):
    name = f"sn_{uuid.uuid4().hex[:10]}"
    name = vitess.create_keyspace(name, {"-80": 0, "80-": 1})
    vitess.execute(name, "CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL, label VARCHAR(16))")
    yield name
    vitess.drop_keyspace(name)


def seed(vitess, keyspace: str, count: int) -> None:
    todo: dict[str, list] = defaultdict(list)
    for i in range(count):
        todo[vitess.shard_of(keyspace, i)].append(("INSERT INTO items VALUES (%s, 0, %s)", (i, f"row {i}")))
    vitess.write(keyspace, todo)


def topic_bytes(connector, topic: str) -> int:
    return sum(f.stat().st_size for f in (connector.eventlog / topic).glob("**/*") if f.is_file())


def latest_rows(events: list[dict]) -> dict[int, dict]:
    """Each key's newest event by the ordered metadata, as the Delta merge picks it."""
    latest: dict[int, dict] = {}
    for e in events:
        key = (e["after"] or e["before"])["id"]
        if key not in latest or OrderKey.from_transaction_block(
            e["transaction"]
        ) > OrderKey.from_transaction_block(latest[key]["transaction"]):
            latest[key] = e
    return {k: e["after"] for k, e in latest.items() if e["after"] is not None}


def test_the_copy_phase_cut_by_kill_9_resumes_from_its_last_primary_key_and_loses_nothing(
    vitess, keyspace, tmp_path
):
    seed(vitess, keyspace, 50_000)
    c = vitess_connector(vitess, tmp_path, keyspace, {"snapshot.mode": "initial"})
    topic = f"tm.{keyspace}.items"
    proc = start_process(c)
    try:
        # the log's bytes, not its decoded records: decoding would let the copy finish unseen
        wait_for(lambda: topic_bytes(c, topic) >= 64_000, 60, interval=0.005, message="part of the copy")
        proc.kill()
        proc.wait()
        cut_at = len(read_log(c, topic))
        assert cut_at < 50_000, "the copy finished before the kill"
        todo = {vitess.shard_of(keyspace, 5): [("UPDATE items SET v = 1 WHERE id = 5", ())]}
        vitess.write(keyspace, todo)  # a change while no streamer runs
        proc = start_process(c)
        wait_for(
            lambda: len({e["after"]["id"] for e in payloads(c, topic)}) >= 50_000, 180, message="every row"
        )
        wait_for(
            lambda: latest_rows(payloads(c, topic))[5]["v"] == 1, 60, message="the change made meanwhile"
        )
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = payloads(c, topic)
    assert all(e["op"] == "c" for e in events if e["after"]["v"] == 0)  # copied rows, as Debezium's copy
    expected = {r["id"]: r for r in vitess.rows(keyspace, "items")}
    assert latest_rows(events) == expected
    ends = [b for b in payloads(c, "tm.transaction") if b["status"] == "END"]
    assert {e["transaction"]["id"] for e in events} <= {b["id"] for b in ends}, "a transaction never closed"


class Writer(threading.Thread):
    def __init__(self, vitess, keyspace: str, rows: int) -> None:
        super().__init__(daemon=True)
        self.vitess, self.keyspace = vitess, keyspace
        self.live, self.next_id = set(range(rows)), rows
        self.versions: dict[int, int] = {}
        self.stop_flag, self.error, self.changes = threading.Event(), None, 0

    def run(self) -> None:
        rng = random.Random(11)
        try:
            while not self.stop_flag.is_set():
                roll = rng.random()
                if roll < 0.1:
                    key, sql, params = (
                        self.next_id,
                        "INSERT INTO items VALUES (%s, 0, 'new')",
                        (self.next_id,),
                    )
                    self.live.add(key)
                    self.next_id += 1
                elif roll < 0.15:
                    key = rng.choice(sorted(self.live))
                    sql, params = "DELETE FROM items WHERE id = %s", (key,)
                    self.live.discard(key)
                else:
                    key = rng.choice(sorted(self.live))
                    self.versions[key] = self.versions.get(key, 0) + 1
                    sql, params = "UPDATE items SET v = %s WHERE id = %s", (self.versions[key], key)
                self.vitess.write(self.keyspace, {self.vitess.shard_of(self.keyspace, key): [(sql, params)]})
                self.changes += 1
                time.sleep(0.002)
        except Exception as exc:  # reported by the test
            self.error = exc


def test_an_incremental_snapshot_of_both_shards_under_writes_and_the_stream_in_delta(
    vitess, keyspace, tmp_path, spark
):
    from spark_jobs.delta_merge import run_local
    from spark_jobs.merge.delta_apply import live_rows

    seed(vitess, keyspace, 2000)
    c = vitess_connector(vitess, tmp_path / "connector", keyspace, {"incremental.snapshot.chunk.size": 100})
    topic = f"tm.{keyspace}.items"
    proc = start_process(c)
    writer = Writer(vitess, keyspace, 2000)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        writer.start()
        wait_for(lambda: writer.changes >= 20, 30, message="the writer to be under way")
        before_snapshot = writer.changes
        config = c.config()
        send_signal(
            connector_of(config),
            config,
            "snap-1",
            "execute-snapshot",
            {"data-collections": [f"{keyspace}.items"]},
        )
        wait_for(
            lambda: finished(c, "snap-1") is not None, 180, interval=0.3, message="the snapshot to finish"
        )
        during_snapshot = writer.changes - before_snapshot
        writer.stop_flag.set()
        writer.join(30)
        assert writer.error is None, writer.error
        for shard in ("-80", "80-"):  # a marker per shard: everything before it streamed
            marker = next(i for i in range(10**6, 2 * 10**6) if vitess.shard_of(keyspace, i) == shard)
            vitess.write(keyspace, {shard: [("INSERT INTO items VALUES (%s, 0, 'marker')", (marker,))]})
            wait_for(
                lambda m=marker: any(e["after"] and e["after"]["id"] == m for e in payloads(c, topic)), 60
            )
        assert stop_process(proc) == 0
    finally:
        writer.stop_flag.set()
        if proc.poll() is None:
            proc.kill()
    summary = finished(c, "snap-1")
    assert sorted(t["partition"] for t in summary["tables"]) == ["-80", "80-"], "one window series per shard"
    events = payloads(c, topic)
    reads = [e for e in events if e["op"] == "r"]
    assert reads and all(e["source"]["snapshot"] == "incremental" for e in reads)
    assert all(e["source"]["shard"] == vitess.shard_of(keyspace, e["after"]["id"]) for e in reads)
    assert during_snapshot > 0, "no write while the snapshot ran"
    state: dict[int, dict] = {}
    gone: set[int] = set()
    for e in events:  # a consumer applying the topic in order never sees a key go back
        key = (e["after"] or e["before"])["id"]
        assert key not in gone, f"key {key} came back after its delete ({e['op']})"
        if e["op"] == "d":
            state.pop(key, None)
            gone.add(key)
            continue
        if key in state:
            assert e["after"]["v"] >= state[key]["v"], f"key {key} went back in time ({e['op']})"
        state[key] = e["after"]
    expected = sorted(vitess.rows(keyspace, "items"), key=lambda r: r["id"])
    assert sorted(state.values(), key=lambda r: r["id"]) == expected
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    assert run_local(spark, c.config(), root, checkpoint) >= 1
    merged = sorted(
        (r.asDict() for r in live_rows(spark, f"{root}/{keyspace}.items").collect()), key=lambda r: r["id"]
    )
    assert merged == expected


@pytest.mark.parametrize("release", ["stream", "lakehouse"])
def test_the_spark_chunk_job_reads_every_shards_windows_in_parallel(
    vitess, keyspace, tmp_path, spark, release
):
    """The Spark job plans windows per shard and reads them with Python on its executors
    (Vitess has no JDBC path); both release modes land the same Delta table."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job
    from spark_jobs.merge.delta_apply import live_rows

    seed(vitess, keyspace, 1500)
    c = vitess_connector(vitess, tmp_path / "connector", keyspace)
    proc = start_process(c)
    writer = Writer(vitess, keyspace, 1500)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        writer.start()
        wait_for(lambda: writer.changes >= 20, 30, message="the writer to be under way")
        config = c.config()
        data = {
            "data-collections": [f"{keyspace}.items"],
            "tidemark.reader": "spark",
            "tidemark.chunk-size": 200,
            "tidemark.release": release,
        }
        send_signal(connector_of(config), config, "spark-1", "execute-snapshot", data)
        args = ["--config", str(c.path), "--staging", str(tmp_path / "staging"), "--parallelism", "2"]
        assert chunk_job([*args, "--signal", "spark-1"]) == 0
        wait_for(
            lambda: finished(c, "spark-1") is not None, 120, interval=0.3, message="the snapshot to finish"
        )
        writer.stop_flag.set()
        writer.join(30)
        assert writer.error is None, writer.error
        topic = f"tm.{keyspace}.items"
        for shard in ("-80", "80-"):
            marker = next(i for i in range(10**6, 2 * 10**6) if vitess.shard_of(keyspace, i) == shard)
            vitess.write(keyspace, {shard: [("INSERT INTO items VALUES (%s, 0, 'marker')", (marker,))]})
            wait_for(
                lambda m=marker: any(e["after"] and e["after"]["id"] == m for e in payloads(c, topic)), 60
            )
        assert stop_process(proc) == 0
    finally:
        writer.stop_flag.set()
        if proc.poll() is None:
            proc.kill()
    tables = finished(c, "spark-1")["tables"]
    assert sorted(t["partition"] for t in tables) == ["-80", "80-"]
    assert all(t["windows_done"] == t["windows_total"] for t in tables)
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    run_local(spark, c.config(), root, checkpoint)
    merged = sorted(
        (r.asDict() for r in live_rows(spark, f"{root}/{keyspace}.items").collect()), key=lambda r: r["id"]
    )
    assert merged == sorted(vitess.rows(keyspace, "items"), key=lambda r: r["id"])
