"""The real Airflow (`airflow standalone`: api-server, scheduler, dag-processor,
triggerer and LocalExecutor workers) for the tests that need more than `dag.test()`:
the status page served by the api-server, task logs written through a real worker, DAG
runs triggered through the REST API as the UI does.

The tests' Airflow reads the DAG bundles tests/conftest.py configures (the product's
dags/ and tests/airflow_dags/) and a connectors folder of its own under
.local/airflow-tests/, holding the demo connectors and whatever connectors tests put
there while it runs. It signs in through `POST /auth/token` with the local stack's
development login (scripts/services/settings.py); demo/airflow_api.py is the REST client.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from demo.airflow_api import AirflowAPI
from scripts import services

CONNECTORS = services.LOCAL / "airflow-tests" / "connectors"
BUNDLES_ENV = "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"


class AirflowServer(AirflowAPI):
    """The REST API of the running Airflow, signed in, and the connectors folder it reads."""

    def __init__(self, url: str, token: str, connectors: Path) -> None:
        super().__init__(url, token)
        self.connectors = connectors


def _fresh_connectors_folder() -> Path:
    """The tests' connectors folder: the demo connectors (linked, so they are the
    product's files) and nothing left over from an earlier run."""
    if CONNECTORS.exists():
        shutil.rmtree(CONNECTORS)
    CONNECTORS.mkdir(parents=True)
    for demo in sorted((services.ROOT / "connectors").glob("demo*.yaml")):
        (CONNECTORS / demo.name).symlink_to(demo)
    return CONNECTORS


@contextmanager
def running_airflow() -> Iterator[AirflowServer]:
    """Airflow with the tests' DAG bundles and connectors folder, started if not running
    and stopped again afterwards if started here (TIDEMARK_KEEP_SERVICES=1 keeps it)."""
    extra = {"TIDEMARK_CONNECTORS_DIR": str(CONNECTORS), BUNDLES_ENV: os.environ[BUNDLES_ENV]}
    airflow = services.Airflow(extra)
    _fresh_connectors_folder()
    try:
        started = airflow.start()
    except services.ServiceError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        api = AirflowAPI.local()
        yield AirflowServer(api.url, api.token, CONNECTORS)
    finally:
        if started and os.environ.get("TIDEMARK_KEEP_SERVICES") != "1":
            airflow.stop()
