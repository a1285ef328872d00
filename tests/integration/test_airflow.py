"""Airflow 3 runs DAGs against its migrated SQLite metadata database: a TaskFlow DAG with
XComs, and SparkSubmitOperator running a `spark_jobs/` script in local mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_taskflow_dag_runs_with_dag_test():
    from tests.airflow_dags.smoke_dags import taskflow_dag

    run = taskflow_dag.test()
    assert run.state == "success"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"produce": "success", "total": "success"}


def test_spark_submit_operator_runs_a_spark_job(spark, tmp_path, monkeypatch):
    from spark_jobs.table_checksum import table_checksum
    from tests.airflow_dags.smoke_dags import SPARK_LOCAL_CONNECTION, spark_submit_dag

    table = str(tmp_path / "orders")
    data = spark.createDataFrame(
        [(i, f"item-{i}", i * 1.5) for i in range(50)], "id INT, item STRING, price DOUBLE"
    )
    data.write.format("delta").save(table)
    expected = table_checksum(data)

    monkeypatch.setenv("AIRFLOW_CONN_TIDEMARK_SPARK_LOCAL", SPARK_LOCAL_CONNECTION)
    out = tmp_path / "checksum.json"
    run = spark_submit_dag.test(run_conf={"table": table, "out": str(out)})
    assert run.state == "success"
    result = json.loads(out.read_text())
    assert result == {"table": table, **expected}
    assert result["rows"] == 50


def test_the_hook_registers_the_connection_password_with_the_secrets_masker(
    tmp_path, monkeypatch, scratch_db
):
    """The source password from the Airflow connection is handed to Airflow's secrets
    masker when the hook loads the connector, so task log lines that contain it show ***.
    (dag.test() runs tasks without the log pipeline that applies the masker; the check
    through a real api-server and worker comes with the status page tests.)"""
    import os

    from airflow.sdk._shared.secrets_masker import redact
    from tidemark_airflow.hooks.source import TidemarkSourceHook

    from scripts import services
    from tests.support.airflow_dags import airflow_connector

    connector = airflow_connector(tmp_path, scratch_db, monkeypatch)
    password = os.environ[services.CDC_PASSWORD_ENV]
    hook = TidemarkSourceHook(connector.config().name)
    config = hook.config()
    assert config.secret("database.password").reveal() == password
    assert redact(f"connecting with {password}") == "connecting with ***"
    # The child processes get it through their environment only, never in arguments
    # or the connector file they load.
    assert hook.child_env()["TIDEMARK_TEST_SOURCE_PASSWORD"] == password
    assert password not in Path(hook.config_file()).read_text()
