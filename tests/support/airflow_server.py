"""The real Airflow (`airflow standalone`: api-server, scheduler, dag-processor,
triggerer and LocalExecutor workers) for the tests that need more than `dag.test()`:
the status page served by the api-server, task logs written through a real worker, DAG
runs triggered through the REST API as the UI does.

The tests' Airflow reads the DAG bundles tests/conftest.py configures (the product's
dags/ and tests/airflow_dags/) and a connectors folder of its own under
.local/airflow-tests/, holding the demo connector and whatever connectors tests put
there while it runs. It signs in through `POST /auth/token` with the local stack's
development login (scripts/services.py).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from scripts import services

CONNECTORS = services.LOCAL / "airflow-tests" / "connectors"
BUNDLES_ENV = "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"


@dataclass
class AirflowServer:
    url: str
    connectors: Path  # the connectors folder the running Airflow reads
    token: str

    def client(self, authenticated: bool = True) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if authenticated else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """A REST API v2 call that must succeed; its JSON body."""
        with self.client() as client:
            response = client.request(method, f"/api/v2{path}", **kwargs)
        assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text[:2000]}"
        return response.json() if response.content else None

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"/dags/{dag_id}", json={"is_paused": False})

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> dict[str, Any]:
        """The DAG's details once the dag-processor has parsed it."""
        return self.wait_for_details(dag_id, lambda _details: True, timeout, f"DAG {dag_id} to be parsed")

    def wait_for_details(self, dag_id: str, ready: Any, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                response = client.get(f"/api/v2/dags/{dag_id}/details")
                if response.status_code == 200 and ready(response.json()):
                    return response.json()
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"timed out after {timeout:.0f}s waiting for {what}: {response.text[:500]}"
                    )
                time.sleep(2)

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """Trigger a run with `conf` (what the UI's trigger form posts); its run id."""
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", json={"conf": conf, "logical_date": None})
        return run["dag_run_id"]

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> str:
        """The run's final state (success or failed)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]
            if state in ("success", "failed"):
                return state
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{dag_id} run {run_id} still {state} after {timeout:.0f}s; tasks: {self.task_states(dag_id, run_id)}"
                )
            time.sleep(3)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """A task's log as the REST API serves it (the UI's log view), one line per entry."""
        body = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true"},
            headers={"Accept": "application/json"},
        )
        content = body["content"]
        if isinstance(content, str):
            return content
        return "\n".join(
            entry.get("event", "") if isinstance(entry, dict) else str(entry) for entry in content
        )


def login(url: str) -> str:
    """A JWT for the local stack's Airflow user."""
    env = services.environment()
    response = httpx.post(
        f"{url}/auth/token",
        json={"username": env["TIDEMARK_AIRFLOW_USER"], "password": env[services.AIRFLOW_PASSWORD_ENV]},
        timeout=60,
    )
    assert response.status_code in (200, 201), (
        f"login to {url} failed: {response.status_code} {response.text}"
    )
    return response.json()["access_token"]


def _fresh_connectors_folder() -> Path:
    """The tests' connectors folder: the demo connector (linked, so it is the product's
    file) and nothing left over from an earlier run."""
    if CONNECTORS.exists():
        shutil.rmtree(CONNECTORS)
    CONNECTORS.mkdir(parents=True)
    (CONNECTORS / "demo.yaml").symlink_to(services.ROOT / "connectors" / "demo.yaml")
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
    url = services.environment()["TIDEMARK_AIRFLOW_URL"]
    try:
        yield AirflowServer(url, CONNECTORS, login(url))
    finally:
        if started and os.environ.get("TIDEMARK_KEEP_SERVICES") != "1":
            airflow.stop()
