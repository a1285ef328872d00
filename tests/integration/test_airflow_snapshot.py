"""The ad-hoc snapshot DAG, run with `dag.test()` against the real MariaDB, streamer,
Spark (spark-submit through SparkSubmitOperator) and Delta: the form's request becomes a
signal, the chunk job stages windows, the deferred wait ends when the streamer has
released them, the merge writes Delta, and Delta equals the source, while the streamer
and the chunk job are killed and the tables change under a random writer."""

from __future__ import annotations

import contextlib
import random
import signal
import threading
import time
from datetime import timedelta

import psutil
import pytest

from tests.support.airflow_dags import airflow_connector, load_dag, start_streamer, task_states
from tests.support.snapshot_matrix import (
    MatrixWriter,
    altered_window_open,
    assert_delta_equals_source,
    closed_windows,
    create_tables,
)
from tests.support.snapshots import cleanup, wait_caught_up
from tests.support.streamer import admin, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def form(database: str, **changes):
    return {
        "connector": f"test-{database}",
        "data_collections": [f"{database}\\.t_.*"],
        "chunk_size": 8,
        "parallelism": 2,
        "release_mode": "lakehouse",
        **changes,
    }


class Chaos(threading.Thread):
    """While the DAG runs: the streamer killed with SIGKILL and started again, the chunk
    job's whole process tree killed once it has closed a few windows (Airflow runs it
    again: the task's retry; the matrix's Spark cells kill their job twice), a column
    added to a table inside one of its windows and a 500-row transaction, all under the
    random writer."""

    def __init__(self, connector, db, database, staging, proc, writer):
        super().__init__(daemon=True)
        self.connector, self.db, self.database, self.staging = connector, db, database, str(staging)
        self.proc, self.writer = proc, writer
        self.stop_flag = threading.Event()
        self.job_kills = self.streamer_kills = 0
        self.actions = ["alter", "big"]
        self.error: BaseException | None = None

    def closed_windows(self) -> int:
        return closed_windows(self.db, self.staging)

    def chunk_job(self):
        """The outermost process of the running chunk job (spark-submit), if any."""
        found = {}
        for process in psutil.process_iter(["cmdline", "ppid"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if "incremental_snapshot.py" in cmdline and self.staging in cmdline:
                found[process.pid] = process
        return next((p for p in found.values() if p.info["ppid"] not in found), None)

    def run(self):
        try:
            self._run()
        except BaseException as exc:
            self.error = exc

    def _run(self):
        rng = random.Random(5)
        next_kill = time.monotonic() + rng.uniform(3, 6)
        closed_at_start, job_pid = 0, None
        while not self.stop_flag.wait(0.2):
            if (
                self.actions and self.actions[0] == "alter" and altered_window_open(self.db, self.database)
            ) or (self.actions and self.actions[0] == "big" and self.closed_windows() >= 6):
                self.writer.request(self.actions.pop(0))
            if self.streamer_kills < 4 and time.monotonic() >= next_kill:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait(10)
                self.proc = start_streamer(self.connector)
                self.streamer_kills += 1
                next_kill = time.monotonic() + rng.uniform(4, 8)
            job = self.chunk_job() if self.job_kills < 1 else None
            if job is None:
                continue
            if job.pid != job_pid:
                job_pid, closed_at_start = job.pid, self.closed_windows()
            elif self.closed_windows() >= closed_at_start + 4:
                for process in [job, *job.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        process.kill()
                self.job_kills += 1

    def stop(self):
        self.stop_flag.set()
        self.join(30)
        if self.error is not None:
            raise AssertionError(f"the chaos thread failed: {self.error!r}") from self.error


def test_snapshot_dag_finishes_through_killed_chunk_jobs_and_streamers(
    tmp_path, monkeypatch, mariadb_admin_params, scratch_db, spark, capfd
):
    """The matrix's tables and writer (tests/support/snapshot_matrix.py), a lakehouse
    snapshot through the DAG while the streamer and the chunk job are killed: the run
    succeeds with no hand-made rerun, and Delta equals the source."""
    initial = create_tables(mariadb_admin_params, scratch_db)
    db = admin(mariadb_admin_params, scratch_db)
    connector = airflow_connector(tmp_path, scratch_db, monkeypatch, {"incremental.snapshot.chunk.size": 8})
    proc = start_streamer(connector)
    writer = MatrixWriter(mariadb_admin_params, scratch_db, initial)
    chaos = Chaos(connector, db, scratch_db, tmp_path / "staging", proc, writer)
    try:
        writer.start()
        chaos.start()
        dag = load_dag("tidemark_snapshot.py", "tidemark_snapshot")
        # The retry is under test, not its 15 s pause.
        dag.get_task("chunk_job").retry_delay = timedelta(seconds=1)
        run = dag.test(run_conf=form(scratch_db))
        chaos.stop()
        writer.stop()
        states = task_states(run)
        assert run.state == "success", states
        assert states["chunk_job"] == "success" and states["wait_released"] == "success"
        assert run.get_task_instance("chunk_job").try_number == 2, "the chunk job was not killed"
        assert chaos.streamer_kills >= 2 and not chaos.actions
        wait_caught_up(connector, db, 120)
    finally:
        chaos.stop_flag.set()
        cleanup(chaos.proc, writer)
    stop_process(chaos.proc)
    # What the writer did after the DAG's merge, merged as the scheduled merge would.
    from spark_jobs.delta_merge import run_local

    run_local(spark, connector.config(), str(tmp_path / "delta"), str(tmp_path / "merge-checkpoint"))
    monkeypatch.setenv("TIDEMARK_TEST_SOURCE_PASSWORD", monkeypatch_password())  # to read the source
    assert_delta_equals_source(spark, connector, str(tmp_path / "delta"), scratch_db)
    assert run.get_task_instance("publish").state == "success"
    # The connection's password never reaches the task logs.
    out, err = capfd.readouterr()
    assert monkeypatch_password() not in out + err


def monkeypatch_password() -> str:
    import os

    from scripts import services

    return os.environ[services.CDC_PASSWORD_ENV]
