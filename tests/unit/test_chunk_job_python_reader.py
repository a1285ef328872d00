"""The Spark chunk job's Python reader (`spark_jobs/python_reader.py`): its executor tasks
start before the plan exists and take their windows from handoff files, and its log of
where each task's time went."""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pytest

from cdc_core.errors import TidemarkError
from spark_jobs import python_reader
from spark_jobs.python_reader import PythonReads, handoff_uri, log_tasks, receive, write_handoff


class FakeSpark:
    """`range(...).mapInArrow(fn, ...).collect()` run in this process: each task's batch
    holds its task number, as Spark's range partitions do, and the tasks run side by side."""

    def __init__(self) -> None:
        self.started = threading.Event()

    def range(self, start: int, end: int, step: int, partitions: int) -> FakeSpark:
        assert (start, step, partitions) == (0, 1, end)
        self.tasks = end
        return self

    def mapInArrow(self, fn, schema: str) -> FakeSpark:
        self.fn = fn
        return self

    def collect(self) -> list:
        self.started.set()
        rows: list = []
        lock = threading.Lock()

        def task(t: int) -> None:
            for out in self.fn(iter([pa.RecordBatch.from_pydict({"id": [t]})])):
                with lock:
                    rows.extend(type("Row", (), {"result": v})() for v in out.column(0).to_pylist())

        threads = [threading.Thread(target=task, args=(t,)) for t in range(self.tasks)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return rows


@pytest.fixture
def read_windows(monkeypatch):
    """`run_windows` replaced by a record of the windows each call was given."""
    calls: list[list[int]] = []

    def fake(windows, config, signal_id, staging, shaping, lakehouse):
        calls.append([w["index"] for w in windows])
        return [{"index": w["index"], "rows": 1, "read": 0.1, "stage": 0.0} for w in windows]

    monkeypatch.setattr(python_reader, "run_windows", fake)
    return calls


def reads(tmp_path, spark: FakeSpark, tasks: int) -> PythonReads:
    ready: Future = Future()
    ready.set_result(spark)
    return PythonReads(ThreadPoolExecutor(1), ready, tasks, {}, "sig", str(tmp_path), None, True)


def test_tasks_started_before_the_plan_read_their_contiguous_slices_once_it_is_handed_over(
    tmp_path, read_windows, monkeypatch
):
    waiting = threading.Semaphore(0)
    receive_windows = python_reader.receive

    def spied(uri, run, *args, **kwargs):
        waiting.release()
        return receive_windows(uri, run, *args, **kwargs)

    monkeypatch.setattr(python_reader, "receive", spied)
    job = reads(tmp_path, FakeSpark(), tasks=2)
    assert waiting.acquire(timeout=30) and waiting.acquire(timeout=30)  # both tasks wait for windows
    time.sleep(0.2)
    assert read_windows == []
    results = job.hand_over([{"index": i, "table": "db.t"} for i in range(5)])
    assert sorted(read_windows) == [[0, 1], [2, 3, 4]]
    assert sorted(r["index"] for r in results) == [0, 1, 2, 3, 4]
    assert {r["task"] for r in results} == {0, 2}
    assert all(r["waited"] >= 0.2 for r in results), [r["waited"] for r in results]
    assert list((tmp_path / "sig").iterdir()) == []  # the handoff files are removed


def test_more_tasks_than_windows_leaves_the_others_idle(tmp_path, read_windows):
    results = reads(tmp_path, FakeSpark(), tasks=4).hand_over([{"index": 0, "table": "db.t"}])
    assert read_windows == [[0]]
    assert [r["index"] for r in results] == [0]


def test_a_driver_that_fails_before_the_handoff_ends_the_tasks_with_nothing_read(tmp_path, read_windows):
    spark = FakeSpark()
    job = reads(tmp_path, spark, tasks=2)
    assert spark.started.wait(5)
    job.abort("the driver failed: TidemarkError")
    assert read_windows == []
    assert list((tmp_path / "sig").iterdir()) == []
    job.abort("twice")  # nothing more to end


def test_a_task_reads_only_its_own_runs_handoff_and_gives_up_after_its_wait(tmp_path):
    uri = handoff_uri(str(tmp_path), "sig", "run-a", 0)
    write_handoff(uri, "run-a", {"windows": [{"index": 3}]})
    assert receive(uri, "run-a") == [{"index": 3}]
    with pytest.raises(TidemarkError, match="not run run-b's handoff"):
        receive(uri, "run-b")
    body = json.loads((tmp_path / "sig" / "run-run-a-task-0.json").read_text())
    assert body == {"version": 1, "run": "run-a", "windows": [{"index": 3}]}
    with pytest.raises(TidemarkError, match="its driver died or is still planning"):
        receive(handoff_uri(str(tmp_path), "sig", "run-c", 0), "run-c", wait_s=0.1, poll_s=0.02)


def test_each_executor_task_of_the_python_reader_is_logged_with_where_its_time_went(caplog):
    """The chunk job's log names, per executor task, its windows, how long they took and how
    much of that they spent reading and staging, and how long the task waited for them
    (how the MongoDB benchmark's windows were told apart from the scan)."""

    def window(index: int, task: int, read: float, stage: float, took: float, waited: float) -> dict:
        return {
            "index": index, "rows": 10, "read": read, "stage": stage, "task": task,
            "task_seconds": took, "waited": waited,
        }  # fmt: skip

    results = [
        window(0, 0, 2.0, 0.5, 6.0, 1.5),
        window(1, 0, 1.0, 0.5, 6.0, 1.5),
        window(2, 2, 4.0, 1.0, 5.5, 1.25),
    ]
    with caplog.at_level(logging.INFO, logger="spark_jobs.python_reader"):
        log_tasks(results)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "task from window 0: 2 windows in 6.0s (reading 3.0s, staging 1.0s; waited 1.5s for them)",
        "task from window 2: 1 windows in 5.5s (reading 4.0s, staging 1.0s; waited 1.2s for them)",
    ]
