"""DAGs the integration tests run with `dag.test()`. Airflow 3 runs only DAGs that belong
to a bundle, so tests/conftest.py registers this folder as the `tidemark-test-dags`
bundle (tests only; the product's DAGs live in dags/)."""

from __future__ import annotations

import json
import sys

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, dag, task

from spark_jobs import table_checksum
from spark_jobs.classpath import spark_jars_csv

START = pendulum.datetime(2026, 1, 1, tz="UTC")


@dag(dag_id="tidemark_smoke_taskflow", schedule=None, start_date=START, catchup=False)
def smoke_taskflow():
    @task
    def produce() -> list[int]:
        return [1, 2, 3]

    @task
    def total(values: list[int]) -> int:
        return sum(values)

    total(produce())


taskflow_dag = smoke_taskflow()


with DAG(
    dag_id="tidemark_smoke_spark_submit",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"table": "", "out": ""},
) as spark_submit_dag:
    SparkSubmitOperator(
        task_id="checksum",
        conn_id="tidemark_spark_local",
        application=table_checksum.__file__,
        application_args=["--delta", "{{ params.table }}", "--out", "{{ params.out }}"],
        jars=spark_jars_csv(),
        conf={"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1"},
        env_vars={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable},
        name="tidemark-smoke-checksum",
    )

SPARK_LOCAL_CONNECTION = json.dumps({"conn_type": "spark", "host": "local[2]"})
