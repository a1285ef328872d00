"""Run the product's DAGs (dags/) against a connectors folder of a test's own.

The DAG files are generated from `$TIDEMARK_CONNECTORS_DIR` when they are parsed, so a
test points that at its folder and parses the file afresh. The source credentials come
from an Airflow connection given as an environment variable, as in production.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from scripts import services
from tests.support.streamer import Connector, start_process, wait_for, write_connector

DAGS = services.ROOT / "dags"
TEST_CONN_ID = "tidemark_test_source"


def airflow_connector(
    tmp_path: Path, database: str, monkeypatch: Any, extra: dict[str, Any] | None = None
) -> Connector:
    """A connector in its own connectors folder, with Airflow settings and lakehouse paths
    under `tmp_path`; its password only in the Airflow connection."""
    folder = tmp_path / "connectors"
    folder.mkdir(exist_ok=True)
    props = {
        "signal.data.collection": "tidemark.debezium_signal",
        "airflow.conn.id": TEST_CONN_ID,
        **lakehouse_paths(tmp_path),
        "database.password.env": "TIDEMARK_TEST_SOURCE_PASSWORD",  # set by the hook, from the connection
        **(extra or {}),
    }
    connector = serve(write_connector(tmp_path, database, props), folder / "test.yaml", monkeypatch)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{TEST_CONN_ID.upper()}",
        json.dumps(
            {
                "conn_type": "mysql",
                "host": "127.0.0.1",
                "port": services.PORTS.mariadb,
                "login": os.environ["TIDEMARK_DB_USER"],
                "password": os.environ[services.CDC_PASSWORD_ENV],
            }
        ),
    )
    return connector


def lakehouse_paths(tmp_path: Path) -> dict[str, str]:
    """A test connector's Delta tables, merge checkpoint and snapshot staging under `tmp_path`."""
    return {
        "lakehouse.delta.root": str(tmp_path / "delta"),
        "lakehouse.merge.checkpoint": str(tmp_path / "merge-checkpoint"),
        "lakehouse.snapshot.staging": str(tmp_path / "staging"),
    }


def serve(connector: Connector, target: Path, monkeypatch: Any) -> Connector:
    """`connector`'s file moved to `target`, in the connectors folder the DAG files are
    generated from, with Spark jobs on local[2]."""
    connector.path.rename(target)
    connector.path = target
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(target.parent))
    monkeypatch.setenv("AIRFLOW_CONN_TIDEMARK_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    return connector


def start_streamer(connector: Connector) -> subprocess.Popen[bytes]:
    """`tidemark stream` for an `airflow_connector`, as its streamer DAG runs it: the
    password from the connection in the child's environment only. Returns once it runs."""
    proc = start_process(
        connector, env={"TIDEMARK_TEST_SOURCE_PASSWORD": os.environ[services.CDC_PASSWORD_ENV]}
    )
    wait_for(lambda: (connector.state / "status.json").exists(), 120, message="the streamer's first status")
    return proc


def load_dag(file: str, dag_id: str) -> Any:
    """Parse one DAG file of dags/ as the dag-processor would."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS / file), bundle_name="dags-folder")
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def task_states(run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def planned_runs(dag: Any, first: datetime, last: datetime) -> list[tuple[datetime, datetime, datetime]]:
    """(logical date, data interval start, data interval end) of each run the scheduler, and
    `airflow backfill create`, make for logical dates first..last (the DAG's timetable)."""
    from airflow.serialization.serialized_objects import DagSerialization

    scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    return [
        (info.logical_date, info.data_interval.start, info.data_interval.end)
        for info in scheduler_dag.iter_dagrun_infos_between(first, last)
    ]


def airflow_cli(*args: str, timeout: float = 600) -> str:
    """Run the `airflow` command with this process's environment; its output, or an
    assertion error with it."""
    result = subprocess.run(
        [str(services.VENV_BIN / "airflow"), *args], capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, (
        f"airflow {' '.join(args)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout
