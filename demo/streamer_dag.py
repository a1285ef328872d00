"""The demo connector's streamer under Airflow: stopped (DAG paused, active runs ended,
which makes Airflow stop the streamer through its operator's on_kill) before the demo
resets its state, then started by unpausing `tidemark_stream_<connector>` (and triggering it
only when the scheduler starts no run), and followed through the connector's own state
files."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from cdc_core.cli import status_document
from cdc_core.config.connector_config import ConnectorConfig
from demo.airflow_api import AirflowAPI

SNAPSHOT_DAG = "tidemark_snapshot"


def stream_dag(config: ConnectorConfig) -> str:
    from tidemark_airflow.connectors import slug

    return f"tidemark_stream_{slug(config.name)}"


def stop(api: AirflowAPI, config: ConnectorConfig, timeout: float = 180) -> None:
    """No streamer and no snapshot run of this connector left running in Airflow. The
    streamer's runs end as a slot does (marked success: the streamer stops cleanly, with
    everything committed), so stopping leaves no failed task and no alert; an unfinished
    snapshot run of an earlier, interrupted demo is failed."""
    dag_id = stream_dag(config)
    api.set_paused(dag_id, True)
    for run in api.runs(dag_id):
        api.set_run_state(dag_id, run["dag_run_id"], "success")
    for run in api.runs(SNAPSHOT_DAG):
        if (run.get("conf") or {}).get("connector") == config.name:
            api.fail_run(SNAPSHOT_DAG, run["dag_run_id"])
    wait(lambda: running_pid(config) is None, timeout, f"the {config.name} streamer to stop")


def start(api: AirflowAPI, config: ConnectorConfig, timeout: float = 300, scheduled_wait: float = 5) -> str:
    """Unpause the streamer DAG and return the run whose `stream` task runs the streamer,
    once the streamer reports running. Unpausing makes the scheduler start the latest
    interval's run, usually within a second or two; if none comes within
    `scheduled_wait` (that interval ran already, say in an earlier demo, or the scheduler
    is slow to see the DAG unpaused) a run is triggered, and one triggered but left
    queued behind a scheduled run (the DAG runs one at a time) is deleted, not left behind."""
    dag_id = stream_dag(config)
    if not scheduled_run_due(api, dag_id):
        scheduled_wait = 0  # none comes: its next slot is later (an earlier demo ran this one)
    api.unpause(dag_id)
    began = time.monotonic()
    triggered: str | None = None
    found: list[str] = []

    def started() -> bool:
        nonlocal triggered
        if triggered is not None and api.run_state(dag_id, triggered) == "failed":
            raise SystemExit(f"{dag_id} run {triggered} failed: {api.task_states(dag_id, triggered)}")
        active = api.runs(dag_id)
        if not active and triggered is None and time.monotonic() - began > scheduled_wait:
            triggered = api.trigger(dag_id, {})
        streaming = [
            r["dag_run_id"]
            for r in active
            if api.task_states(dag_id, r["dag_run_id"]).get("stream") == "running"
        ]
        if streaming and running_pid(config) is not None:
            found[:] = streaming[:1]
            return True
        return False

    wait(started, timeout, f"{dag_id} to start the streamer")
    if triggered is not None and triggered != found[0] and api.run_state(dag_id, triggered) == "queued":
        api.delete_run(dag_id, triggered)
    return found[0]


def scheduled_run_due(api: AirflowAPI, dag_id: str) -> bool:
    """Whether unpausing makes the scheduler start a run now: its next run is due (or not
    computed yet)."""
    due = api.api("GET", f"/dags/{dag_id}").get("next_dagrun_run_after")
    return due is None or datetime.fromisoformat(due) <= datetime.now(UTC)


def running_pid(config: ConnectorConfig) -> int | None:
    """The streamer's pid while its status says running and the process lives."""
    streamer = status_document(config, check_source=False).get("streamer") or {}
    pid = streamer.get("pid")
    if streamer.get("state") != "running" or not pid:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1)
