"""One streamer DAG per connector (`tidemark_stream_<connector>`), from connectors/*.yaml.

Each run supervises the streamer for one schedule slot (restarting it after a crash) and
checks its health and lag alongside; the next run takes over from the committed offsets.
max_active_runs=1 and the connector's lease keep it to one streamer at a time.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from tidemark_airflow import connectors
from tidemark_airflow.alerts import connector_failure_callback
from tidemark_airflow.operators.streamer import StreamerOperator
from tidemark_airflow.sensors.streamer import StreamerHealthSensor

for config in connectors.configs():
    minutes = config.get("airflow.streamer.interval.minutes")
    alert = connector_failure_callback(config.name)
    with DAG(
        dag_id=f"tidemark_stream_{connectors.slug(config.name)}",
        description=f"Streamer of connector {config.name} ({config.get('connector.class')})",
        schedule=timedelta(minutes=minutes),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["tidemark", "streamer"],
        default_args={"on_failure_callback": alert},
    ) as dag:
        # The slot ends a little before the next run starts, so handover leaves no overlap.
        stream = StreamerOperator(
            task_id="stream",
            connector=config.name,
            run_seconds=max(30, minutes * 60 - 20),
            restarts=config.get("airflow.streamer.restarts"),
            retries=1,
            retry_delay=timedelta(seconds=10),
            execution_timeout=timedelta(minutes=minutes + 5),
        )
        health = StreamerHealthSensor(task_id="health", connector=config.name, health_timeout_seconds=120)
    globals()[dag.dag_id] = dag
