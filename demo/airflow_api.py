"""A small client of Airflow's REST API v2, signed in with a JWT from `POST /auth/token`:
what the demo and the tests do in the UI — unpause a DAG, trigger it with its form's
fields as `conf`, follow the run, read a task's log — done over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

ACTIVE = ("queued", "running")


class AirflowAPIError(RuntimeError):
    pass


class AirflowAPI:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token

    @classmethod
    def login(cls, url: str, username: str, password: str) -> AirflowAPI:
        try:
            response = httpx.post(
                f"{url}/auth/token", json={"username": username, "password": password}, timeout=60
            )
        except httpx.HTTPError as exc:
            raise AirflowAPIError(f"Airflow is not answering at {url}: {exc}") from None
        if response.status_code not in (200, 201):
            raise AirflowAPIError(
                f"signing in to Airflow at {url} as {username} failed: {response.status_code}"
            )
        return cls(url, response.json()["access_token"])

    @classmethod
    def local(cls) -> AirflowAPI:
        """Signed in to the local stack's Airflow with its development login."""
        from scripts import services

        env = services.environment()
        return cls.login(
            env["TIDEMARK_AIRFLOW_URL"], env["TIDEMARK_AIRFLOW_USER"], env[services.AIRFLOW_PASSWORD_ENV]
        )

    def client(self, authenticated: bool = True) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if authenticated else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """A REST API v2 call that must succeed; its JSON body."""
        with self.client() as client:
            response = client.request(method, f"/api/v2{path}", **kwargs)
        if response.status_code >= 300:
            raise AirflowAPIError(f"{method} /api/v2{path}: {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    # ------------------------------------------------------------------ DAGs

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.api("PATCH", f"/dags/{dag_id}", json={"is_paused": paused})

    def unpause(self, dag_id: str) -> None:
        self.set_paused(dag_id, False)

    def wait_for_details(
        self, dag_id: str, ready: Callable[[dict[str, Any]], bool], timeout: float, what: str
    ) -> dict[str, Any]:
        """The DAG's details once `ready` holds for them (the dag-processor has parsed
        the DAG, a new connector is in its form, ...)."""
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                response = client.get(f"/api/v2/dags/{dag_id}/details")
                if response.status_code == 200 and ready(response.json()):
                    return response.json()
                if time.monotonic() > deadline:
                    raise AirflowAPIError(
                        f"timed out after {timeout:.0f}s waiting for {what}: {response.text[:500]}"
                    )
                time.sleep(2)

    def wait_for_dag(self, dag_id: str, timeout: float = 300) -> dict[str, Any]:
        return self.wait_for_details(dag_id, lambda _details: True, timeout, f"DAG {dag_id} to be parsed")

    # ------------------------------------------------------------------ runs

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        """Trigger a run with `conf` (what the UI's trigger form posts); its run id."""
        run = self.api("POST", f"/dags/{dag_id}/dagRuns", json={"conf": conf, "logical_date": None})
        return run["dag_run_id"]

    def runs(self, dag_id: str, states: tuple[str, ...] = ACTIVE) -> list[dict[str, Any]]:
        """The DAG's runs in those states (run id, conf, state, ...)."""
        params = [("state", s) for s in states] + [("limit", 100)]
        return self.api("GET", f"/dags/{dag_id}/dagRuns", params=params)["dag_runs"]

    def delete_run(self, dag_id: str, run_id: str) -> None:
        self.api("DELETE", f"/dags/{dag_id}/dagRuns/{run_id}")

    def fail_run(self, dag_id: str, run_id: str) -> None:
        """Mark a run failed: Airflow stops its running tasks (their on_kill runs)."""
        self.set_run_state(dag_id, run_id, "failed")

    def set_run_state(self, dag_id: str, run_id: str, state: str) -> None:
        """Mark a run `success` or `failed`: Airflow stops its running tasks (their on_kill
        runs) and gives its unfinished tasks that state."""
        self.api("PATCH", f"/dags/{dag_id}/dagRuns/{run_id}", json={"state": state})

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str | None]:
        tis = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {ti["task_id"]: ti["state"] for ti in tis}

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float,
        on_change: Callable[[dict[str, str | None]], None] | None = None,
        on_poll: Callable[[], None] | None = None,
    ) -> str:
        """The run's final state (success or failed); `on_change` sees the task states
        each time they change, `on_poll` is called at every poll."""
        deadline = time.monotonic() + timeout
        seen: dict[str, str | None] = {}
        while True:
            state = self.run_state(dag_id, run_id)
            if on_change is not None:
                tasks = self.task_states(dag_id, run_id)
                if tasks != seen:
                    on_change(tasks)
                    seen = tasks
            if on_poll is not None:
                on_poll()
            if state in ("success", "failed"):
                return state
            if time.monotonic() > deadline:
                raise AirflowAPIError(
                    f"{dag_id} run {run_id} still {state} after {timeout:.0f}s; tasks: {self.task_states(dag_id, run_id)}"
                )
            time.sleep(3)

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
