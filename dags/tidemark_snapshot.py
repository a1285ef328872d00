"""`tidemark_snapshot`: the ad-hoc snapshot form. Trigger it from the UI (Trigger DAG →
the form) or the REST API with the same fields as `conf`."""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import dag, get_current_context, task
from tidemark_airflow import connectors
from tidemark_airflow.alerts import connector_failure_callback
from tidemark_airflow.snapshot_form import build_request, snapshot_params
from tidemark_airflow.snapshot_steps import snapshot_steps

NAMES = [c.name for c in connectors.configs()]
CONNECTOR = "{{ params.connector }}"


@dag(
    dag_id="tidemark_snapshot",
    description="Ad-hoc snapshot: validate → signal → Spark chunk job → wait for release → merge → Asset events",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params=snapshot_params(NAMES),
    tags=["tidemark", "snapshot"],
    render_template_as_native_obj=False,
)
def tidemark_snapshot() -> None:
    @task(on_failure_callback=connector_failure_callback(CONNECTOR))
    def validate() -> dict[str, Any]:
        from airflow.sdk.exceptions import AirflowFailException
        from tidemark_airflow.hooks.source import TidemarkSourceHook

        from cdc_core.errors import TidemarkError

        form = dict(get_current_context()["params"])
        try:
            return build_request(TidemarkSourceHook(form["connector"]).config(), form)
        except TidemarkError as exc:  # a bad request is not retried
            raise AirflowFailException(f"snapshot request refused: {exc}") from None

    snapshot_steps(CONNECTOR, validate(), NAMES)


tidemark_snapshot()
