"""Airflow 3 runs DAGs against its migrated SQLite metadata database: a TaskFlow DAG with
XComs, and SparkSubmitOperator running a `spark_jobs/` script in local mode."""

from __future__ import annotations

import json

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
