"""The chunk job's Python reader: windows read by Python on the executors, for tables
Spark's JDBC reader cannot read exactly and for sources without a Spark reader.

Its Spark job is submitted before the windows are planned (`PythonReads`): each executor
task starts its Python worker (the connector's client, pyarrow and the project's modules
take 2-3 s to import) while the driver asks the database for the chunk boundaries, then
waits for its share of the plan in a handoff file the driver writes once the plan is
saved. The file lies under the snapshot's staging folder, which the driver and the
executors share (the executors stage windows there), and its name carries the run, so a
task left over from an earlier, killed run never reads a later run's windows.

A handoff file is typed JSON with a version, one per task:
`{"version": 1, "run": ..., "windows": [...]}`, or `{"version": 1, "run": ..., "abort":
"why"}` when the driver failed before handing over, so that the tasks end at once with
nothing read and the driver's own error is the one reported.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from concurrent.futures import Executor, Future
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.errors import TidemarkError
from cdc_core.snapshot.requests import Shaping
from cdc_core.snapshot.staging import filesystem_for, write_bytes_whole
from spark_jobs.snapshot_plan import signal_folder
from spark_jobs.snapshot_windows import run_windows

log = logging.getLogger(__name__)

HANDOFF_VERSION = 1
# How long a task waits for its windows: a backstop for a driver killed while it planned
# on a Spark Connect server, which keeps running a job its client left (a driver of the
# job's own takes its tasks down with it). Planning 10^9 `_id`s is minutes, not an hour.
HANDOFF_WAIT_S = 3600.0
POLL_S = 0.05


def handoff_uri(staging: str, signal_id: str, run: str, task: int) -> str:
    return f"{signal_folder(staging, signal_id)}/run-{run}-task-{task}.json"


def write_handoff(uri: str, run: str, body: dict[str, Any]) -> None:
    write_bytes_whole(uri, json.dumps({"version": HANDOFF_VERSION, "run": run, **body}).encode())


def receive(
    uri: str, run: str, wait_s: float = HANDOFF_WAIT_S, poll_s: float = POLL_S
) -> list[dict[str, Any]]:
    """On an executor: this task's windows, once the driver has handed them over; none if
    the driver gave up. Raises when nothing came within `wait_s`."""
    from pyarrow import fs

    filesystem, path = filesystem_for(uri)
    deadline = time.monotonic() + wait_s
    while filesystem.get_file_info(path).type == fs.FileType.NotFound:
        if time.monotonic() > deadline:
            raise TidemarkError(
                f"no windows reached this task within {wait_s:.0f}s ({uri}): its driver died or is still planning"
            )
        time.sleep(poll_s)
    with filesystem.open_input_stream(path) as f:
        body = json.loads(f.read())
    if body.get("version") != HANDOFF_VERSION or body.get("run") != run:
        raise TidemarkError(f"{uri} is not run {run}'s handoff (version {body.get('version')!r})")
    if "abort" in body:
        return []
    return body["windows"]


class PythonReads:
    """The Python reader's Spark job, `tasks` Arrow-mapped tasks (one per row of
    `spark.range(tasks)`; a DataFrame rather than an RDD, so the same code runs on a Spark
    of the job's own and on a Spark Connect server, which has no SparkContext), submitted
    on `runner` as soon as `spark` is ready. `hand_over` deals the planned windows
    (contiguous slices in plan order, read one window at a time) and returns what the
    tasks read; `abort` ends the tasks with nothing read."""

    def __init__(
        self,
        runner: Executor,
        spark: Future,
        tasks: int,
        config: ConnectorConfig,
        signal_id: str,
        staging: str,
        shaping: Shaping,
        lakehouse: bool,
    ) -> None:
        self.tasks = max(1, tasks)
        self.run = uuid.uuid4().hex[:16]
        self.uris = [handoff_uri(staging, signal_id, self.run, t) for t in range(self.tasks)]
        self._settled = False
        uris, run = self.uris, self.run

        def read(batches: Any) -> Any:
            import pyarrow as pa

            for batch in batches:
                for t in batch.column(0).to_pylist():
                    waiting = time.monotonic()
                    part = receive(uris[t], run)
                    began = time.monotonic()
                    done = run_windows(part, config, signal_id, staging, shaping, lakehouse) if part else []
                    task = {
                        "task": part[0]["index"] if part else None,
                        "task_seconds": time.monotonic() - began,
                        "waited": began - waiting,
                    }
                    yield pa.RecordBatch.from_pydict({"result": [json.dumps({**r, **task}) for r in done]})

        def collect() -> list[dict[str, Any]]:
            frame = spark.result().range(0, self.tasks, 1, self.tasks)
            return [json.loads(row.result) for row in frame.mapInArrow(read, "result string").collect()]

        self._job = runner.submit(collect)

    def hand_over(self, windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        n = len(windows)
        for t, uri in enumerate(self.uris):
            write_handoff(
                uri, self.run, {"windows": windows[t * n // self.tasks : (t + 1) * n // self.tasks]}
            )
        self._settled = True
        try:
            results = self._job.result()
        finally:
            self._remove()
        log_tasks(results)
        return results

    def abort(self, reason: str) -> None:
        """End the tasks with nothing read (the driver failed before handing over) and wait
        for the job, whose own failure, if any, the driver's error outranks."""
        if self._settled:
            return
        self._settled = True
        for uri in self.uris:
            write_handoff(uri, self.run, {"abort": reason})
        try:
            self._job.result()
        except Exception as e:  # the driver's error is the one worth reporting
            log.warning("the Python reader's job ended with %s after the driver failed", type(e).__name__)
        finally:
            self._remove()

    def _remove(self) -> None:
        for uri in self.uris:
            filesystem, path = filesystem_for(uri)
            with contextlib.suppress(OSError):  # FileNotFoundError among them
                filesystem.delete_file(path)


def log_tasks(results: list[dict[str, Any]]) -> None:
    """Per executor task: its windows, how long they took once handed over, and of that
    how long they took to read and to stage, then how long the task had waited for them
    (a task starts while the driver plans)."""
    tasks: dict[Any, list[dict[str, Any]]] = {}
    for r in results:
        tasks.setdefault(r.get("task"), []).append(r)
    for first, done in sorted(tasks.items(), key=lambda t: str(t[0])):
        log.info(
            "task from window %s: %d windows in %.1fs (reading %.1fs, staging %.1fs; waited %.1fs for them)",
            first,
            len(done),
            max(r.get("task_seconds", 0.0) for r in done),
            sum(r.get("read", 0.0) for r in done),
            sum(r.get("stage", 0.0) for r in done),
            max(r.get("waited", 0.0) for r in done),
        )
