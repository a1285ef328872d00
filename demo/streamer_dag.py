"""The demo connector's streamer under Airflow: stopped (DAG paused, active runs failed,
which makes Airflow stop the streamer through its operator's on_kill) before the demo
resets its state, then started by unpausing and triggering `tidemark_stream_<connector>`,
and followed through the connector's own state files."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from cdc_core.cli import status_document
from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mysql.positions import MariaDbGtidState
from demo.airflow_api import AirflowAPI

SNAPSHOT_DAG = "tidemark_snapshot"


def stream_dag(config: ConnectorConfig) -> str:
    from tidemark_airflow.connectors import slug

    return f"tidemark_stream_{slug(config.name)}"


def stop(api: AirflowAPI, config: ConnectorConfig, timeout: float = 180) -> None:
    """No streamer and no snapshot run of this connector left running in Airflow."""
    dag_id = stream_dag(config)
    api.set_paused(dag_id, True)
    for run in api.runs(dag_id):
        api.fail_run(dag_id, run["dag_run_id"])
    for run in api.runs(SNAPSHOT_DAG):
        if (run.get("conf") or {}).get("connector") == config.name:
            api.fail_run(SNAPSHOT_DAG, run["dag_run_id"])
    wait(lambda: running_pid(config) is None, timeout, f"the {config.name} streamer to stop")


def start(api: AirflowAPI, config: ConnectorConfig, timeout: float = 300) -> str:
    """Unpause the streamer DAG and trigger a run now; its run id once the streamer
    reports running (it has opened the log at its start position by then)."""
    dag_id = stream_dag(config)
    run_id = api.trigger(dag_id, {})
    api.unpause(dag_id)

    def started() -> bool:
        if api.run_state(dag_id, run_id) == "failed":
            raise SystemExit(f"{dag_id} run {run_id} failed: {api.task_states(dag_id, run_id)}")
        return running_pid(config) is not None

    wait(started, timeout, f"{dag_id} to start the streamer")
    return run_id


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


def caught_up(config: ConnectorConfig, head: str) -> bool:
    """Whether the committed offset has reached the source position `head`."""
    offset: dict[str, Any] = status_document(config, check_source=False).get("committed_offset") or {}
    committed = (offset.get("source") or {}).get("gtids")
    return bool(committed) and MariaDbGtidState.parse(committed).succeeds(MariaDbGtidState.parse(head))


def wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1)
