"""What a connector's streamer has done: committed position, snapshot progress, health.

Everything here reads the connector's own state (offsets, status file) and is safe to
call from the triggerer's event loop through a thread: no Airflow database access.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config


def status(config: ConnectorConfig, check_source: bool = False) -> dict[str, Any]:
    """The `tidemark status --json` document of the connector."""
    from cdc_core.cli import status_document

    return status_document(config, check_source=check_source)


def status_of_file(config_file: str, check_source: bool = False) -> dict[str, Any]:
    return status(load_config(config_file), check_source)


def snapshot_progress(doc: dict[str, Any], signal_id: str) -> tuple[str, dict[str, Any] | None]:
    """("finished" | "running" | "refused" | "unknown", the snapshot's entry, or the
    refusal's with its reason) for the snapshot the signal asked for, as of the committed
    offsets."""
    progress = doc.get("snapshots") or {}
    for state in ("finished", "running"):
        for snap in progress.get(state, []):
            if snap.get("signal_id") == signal_id or snap.get("id") == signal_id:
                return state, snap
    for refusal in progress.get("failed_signals", []):
        if refusal.get("id") == signal_id:
            return "refused", refusal
    return "unknown", None


def refusal_message(signal_id: str, refusal: dict[str, Any]) -> str:
    return f"the streamer refused snapshot signal {signal_id}: {refusal.get('reason')}"


def streamer_health(doc: dict[str, Any], max_lag_seconds: float, stale_seconds: float = 60) -> dict[str, Any]:
    """Whether the streamer is running, fresh and within its lag bound, with the reason."""
    streamer = doc.get("streamer") or {}
    state = streamer.get("state", "never started")
    updated = streamer.get("updated_at")
    age = None
    if updated:
        stamp = datetime.strptime(updated, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        age = time.time() - stamp.timestamp()
    lag_ms = streamer.get("lag_ms")
    lag = None if lag_ms is None else lag_ms / 1000
    problems = []
    if state == "never started":
        problems.append("the streamer has never started")
    elif state != "running":
        problems.append(f"streamer is {state}" + (f": {streamer['error']}" if streamer.get("error") else ""))
    elif age is not None and age > stale_seconds:
        problems.append(f"streamer status not updated for {age:.0f}s")
    if lag is not None and lag > max_lag_seconds:
        problems.append(f"lag {lag:.0f}s exceeds {max_lag_seconds:.0f}s")
    return {
        "healthy": not problems,
        "state": state,
        "lag_seconds": lag,
        "events_total": streamer.get("events_total"),
        "committed_position": doc.get("committed_position"),
        "problems": problems,
    }
