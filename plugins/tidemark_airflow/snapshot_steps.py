"""The steps every snapshot run takes, shared by the ad-hoc snapshot DAG and the backfill
DAGs: send the signal → the Spark chunk job (incremental snapshots) → wait, deferred,
until every window is released → merge into Delta → Asset events for the tables."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Asset, AssetAlias, task
from airflow.sdk.bases.operator import BaseOperator

from tidemark_airflow import connectors
from tidemark_airflow.alerts import connector_failure_callback
from tidemark_airflow.delta_log import last_commit
from tidemark_airflow.lakehouse import delta_tables, lakehouse_paths
from tidemark_airflow.operators.signals import SendSignalOperator
from tidemark_airflow.operators.spark_jobs import (
    TidemarkSparkJobOperator,
    chunk_job_args,
    merge_job_args,
)
from tidemark_airflow.sensors.snapshot import SnapshotReleasedSensor


def delta_alias(connector: str) -> AssetAlias:
    """The alias a connector's Delta table Asset events are attached to."""
    return AssetAlias(f"tidemark-delta-{connectors.slug(connector)}")


def table_uri(delta_root: str, table: str) -> str:
    root = delta_root.rstrip("/")
    return f"{root}/{table}" if "://" in root else f"file://{root}/{table}"


def publish_tables(outlet_events: Any, connector: str, tables: list[str] | None) -> list[dict[str, Any]]:
    """One Asset event per Delta table (the given ones, or all of the connector's), with
    its last commit: version, operation and the source position it reached."""
    config = connectors.load(connector)
    root = lakehouse_paths(config)["delta_root"]
    names = sorted(set(tables) & set(delta_tables(config))) if tables is not None else delta_tables(config)
    published = []
    for name in names:
        commit = last_commit(f"{root}/{name}") if "://" not in root else None
        extra = {"connector": connector, "table": name, **({"commit": commit} if commit else {})}
        outlet_events[delta_alias(connector)].add(
            Asset(table_uri(root, name), group="tidemark-delta"), extra=extra
        )
        published.append(extra)
    return published


def snapshot_steps(connector: str, request: Any, all_connectors: list[str]) -> BaseOperator:
    """Wire the steps after a validated `request` (an XComArg of `build_request`'s
    output); returns the last task."""
    alert = connector_failure_callback(connector)
    send = SendSignalOperator(
        task_id="send_signal",
        connector=connector,
        signal_type="execute-snapshot",
        data=request["signal"],
        on_failure_callback=alert,
    )

    @task.branch(task_id="route")
    def route(req: dict[str, Any]) -> str:
        return "chunk_job" if req["reader"] == "spark" else "wait_released"

    job_args = ["--signal", send.output, "--parallelism", request["parallelism"]]
    chunk = TidemarkSparkJobOperator(
        task_id="chunk_job",
        connector=connector,
        job="incremental_snapshot",
        job_args=chunk_job_args,
        extra_args=job_args,
        # A killed job is run again; each run reads only the windows not yet released.
        retries=2,
        retry_delay=timedelta(seconds=15),
        on_failure_callback=alert,
    )
    wait = SnapshotReleasedSensor(
        task_id="wait_released",
        connector=connector,
        signal_id=send.output,
        chunk_job_args=job_args,  # a stalled snapshot has its chunk job run again
        trigger_rule="none_failed_min_one_success",
        on_failure_callback=alert,
    )
    merge = TidemarkSparkJobOperator(
        task_id="merge",
        connector=connector,
        job="delta_merge",
        job_args=merge_job_args,
        on_failure_callback=alert,
    )

    @task(task_id="publish", outlets=[delta_alias(c) for c in all_connectors])
    def publish(req: dict[str, Any], *, outlet_events: Any = None) -> list[dict[str, Any]]:
        return publish_tables(outlet_events, req["connector"], [t["table"] for t in req["tables"]])

    routed = route(request)
    send >> routed >> [chunk, wait]
    chunk >> wait >> merge
    done = publish(request)
    merge >> done
    return done
