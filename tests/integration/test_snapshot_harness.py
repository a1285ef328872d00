"""The correctness harness (tests/support/harness.py) against every chunk reader: three
tables (integer, composite and case-insensitive text keys) under a random writer with
primary-key changes, while the streamer is killed with SIGKILL five times at random
points (and, for Spark, the chunk job is killed mid-run and run again)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.support.harness import TABLES, RandomWriter, check, create_tables
from tests.support.lakehouse import merge_and_compare
from tests.support.snapshots import (
    SIGNALS,
    caught_up,
    cleanup,
    finished,
    ids,
    send_signal,
    wait_finished,
)
from tests.support.streamer import admin, start_process, stop_process, wait_for, write_connector

pytestmark = pytest.mark.integration

ROWS = 1200


def collections(database: str) -> list[str]:
    return [f"{database}\\.(int_pk|composite_pk|text_pk)"]


def kill_and_restart(connector, proc, times: int, rng: random.Random, until=lambda: False):
    """SIGKILL the streamer `times` times at random moments, restarting it each time."""
    for _ in range(times):
        time.sleep(rng.uniform(0.4, 1.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc = start_process(connector)
    return proc


def finish(connector, db, proc, writer):
    writer.stop()
    wait_for(lambda: caught_up(connector, db), 90, interval=0.2, message="streamer to catch up")
    assert stop_process(proc) == 0


@pytest.mark.parametrize("mode", ["inprocess", "read-only"])
def test_harness_with_five_kill_9_restarts(mode, tmp_path, mariadb_admin_params, scratch_db, spark):
    initial = create_tables(mariadb_admin_params, scratch_db, ROWS)
    db = admin(mariadb_admin_params, scratch_db)
    props = {"incremental.snapshot.chunk.size": 120}
    signal_file = tmp_path / "signals.jsonl"
    if mode == "read-only":
        props |= {"read.only": True, "signal.enabled.channels": "file", "signal.file": str(signal_file)}
        props["signal.poll.interval.ms"] = 100
    else:
        props["signal.data.collection"] = SIGNALS
    c = write_connector(tmp_path, scratch_db, props)
    signal_id = ids[f"harness-{mode}"]
    proc = start_process(c)
    writer = RandomWriter(mariadb_admin_params, scratch_db, initial)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        data = {"data-collections": collections(scratch_db)}
        if mode == "read-only":
            signal_file.write_text(
                json.dumps({"id": signal_id, "type": "execute-snapshot", "data": data}) + "\n"
            )
        else:
            send_signal(db, signal_id, "execute-snapshot", data)
        proc = kill_and_restart(c, proc, 5, random.Random(3))
        wait_finished(c, signal_id, 240, f"{mode} snapshot")
        finish(c, db, proc, writer)
    finally:
        cleanup(proc, writer)
    reads = check(c, mariadb_admin_params, scratch_db, initial, writer)
    assert all(reads.values()), reads
    assert writer.changes > 200
    # The same stream, duplicates of the restarts included, merged into Delta: the source.
    merge_and_compare(spark, c, mariadb_admin_params, scratch_db, [t.name for t in TABLES], tmp_path)


def test_harness_with_the_spark_reader_killed_mid_run(tmp_path, mariadb_admin_params, scratch_db):
    """At least four windows in parallel; the first job is killed once some windows are
    released and the second run of the same snapshot reads only what is left."""
    initial = create_tables(mariadb_admin_params, scratch_db, ROWS)
    db = admin(mariadb_admin_params, scratch_db)
    c = write_connector(tmp_path, scratch_db, {"signal.data.collection": SIGNALS})
    signal_id = ids["harness-spark"]
    staging = tmp_path / "staging"
    job = [
        sys.executable, "-m", "spark_jobs.incremental_snapshot", "--config", str(c.path), "--signal", signal_id,
        "--staging", str(staging), "--parallelism", "4", "--master", "local[4]",
    ]  # fmt: skip

    def windows_written():
        with db.cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*) FROM {SIGNALS} WHERE type = 'snapshot-window-close' AND data LIKE %s",
                (f'%"snapshot":"{signal_id}"%',),
            )
            return cur.fetchone()[0]

    def committed_windows():
        offset = json.loads((c.state / "offsets.json").read_text())["offset"]
        snapshots = (offset.get("snapshot") or {}).get("snapshots", [])
        return sum(len(t["done_windows"]) for s in snapshots for t in s["tables"])

    proc = start_process(c)
    writer = RandomWriter(mariadb_admin_params, scratch_db, initial)
    first = None
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        data = {
            "data-collections": collections(scratch_db),
            "tidemark.reader": "spark",
            "tidemark.chunk-size": 40,
        }
        send_signal(db, signal_id, "execute-snapshot", data)
        env = {**os.environ, "TIDEMARK_SPARK_LOG_LEVEL": "ERROR"}
        first = subprocess.Popen(job, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        wait_for(lambda: windows_written() >= 6 or first.poll() is not None, 180, interval=0.05)
        killed_mid_run = first.poll() is None
        first.kill()
        first.wait(30)
        # The streamer releases what the killed job wrote; the rerun skips what is committed.
        wait_for(lambda: committed_windows() >= 6, 60, interval=0.2, message="released windows committed")
        second = subprocess.run(job, env=env, capture_output=True, text=True, timeout=300, check=True)
        summary = json.loads(second.stdout.strip().splitlines()[-1])
        wait_finished(c, signal_id, 120, "spark snapshot")
        finish(c, db, proc, writer)
    finally:
        if first is not None and first.poll() is None:
            first.kill()
        cleanup(proc, writer)
    assert killed_mid_run, "the first job finished before it could be killed"
    assert summary["windows_skipped"] >= 6 and summary["windows_written"] < summary["windows_planned"]
    reads = check(c, mariadb_admin_params, scratch_db, initial, writer)
    assert all(reads.values()), reads
    tables = finished(c, signal_id)["tables"]
    assert all(t["windows_done"] >= t["windows_total"] for t in tables)
