"""Incremental snapshots through the signal table (DBLog watermarks), with the in-process
chunk reader, while a writer keeps changing the table.

The checks are the protocol's promises: replaying the topic gives exactly the source table
(no lost row, no duplicate final state), and no time travel: for every key, the versions
an in-order consumer sees never go backwards, and no snapshot read brings back a row after
its delete."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
import uuid

import orjson
import pytest

from tests.support import snapshot_matrix as matrix
from tests.support.snapshots import (
    SIGNALS,
    cleanup,
    finished,
    ids,
    run_chunk_job_remotely,
    seed,
    send_signal,
    status,
    wait_caught_up,
    wait_finished,
)
from tests.support.streamer import admin, payloads, start_process, stop_process, wait_for, write_connector

pytestmark = pytest.mark.integration


class Writer(threading.Thread):
    """Updates (v = v + 1), deletes and inserts at random until stopped."""

    def __init__(self, params, database, first_new_id):
        super().__init__(daemon=True)
        self.db = admin(params, database)
        self.stop_flag = threading.Event()
        self.next_id = first_new_id
        self.changes = 0

    def run(self):
        rng = random.Random(7)
        with self.db.cursor() as cur:
            while not self.stop_flag.is_set():
                roll = rng.random()
                key = rng.randint(1, self.next_id)
                if roll < 0.7:
                    cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (key,))
                elif roll < 0.85:
                    cur.execute("DELETE FROM t WHERE id = %s", (key,))
                else:
                    self.next_id += 1
                    cur.execute("INSERT INTO t VALUES (%s, 0, 'new')", (self.next_id,))
                self.changes += 1
                time.sleep(0.002)


def wind_down(connector, db, proc, writer) -> None:
    """Stop the writer, let the streamer catch up with the server, stop it cleanly."""
    writer.stop_flag.set()
    writer.join(10)
    wait_caught_up(connector, db, 60)
    assert stop_process(proc) == 0


def replay(events):
    state = {}
    for e in events:
        if e["op"] in ("c", "u", "r"):
            state[e["after"]["id"]] = (e["after"]["v"], e["after"]["note"])
        elif e["op"] == "d":
            state.pop(e["before"]["id"], None)
    return state


def offline_status(connector) -> str:
    """What `tidemark status --offline` prints for the connector."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_core.cli", "status", "--config", str(connector.path), "--offline"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def assert_exact_and_in_order(db, events, table="t"):
    """Replaying the events gives the source table, and no row ever goes back in time."""
    with db.cursor() as cur:
        cur.execute(f"SELECT id, v, note FROM {table}")
        source = {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    assert replay(events) == source
    assert_no_time_travel(events)


def assert_no_time_travel(events):
    matrix.assert_no_time_travel(matrix.distinct(matrix.applied(events, lambda row: row["id"], "v")), "t")


def test_snapshot_while_writing_is_exact_and_free_of_time_travel(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    rows = 3000
    with db.cursor() as cur:
        seed(cur, "t", rows)
    c = write_connector(
        tmp_path, scratch_db, {"signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": 100}
    )
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)
    writer = Writer(mariadb_admin_params, scratch_db, rows)
    try:
        wait_for(lambda: status(c).get("state") == "running" or (c.state / "status.json").exists(), 30)
        writer.start()
        time.sleep(0.5)
        send_signal(
            db,
            ids["snap-1"],
            "execute-snapshot",
            {"data-collections": [f"{scratch_db}.t"], "type": "incremental"},
        )
        wait_finished(c, ids["snap-1"], 120, "snapshot to finish")
        time.sleep(0.5)
        wind_down(c, db, proc, writer)
    finally:
        cleanup(proc, writer)

    events = payloads(c, topic)
    reads = [e for e in events if e["op"] == "r"]
    assert reads, "the snapshot released rows"
    assert all(e["source"]["snapshot"] == "incremental" for e in reads)
    assert all(e["transaction"] and e["transaction"]["transaction_rank"] > 0 for e in reads)
    assert_exact_and_in_order(db, events)
    summary = finished(c, ids["snap-1"])
    (table,) = summary["tables"]
    assert table["rows_released"] == len(reads)
    assert table["windows_done"] >= rows // 100
    # No range is read twice (the chunk reader moves on only once a release is final).
    assert table["windows_done"] <= (writer.next_id // 100) + 2
    assert table["rows_released"] + table["rows_dropped"] <= writer.next_id
    assert writer.changes > 100
    shown = offline_status(c)
    assert f"signal {ids['snap-1']}" in shown
    assert f"{scratch_db}.t" in shown and f"rows {len(reads)} released" in shown


def test_malformed_and_unauthorised_signals_fail_and_streaming_goes_on(
    tmp_path, mariadb_admin_params, scratch_db
):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))")
        cur.execute("INSERT INTO t VALUES (1, 0, 'a'), (2, 0, 'b')")
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS})
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        send_signal(db, ids["bad-1"], "execute-snapshot", {"data-collections": ["tidemark.debezium_signal"]})
        send_signal(
            db,
            ids["bad-2"],
            "execute-snapshot",
            {
                "data-collections": [f"{scratch_db}.t"],
                "additional-conditions": [
                    {"data-collection": f"{scratch_db}.t", "filter": "1=1; DROP TABLE t"}
                ],
            },
        )
        with db.cursor() as cur:
            cur.execute(
                f"INSERT INTO {SIGNALS} (id, type, data) VALUES (%s, 'execute-snapshot', '{{nope')",
                (ids["bad-3"],),
            )
        send_signal(
            db,
            ids["ok-1"],
            "execute-snapshot",
            {
                "data-collections": [f"{scratch_db}.t"],
                "additional-conditions": [{"data-collection": f"{scratch_db}.t", "filter": "note = 'b'"}],
            },
        )
        with db.cursor() as cur:
            cur.execute("INSERT INTO t VALUES (3, 0, 'c')")
        wait_finished(c, ids["ok-1"], 60, "filtered snapshot")
        wait_for(lambda: any(e["op"] == "c" and e["after"]["id"] == 3 for e in payloads(c, topic)), 30)
        # The kill below is about the refused signals, not the unacknowledged tail: with the
        # offset committed past the snapshot nothing is replayed, so row 2 is read once.
        wait_caught_up(c, db, 30)
        failed = {f["id"]: f["reason"] for f in status(c)["snapshots"]["failed_signals"]}
        # Refused signals outlive the streamer: kill -9 and start again, and they are still listed.
        proc.kill()
        proc.wait(10)
        proc = start_process(c)
        wait_for(lambda: status(c).get("pid") == proc.pid, 30, message="the restarted streamer's status")
        after_restart = {f["id"]: f["reason"] for f in status(c)["snapshots"]["failed_signals"]}
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    assert after_restart == failed
    shown = offline_status(c)
    assert all(
        f"signal {ids[name]} (execute-snapshot, from source)" in shown for name in ("bad-1", "bad-2", "bad-3")
    )
    assert "outside the capture list" in failed[ids["bad-1"]]
    assert "unexpected character ';'" in failed[ids["bad-2"]]
    assert "not valid JSON" in failed[ids["bad-3"]]
    reads = [e["after"]["id"] for e in payloads(c, topic) if e["op"] == "r"]
    assert reads == [2]
    with db.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM t")
        assert cur.fetchone()[0] == 3  # nothing was dropped


def test_file_and_kafka_channels_trigger_snapshots_once(
    tmp_path, mariadb_admin_params, scratch_db, kafka_bootstrap
):
    from confluent_kafka import Producer

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for name in ("a", "b"):
            seed(cur, name, 50, note="x")
    signal_file = tmp_path / "signals.jsonl"
    signal_topic = f"signals-{uuid.uuid4().hex[:8]}"
    c = write_connector(
        tmp_path,
        scratch_db,
        {
            "signal.data.collection": SIGNALS,
            "signal.enabled.channels": "source,file,kafka",
            "signal.file": str(signal_file),
            "signal.kafka.topic": signal_topic,
            "signal.kafka.bootstrap.servers": kafka_bootstrap,
            "signal.poll.interval.ms": 100,
        },
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap})

    def kafka_signal(key: str, value: dict) -> None:
        producer.produce(signal_topic, key=key.encode(), value=json.dumps(value).encode())
        producer.flush(10)

    def reads(table):
        return sorted(
            e["after"]["id"] for e in payloads(c, f"{c.prefix}.{scratch_db}.{table}") if e["op"] == "r"
        )

    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        signal_file.write_text(
            "not json\n"
            + json.dumps(
                {
                    "id": ids["file-1"],
                    "type": "execute-snapshot",
                    "data": {"data-collections": [f"{scratch_db}.a"]},
                }
            )
            + "\n"
        )
        kafka_signal(
            "someone-else", {"type": "execute-snapshot", "data": {"data-collections": [f"{scratch_db}.a"]}}
        )
        kafka_signal(
            c.prefix, {"type": "execute-snapshot", "data": {"data-collections": [f"{scratch_db}.b"]}}
        )
        wait_for(
            lambda: reads("a") == list(range(1, 51)) and reads("b") == list(range(1, 51)), 60, interval=0.3
        )
        failed = [f["reason"] for f in status(c)["snapshots"]["failed_signals"]]
        assert stop_process(proc) == 0
        # A restart reads on from the committed channel positions: nothing is triggered again.
        proc = start_process(c)
        wait_for(lambda: status(c).get("state") == "running", 30)
        time.sleep(2)
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    assert any("not a JSON object" in reason for reason in failed)
    assert reads("a") == list(range(1, 51)) and reads("b") == list(range(1, 51))


def test_spark_chunk_job_writes_parallel_windows_released_exactly(
    tmp_path, mariadb_admin_params, scratch_db, spark
):
    """Windows read in parallel by the Spark job, while a writer changes the table: the
    stream is still exact and free of time travel. In lakehouse mode the streamer publishes
    one release record per window instead of events."""
    import pyarrow.parquet as pq

    from cdc_core.connectors.mysql import jdbc
    from spark_jobs.incremental_snapshot import main as chunk_job
    from tests.support.lakehouse import merge_and_compare
    from tests.support.streamer import read_log

    db = admin(mariadb_admin_params, scratch_db)
    rows = 2000
    with db.cursor() as cur:
        for name in ("t", "lake"):
            seed(cur, name, rows)
        # CHAR and ENUM values shorter than their width: merged from the staged Parquet,
        # they must stay unpadded.
        cur.execute(
            "ALTER TABLE lake ADD COLUMN grade ENUM('a', 'bbbbbb') NOT NULL DEFAULT 'a', "
            "ADD COLUMN code CHAR(6) NOT NULL DEFAULT 'xy'"
        )
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS})
    staging = tmp_path / "staging"
    proc = start_process(c)
    writer = Writer(mariadb_admin_params, scratch_db, rows)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        send_signal(
            db,
            ids["spark-1"],
            "execute-snapshot",
            {"data-collections": [f"{scratch_db}.t"], "tidemark.reader": "spark", "tidemark.chunk-size": 150},
        )
        args = ["--config", str(c.path), "--staging", str(staging), "--parallelism", "3"]
        assert chunk_job([*args, "--signal", ids["spark-1"]]) == 0
        wait_finished(c, ids["spark-1"], 120, "spark snapshot")
        writer.stop_flag.set()
        writer.join(10)
        send_signal(
            db,
            ids["lake-1"],
            "execute-snapshot",
            {
                "data-collections": [f"{scratch_db}.lake"],
                "tidemark.reader": "spark",
                "tidemark.release": "lakehouse",
                "tidemark.chunk-size": 500,
            },
        )
        assert chunk_job([*args, "--signal", ids["lake-1"]]) == 0
        wait_finished(c, ids["lake-1"], 120, "lakehouse snapshot")
        wind_down(c, db, proc, writer)
    finally:
        cleanup(proc, writer)

    assert_exact_and_in_order(db, payloads(c, f"{c.prefix}.{scratch_db}.t"))
    (table,) = finished(c, ids["spark-1"])["tables"]
    assert (
        table["windows_done"] == table["windows_total"] == 14
    )  # boundaries every 150 rows, then one open-ended window

    assert not [e for e in payloads(c, f"{c.prefix}.{scratch_db}.lake") if e["op"] == "r"]
    releases = [v for _, v, _ in read_log(c, f"{c.prefix}.snapshot_releases")]
    assert len(releases) == 5 and {r["data_collection"] for r in releases} == {f"{scratch_db}.lake"}
    assert all(r["transaction"]["transaction_rank"] > 0 and r["excluded_keys"] == [] for r in releases)
    staged = sorted(i for r in releases for i in pq.read_table(r["staged"]).column("id").to_pylist())
    assert staged == list(range(1, rows + 1))
    # Into Delta: `t` from its op=r events, `lake` from the release records' staged files,
    # in a session without the chunk job's settings, as the merge's own spark-submit.
    for name in jdbc.SPARK_SQL_CONF:
        spark.conf.unset(name)
    merge_and_compare(spark, c, mariadb_admin_params, scratch_db, ["t", "lake"], tmp_path)


def test_blocking_snapshot_pauses_streaming_and_resumes(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 300, note="x")
    c = write_connector(
        tmp_path, scratch_db, {"signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": 64}
    )
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        send_signal(
            db,
            ids["block-1"],
            "execute-snapshot",
            {"data-collections": [f"{scratch_db}.t"], "type": "blocking"},
        )
        with db.cursor() as cur:
            cur.execute("UPDATE t SET v = 1 WHERE id = 7")
        wait_finished(c, ids["block-1"], 60, "blocking snapshot")
        wait_caught_up(c, db, 30)
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    events = payloads(c, topic)
    reads = [e for e in events if e["op"] == "r"]
    assert [e["after"]["id"] for e in reads] == list(range(1, 301))
    assert [e["source"]["snapshot"] for e in reads] == ["true"] * 299 + ["last"]
    # The update made after the signal streams after the snapshot rows, with a higher order key.
    update = next(e for e in events if e["op"] == "u")
    assert events.index(update) > events.index(reads[-1])
    assert update["transaction"]["transaction_rank"] > reads[-1]["transaction"]["transaction_rank"]
    assert_exact_and_in_order(db, events)


def test_initial_mode_and_tables_added_to_the_capture_list(tmp_path, mariadb_admin_params, scratch_db):
    """snapshot.mode=initial snapshots what is captured at first start; a table added to
    table.include.list later is snapshotted at the next start, without reading the others
    again; rows written to a newly captured table after the start stream as usual."""
    import yaml

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        for name in ("a", "b"):
            seed(cur, name, 20, note="x")
    c = write_connector(
        tmp_path,
        scratch_db,
        {
            "signal.data.collection": SIGNALS,
            "snapshot.mode": "initial",
            "table.include.list": f"{scratch_db}\\.a",
        },
    )

    def reads(table):
        return sorted(
            e["after"]["id"] for e in payloads(c, f"{c.prefix}.{scratch_db}.{table}") if e["op"] == "r"
        )

    def run_until(predicate):
        proc = start_process(c)
        try:
            wait_for(predicate, 60, interval=0.3)
            time.sleep(0.5)
            assert stop_process(proc) == 0
        finally:
            if proc.poll() is None:
                proc.kill()

    run_until(lambda: reads("a") == list(range(1, 21)))
    assert reads("b") == []
    props = yaml.safe_load(c.path.read_text())
    props["table.include.list"] = f"{scratch_db}\\.(a|b|c)"
    c.path.write_text(yaml.safe_dump(props))

    def created_c_streamed():
        return any(e["op"] == "c" for e in payloads(c, f"{c.prefix}.{scratch_db}.c"))

    with db.cursor() as cur:
        cur.execute("CREATE TABLE c (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))")
    proc = start_process(c)
    try:
        wait_for(lambda: reads("b") == list(range(1, 21)), 60, interval=0.3)
        with db.cursor() as cur:
            cur.execute("INSERT INTO c VALUES (1, 0, 'x')")
        wait_for(created_c_streamed, 30, interval=0.3)
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    assert reads("a") == list(range(1, 21)), "a is not snapshotted again"
    assert reads("c") == []  # it was empty when the snapshot read it


def test_a_snapshot_survives_kill_9_and_resumes_at_the_first_window_not_done(
    tmp_path, mariadb_admin_params, scratch_db
):
    import signal as signals

    db = admin(mariadb_admin_params, scratch_db)
    rows = 3000
    with db.cursor() as cur:
        seed(cur, "t", rows)
    c = write_connector(
        tmp_path, scratch_db, {"signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": 100}
    )
    topic = f"{c.prefix}.{scratch_db}.t"

    def windows_committed():
        """Windows done in the committed offsets: the status runs ahead of them while the
        sink acknowledges, so a kill timed by the status can find nothing committed yet."""
        try:
            snapshot = orjson.loads((c.state / "offsets.json").read_bytes())["offset"].get("snapshot") or {}
        except FileNotFoundError:
            return 0
        return sum(t["windows_done"] for s in snapshot.get("snapshots", []) for t in s["tables"])

    proc = start_process(c)
    writer = Writer(mariadb_admin_params, scratch_db, rows)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        send_signal(db, ids["crash-1"], "execute-snapshot", {"data-collections": [f"{scratch_db}.t"]})
        wait_for(lambda: windows_committed() >= 3, 120, interval=0.05, message="some windows committed")
        proc.send_signal(signals.SIGKILL)
        proc.wait(10)
        committed = orjson.loads((c.state / "offsets.json").read_bytes())["offset"]["snapshot"]
        done_before = committed["snapshots"][0]["tables"][0]["windows_done"]
        proc = start_process(c)
        wait_finished(c, ids["crash-1"], 120, "snapshot to finish")
        wind_down(c, db, proc, writer)
    finally:
        cleanup(proc, writer)
    events = payloads(c, topic)
    assert_exact_and_in_order(db, events)
    (table,) = finished(c, ids["crash-1"])["tables"]
    assert done_before > 0
    # It went on from the committed state; starting over would have added 30+ windows to it.
    assert table["windows_done"] < done_before + rows // 100


def test_read_only_snapshot_uses_gtid_positions_and_writes_nothing(
    tmp_path, mariadb_admin_params, scratch_db
):
    db = admin(mariadb_admin_params, scratch_db)
    rows = 1500

    def watermark_rows():
        # This snapshot's only: the signal table is shared with tests running beside this one.
        with db.cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*) FROM {SIGNALS} WHERE type LIKE 'snapshot-window-%%' AND data LIKE %s",
                (f'%"snapshot":"{ids["ro-1"]}"%',),
            )
            return cur.fetchone()[0]

    with db.cursor() as cur:
        seed(cur, "t", rows)
    signal_file = tmp_path / "signals.jsonl"
    c = write_connector(
        tmp_path,
        scratch_db,
        {
            "read.only": True,
            "signal.enabled.channels": "file",
            "signal.file": str(signal_file),
            "signal.poll.interval.ms": 100,
            "incremental.snapshot.chunk.size": 100,
        },
    )
    before = watermark_rows()
    proc = start_process(c)
    writer = Writer(mariadb_admin_params, scratch_db, rows)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        signal = {
            "id": ids["ro-1"],
            "type": "execute-snapshot",
            "data": {"data-collections": [f"{scratch_db}.t"]},
        }
        signal_file.write_text(json.dumps(signal) + "\n")
        wait_finished(c, ids["ro-1"], 120, "read-only snapshot")
        wind_down(c, db, proc, writer)
    finally:
        cleanup(proc, writer)
    events = payloads(c, f"{c.prefix}.{scratch_db}.t")
    assert [e for e in events if e["op"] == "r"]
    assert_exact_and_in_order(db, events)
    assert watermark_rows() == before, "read-only mode writes nothing to the source"
    reads = [e for e in events if e["op"] == "r"]
    assert all(e["transaction"]["id"].startswith("snapshot-window-") for e in reads)


@pytest.mark.parametrize(
    "reader", ["inprocess", "spark-jdbc", "spark-python", "connect-jdbc", "connect-python"]
)
def test_snapshot_reads_equal_streamed_rows_for_every_type(
    tmp_path, mariadb_admin_params, scratch_db, reader, request
):
    """The chunk reader's values (pymysql; for the Spark job, Spark's JDBC reader or pymysql
    on the executors, staged as Parquet; the job in a Spark of its own or attached to a
    Spark Connect server) go through the same type mapping as binlog rows and must give
    identical events."""
    from tests.support.types_table import TYPES_DDL, TYPES_ROW

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute(TYPES_DDL)
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS})
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        with db.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(TYPES_ROW)
        where, read_with = reader.partition("-")[::2]
        data = {
            "data-collections": [f"{scratch_db}.t"],
            "tidemark.reader": "inprocess" if not read_with else "spark",
        }
        send_signal(db, ids[f"types-{reader}"], "execute-snapshot", data)
        options = [
            "--config",
            str(c.path),
            "--signal",
            ids[f"types-{reader}"],
            "--staging",
            str(tmp_path / "staging"),
        ]
        if where == "spark":
            from spark_jobs.incremental_snapshot import main as chunk_job

            request.getfixturevalue("spark")
            assert chunk_job([*options, "--read-with", read_with]) == 0
        elif where == "connect":
            run_chunk_job_remotely(
                request.getfixturevalue("spark_connect"), [*options, "--read-with", read_with]
            )
        wait_finished(c, ids[f"types-{reader}"], 60, "snapshot of the type table")
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    events = payloads(c, topic)
    streamed = next(e["after"] for e in events if e["op"] == "c")
    read = next(e["after"] for e in events if e["op"] == "r")
    assert read == streamed


def test_pause_resume_stop_filters_and_surrogate_keys(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "a", 2000, note=lambda i: "odd" if i % 2 else "even")
        cur.execute("CREATE TABLE nopk (id INT NOT NULL, v INT)")
        cur.executemany("INSERT INTO nopk VALUES (%s, 0)", [(i,) for i in range(1, 301)])
    c = write_connector(
        tmp_path, scratch_db, {"signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": 20}
    )

    def progress(table):
        """Windows done, as committed (offsets are committed every 100 ms here)."""
        offset = orjson.loads((c.state / "offsets.json").read_bytes())["offset"]
        running = (offset.get("snapshot") or {}).get("snapshots", [])
        tables = [t for s in running for t in s["tables"] if t["table"] == f"{scratch_db}.{table}"]
        return tables[0]["windows_done"] if tables else None

    def reads(table):
        return [e["after"]["id"] for e in payloads(c, f"{c.prefix}.{scratch_db}.{table}") if e["op"] == "r"]

    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        condition = {"data-collection": f"{scratch_db}.a", "filter": "id > 100 AND note = 'odd'"}
        send_signal(
            db,
            ids["pr-1"],
            "execute-snapshot",
            {"data-collections": [f"{scratch_db}.a"], "additional-conditions": [condition]},
        )
        wait_for(lambda: (progress("a") or 0) >= 3, 60, interval=0.1)
        send_signal(db, ids["pause"], "pause-snapshot", {})
        time.sleep(1.0)  # the window in flight when the pause arrived finishes
        paused_at = progress("a")
        time.sleep(2.5)
        assert progress("a") <= paused_at + 1, "no new windows while paused"
        send_signal(db, ids["resume"], "resume-snapshot", {})
        wait_for(lambda: progress("a") >= paused_at + 3, 60, interval=0.1)
        send_signal(
            db, ids["stop"], "stop-snapshot", {"type": "incremental", "data-collections": [f"{scratch_db}.a"]}
        )
        wait_finished(c, ids["pr-1"], 30, "stopped snapshot")
        send_signal(db, ids["nopk-1"], "execute-snapshot", {"data-collections": [f"{scratch_db}.nopk"]})
        send_signal(
            db,
            ids["nopk-2"],
            "execute-snapshot",
            {"data-collections": [f"{scratch_db}.nopk"], "surrogate-key": "id"},
        )
        wait_finished(c, ids["nopk-2"], 60, "surrogate-key snapshot")
        failed = {f["id"]: f["reason"] for f in status(c)["snapshots"]["failed_signals"]}
        assert stop_process(proc) == 0
    finally:
        cleanup(proc)
    released = reads("a")
    assert released and all(i > 100 and i % 2 for i in released), "only rows matching the filter"
    assert len(released) < 950, "stop-snapshot ended it before the end of the table"
    assert len(set(released)) == len(released)
    assert "has no primary key" in failed[ids["nopk-1"]] and "surrogate-key" in failed[ids["nopk-1"]]
    assert sorted(reads("nopk")) == list(range(1, 301))
