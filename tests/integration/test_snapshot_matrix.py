"""The snapshot correctness matrix: every key shape (tests/support/key_tables.py) x
every chunk reader (in-process, read-only, Spark) x release mode (stream, lakehouse), under
a random writer with primary-key changes, multi-table and 500-row transactions and
columns added mid-run, while the streamer is killed with SIGKILL again and again (and
the Spark chunk job's process group twice, the job run again after each kill as the
README says). Each run ends with the stream merged into Delta and three checks
(tests/support/snapshot_matrix.py): Delta equals the source, no time travel, untouched
rows released exactly once. Few rows per table, many tables: one run per reader and mode."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib

import pytest

from tests.support.snapshot_matrix import (
    MatrixWriter,
    altered_window_open,
    assert_delta_equals_source,
    check_stream,
    closed_windows,
    create_tables,
)
from tests.support.snapshots import SIGNALS, cleanup, finished, ids, send_signal, status, wait_caught_up
from tests.support.streamer import admin, start_process, stop_process, wait_for, write_connector

pytestmark = [pytest.mark.integration, pytest.mark.snapshot_matrix, pytest.mark.timeout(900)]

CHUNK = 8
STREAMER_KILLS = 6
JOB_KILLS = 2
KILL_INTERVAL = {False: (0.8, 2.0), True: (1.5, 4.0)}  # seconds between streamer kills (Spark reader: True)
# The writer's mid-snapshot actions, each once the streamer has released this many windows
# (the first as soon as a window of t_altered is open, so the table changes inside it).
ACTIONS = ((0, "alter"), (3, "big"), (6, "alter"), (9, "big"))

MODES = {
    "inprocess-stream": ("inprocess", "stream"),
    "readonly-stream": ("read-only", "stream"),
    "spark-stream": ("spark", "stream"),
    "spark-lakehouse": ("spark", "lakehouse"),
}


def released_windows(connector) -> int:
    snapshots = status(connector).get("snapshots") or {}
    return sum(t.get("windows_done", 0) for s in snapshots.get("running", []) for t in s["tables"]) + sum(
        t.get("windows_done", 0) for s in snapshots.get("finished", []) for t in s["tables"]
    )


class ChunkJobs:
    """The Spark chunk job run again and again until one run ends by itself; the first
    JOB_KILLS runs are killed (their whole process group) once they have closed a few
    windows."""

    def __init__(self, connector, db, signal_id, staging):
        self.db, self.signal_id = db, signal_id
        self.command = [
            sys.executable, "-m", "spark_jobs.incremental_snapshot", "--config", str(connector.path),
            "--signal", signal_id, "--staging", str(staging), "--parallelism", "2", "--master", "local[2]",
        ]  # fmt: skip
        self.job: subprocess.Popen | None = None
        self.runs = self.kills = 0
        self.closed_at_start = 0
        self.completed = False

    def closed_windows(self) -> int:
        return closed_windows(self.db, f'"snapshot":"{self.signal_id}"')

    def step(self) -> None:
        if self.completed:
            return
        if self.job is None:
            self.runs += 1
            env = {**os.environ, "TIDEMARK_SPARK_LOG_LEVEL": "ERROR"}
            self.closed_at_start = self.closed_windows()
            self.job = subprocess.Popen(
                self.command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            return
        code = self.job.poll()
        if code is not None:
            out = self.job.stdout.read().decode()
            assert code == 0, f"chunk job run {self.runs} failed with exit {code}: {out[-2000:]}"
            self.completed = True
            self.job = None
            return
        if self.kills < JOB_KILLS and self.closed_windows() >= self.closed_at_start + 6:
            os.killpg(self.job.pid, signal.SIGKILL)
            self.job.wait(30)
            self.kills += 1
            self.job = None

    def stop(self) -> None:
        if self.job is not None and self.job.poll() is None:
            os.killpg(self.job.pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", MODES)
def test_every_key_type_with_every_reader_and_release_mode(
    mode, tmp_path, mariadb_admin_params, scratch_db, spark
):
    reader, release = MODES[mode]
    # One seed per mode, the same in every run (TIDEMARK_MATRIX_SEED explores others).
    rng = random.Random(int(os.environ.get("TIDEMARK_MATRIX_SEED", zlib.crc32(mode.encode()))))
    initial = create_tables(mariadb_admin_params, scratch_db)
    db = admin(mariadb_admin_params, scratch_db)
    # The in-process readers read one window at a time, and restarts no longer cost them a
    # window: smaller chunks keep their snapshots long enough for a few kills.
    props = {"incremental.snapshot.chunk.size": CHUNK if reader == "spark" else CHUNK // 2}
    signal_file = tmp_path / "signals.jsonl"
    if reader == "read-only":
        props |= {"read.only": True, "signal.enabled.channels": "file", "signal.file": str(signal_file)}
        props["signal.poll.interval.ms"] = 100
    else:
        props["signal.data.collection"] = SIGNALS
    c = write_connector(tmp_path, scratch_db, props)
    signal_id = ids[f"matrix-{mode}"]
    data = {"data-collections": [f"{scratch_db}\\.t_.*"]}
    if reader == "spark":
        data |= {"tidemark.reader": "spark", "tidemark.chunk-size": CHUNK, "tidemark.release": release}
    proc = start_process(c)
    writer = MatrixWriter(mariadb_admin_params, scratch_db, initial, seed=rng.randrange(1000))
    jobs = ChunkJobs(c, db, signal_id, tmp_path / "staging") if reader == "spark" else None
    kills = 0
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        writer.start()
        if reader == "read-only":
            signal_file.write_text(
                json.dumps({"id": signal_id, "type": "execute-snapshot", "data": data}) + "\n"
            )
        else:
            send_signal(db, signal_id, "execute-snapshot", data)
        actions = list(ACTIONS)
        next_kill = time.monotonic() + rng.uniform(1.0, 3.0)
        deadline = time.monotonic() + 600
        while finished(c, signal_id) is None:
            assert time.monotonic() < deadline, (
                f"the snapshot did not finish: {status(c).get('snapshots')}; chunk job runs: "
                f"{jobs.runs if jobs else '-'}"
            )
            done = released_windows(c)
            first = actions and actions[0][0] == 0
            opened = altered_window_open(db, scratch_db) if reader != "read-only" else done >= 1
            if first and (opened or done >= 2):
                writer.request(actions.pop(0)[1])
            while actions and actions[0][0] and done >= actions[0][0]:
                writer.request(actions.pop(0)[1])
            if kills < STREAMER_KILLS and time.monotonic() >= next_kill:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                proc = start_process(c)
                kills += 1
                next_kill = time.monotonic() + rng.uniform(*KILL_INTERVAL[reader == "spark"])
            if jobs is not None:
                jobs.step()
            time.sleep(0.1)
        writer.stop()
        wait_caught_up(c, db, 120)
        assert stop_process(proc) == 0
    finally:
        if jobs is not None:
            jobs.stop()
        cleanup(proc, writer)
    if jobs is not None:
        assert jobs.kills == JOB_KILLS, f"the chunk job finished before it was killed {JOB_KILLS} times"
    assert kills >= 3, "the snapshot finished before the streamer was killed a few times"
    assert not actions, f"the snapshot finished before the writer's {actions}"
    assert writer.changes > 300

    from spark_jobs.delta_merge import run_local

    root = tmp_path / "delta"
    run_local(spark, c.config(), str(root), str(tmp_path / "merge-checkpoint"))
    assert_delta_equals_source(spark, c, str(root), scratch_db)
    reads = check_stream(c, scratch_db, initial, writer, lakehouse=release == "lakehouse")
    # A table can have no read at all (a 500-row transaction updated every row while its
    # windows were open); the check of untouched rows above holds each table to its own.
    assert sum(reads.values()) > 100, reads
