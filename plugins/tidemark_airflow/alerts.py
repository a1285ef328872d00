"""Failure alerts: every failed Tidemark task is logged as an alert and recorded in the
connector's state folder, where the status page lists the latest ones. Email and other
notifiers are Airflow's own (`email`, `on_failure_callback` notifiers in default_args)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("tidemark.alerts")

MAX_KEPT = 200


def alerts_file(state_dir: Path) -> Path:
    return state_dir / "alerts.jsonl"


def record_alert(state_dir: Path, alert: dict[str, Any]) -> None:
    path = alerts_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines()[-(MAX_KEPT - 1) :] if path.exists() else []
    lines.append(json.dumps(alert, sort_keys=True, default=str))
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def recent_alerts(state_dir: Path, limit: int = 10) -> list[dict[str, Any]]:
    path = alerts_file(state_dir)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()[-limit:] if line.strip()]


def connector_failure_callback(connector: str) -> Any:
    """An `on_failure_callback` for tasks of one connector (a form's connector is
    resolved from the run's params)."""

    def callback(context: Any) -> None:
        from tidemark_airflow import connectors

        name = connector
        if "{{" in name:
            name = str((context.get("params") or {}).get("connector", ""))
        ti = context.get("ti")
        alert = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "connector": name,
            "dag_id": getattr(ti, "dag_id", None),
            "task_id": getattr(ti, "task_id", None),
            "run_id": getattr(ti, "run_id", None),
            "error": str(context.get("exception") or "failed"),
        }
        log.error(
            "ALERT connector %s: %s.%s failed: %s", name, alert["dag_id"], alert["task_id"], alert["error"]
        )
        try:
            record_alert(connectors.load(name).state_directory(), alert)
        except Exception as exc:  # an alert must never fail the callback chain
            log.error("could not record the alert for %s: %s", name, exc)

    return callback
