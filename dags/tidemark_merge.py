"""`tidemark_merge`: every connector's change events merged into its Delta tables
(available-now batches on a schedule), with the tables as Asset events; and
`tidemark_housekeeping`: OPTIMIZE, VACUUM and expired tombstones, daily.

The schedules are `$TIDEMARK_MERGE_SCHEDULE` (default every 15 minutes) and
`$TIDEMARK_HOUSEKEEPING_SCHEDULE` (default @daily).
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pendulum
from airflow.sdk import DAG, task
from airflow.sdk.definitions.taskgroup import TaskGroup
from tidemark_airflow import connectors
from tidemark_airflow.alerts import connector_failure_callback
from tidemark_airflow.operators.spark_jobs import (
    TidemarkSparkJobOperator,
    housekeeping_job_args,
    merge_job_args,
)
from tidemark_airflow.snapshot_steps import delta_alias, publish_tables

CONFIGS = connectors.configs()
START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG(
    dag_id="tidemark_merge",
    description="Merge every connector's change events into Delta (idempotent, transaction-aligned)",
    schedule=os.environ.get("TIDEMARK_MERGE_SCHEDULE", "*/15 * * * *"),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["tidemark", "merge"],
) as merge_dag:
    for config in CONFIGS:
        slug = connectors.slug(config.name)
        with TaskGroup(group_id=f"merge_{slug}"):
            merge = TidemarkSparkJobOperator(
                task_id="merge",
                connector=config.name,
                job="delta_merge",
                job_args=merge_job_args,
                retries=2,
                retry_delay=timedelta(minutes=1),
                on_failure_callback=connector_failure_callback(config.name),
            )

            @task(task_id="publish", outlets=[delta_alias(config.name)])
            def publish(connector: str = config.name, *, outlet_events: Any = None) -> list[dict[str, Any]]:
                return publish_tables(outlet_events, connector, None)

            merge >> publish()

with DAG(
    dag_id="tidemark_housekeeping",
    description="OPTIMIZE, VACUUM and tombstone collection of every connector's Delta tables",
    schedule=os.environ.get("TIDEMARK_HOUSEKEEPING_SCHEDULE", "@daily"),
    start_date=START,
    catchup=False,
    max_active_runs=1,
    tags=["tidemark", "housekeeping"],
) as housekeeping_dag:
    for config in CONFIGS:
        TidemarkSparkJobOperator(
            task_id=f"housekeeping_{connectors.slug(config.name)}",
            connector=config.name,
            job="delta_housekeeping",
            job_args=housekeeping_job_args,
            on_failure_callback=connector_failure_callback(config.name),
        )
