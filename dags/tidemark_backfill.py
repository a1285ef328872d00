"""`tidemark_backfill_<connector>`: a time-based re-snapshot, one DAG per connector with
`airflow.backfill.tables`. Each run re-reads its data interval of each table through an
additional condition on the table's timestamp column. `airflow backfill create` runs
any range of past intervals."""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, CronDataIntervalTimetable, get_current_context, task
from tidemark_airflow import connectors
from tidemark_airflow.alerts import connector_failure_callback
from tidemark_airflow.snapshot_form import backfill_form, build_request
from tidemark_airflow.snapshot_steps import snapshot_steps

CONFIGS = connectors.configs()
NAMES = [c.name for c in CONFIGS]

for config in CONFIGS:
    tables = config.get("airflow.backfill.tables")
    if not tables:
        continue
    with DAG(
        dag_id=f"tidemark_backfill_{connectors.slug(config.name)}",
        description=f"Re-snapshot each data interval of {', '.join(tables)}",
        # Runs span data intervals: with a plain cron string Airflow 3 makes a trigger
        # timetable, whose runs have an empty interval (start == end) and re-read nothing.
        schedule=CronDataIntervalTimetable(config.get("airflow.backfill.schedule"), timezone="UTC"),
        start_date=pendulum.parse(config.get("airflow.backfill.start.date")),
        catchup=False,
        max_active_runs=1,
        tags=["tidemark", "backfill"],
    ) as dag:

        @task(on_failure_callback=connector_failure_callback(config.name))
        def validate(
            connector: str = config.name, backfill: tuple[str, ...] = tuple(tables)
        ) -> dict[str, Any]:
            from tidemark_airflow.hooks.source import TidemarkSourceHook

            context = get_current_context()
            form = backfill_form(list(backfill), context["data_interval_start"], context["data_interval_end"])
            return build_request(TidemarkSourceHook(connector).config(), {"connector": connector, **form})

        snapshot_steps(config.name, validate(), NAMES)
    globals()[dag.dag_id] = dag
