"""What the status page shows, gathered from each connector's own files: its committed
offsets and status file (`tidemark status`), its alerts and its Delta tables' logs.

No Airflow database, no source database, no Spark: the api-server answers a request by
reading files, so the page works while the source or a merge is down — which is when it
is needed. Nothing here reads a secret: connectors are loaded without their password and
the report carries positions, counts and messages only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.connectors.registry import connector_of
from cdc_core.errors import TidemarkError
from cdc_core.snapshot.health import live_entry, snapshot_health
from tidemark_airflow import connectors
from tidemark_airflow.alerts import recent_alerts
from tidemark_airflow.delta_log import last_commit
from tidemark_airflow.hooks import state
from tidemark_airflow.lakehouse import delta_tables, lakehouse_paths

FINISHED_SHOWN = 3
ALERTS_SHOWN = 5
REFUSED_SHOWN = 5  # on the main page; the connector's refused-signals page lists them all


def status_report() -> dict[str, Any]:
    """Every connector of the connectors folder, in file-name order. A connector whose
    file or state cannot be read is listed with the reason instead of failing the page."""
    return {
        "generated_at": _utc(time.time()),
        "connectors_dir": str(connectors.connectors_dir()),
        "connectors": [_connector_entry(path) for path in connectors.connector_paths()],
    }


def _connector_entry(path: Path) -> dict[str, Any]:
    try:
        config = load_config(path, environ={})
    except TidemarkError as exc:
        return {"name": path.stem, "file": path.name, "error": str(exc)}
    try:
        return connector_report(config, path.name)
    except (TidemarkError, OSError, ValueError) as exc:
        return {"name": config.name, "file": path.name, "error": f"cannot read its state: {exc}"}


def connector_report(config: ConnectorConfig, file: str) -> dict[str, Any]:
    """One connector: its streamer, committed position and lag, snapshots, Delta tables
    and latest alerts."""
    doc = state.status(config, check_source=False)
    health = state.streamer_health(doc, config.get("airflow.streamer.max.lag.seconds"))
    slug = connectors.slug(config.name)
    return {
        "name": config.name,
        "file": file,
        "connector_class": config.get("connector.class"),
        "source": connector_of(config).describe_source(config),
        "topic_prefix": config.topic_prefix,
        "dags": _dags(config, slug),
        "streamer": _streamer(doc, health),
        "committed_position": doc.get("committed_position"),
        "snapshots": _snapshots(
            doc.get("snapshots") or {},
            (doc.get("streamer") or {}).get("snapshots") if health["state"] == "running" else None,
            config.get("airflow.snapshot.stall.seconds"),
        ),
        **_refused(doc.get("snapshots") or {}, config),
        "delta_tables": _delta(config),
        "alerts": recent_alerts(config.state_directory(), ALERTS_SHOWN),
    }


def _refused(progress: dict[str, Any], config: ConnectorConfig) -> dict[str, Any]:
    """The refused signals kept (newest first, with their reasons), for how long they are
    kept, and how many beyond the cap were dropped."""
    return {
        "refused_signals": [
            {**f, "at": _utc(f["at_ms"] / 1000) if f.get("at_ms") else None}
            for f in reversed(progress.get("failed_signals", []))
        ],
        "refused_dropped": progress.get("failed_signals_dropped", 0),
        "refused_kept_days": config.get("signal.refused.retention.days"),
    }


def connector_refusals(name: str) -> dict[str, Any] | None:
    """One connector's entry (its refused signals in full), by name; None when no
    connector file of the folder has that name."""
    for path in connectors.connector_paths():
        entry = _connector_entry(path)
        if entry["name"] == name:
            return entry
    return None


def _dags(config: ConnectorConfig, slug: str) -> dict[str, str]:
    dags = {"stream": f"tidemark_stream_{slug}", "snapshot": "tidemark_snapshot", "merge": "tidemark_merge"}
    if config.get("airflow.backfill.tables"):
        dags["backfill"] = f"tidemark_backfill_{slug}"
    return dags


def _streamer(doc: dict[str, Any], health: dict[str, Any]) -> dict[str, Any]:
    streamer = doc.get("streamer") or {}
    return {
        "state": health["state"],
        "healthy": health["healthy"],
        "problems": health["problems"],
        "pid": streamer.get("pid"),
        "updated_at": streamer.get("updated_at"),
        "events_total": streamer.get("events_total"),
        "events_per_second": streamer.get("rate"),
        "lag_seconds": health["lag_seconds"],
        "per_table": streamer.get("per_table") or {},
    }


def _snapshots(
    progress: dict[str, Any], live: dict[str, Any] | None, stall_seconds: float
) -> list[dict[str, Any]]:
    """Running snapshots first (running, paused, waiting for a high watermark, or stalled,
    with what to do), then the last few finished ones (newest first), each with windows
    done/total per table. `live`: the running streamer's own view, None when it is not
    running."""
    shown = []
    for snap in progress.get("running", []):
        health = snapshot_health(snap, live_entry(live, snap), stall_seconds)
        shown.append({**_snapshot(snap), "state": health["state"], "problem": health["problem"]})
    finished = progress.get("finished", [])[-FINISHED_SHOWN:]
    shown += [{**_snapshot(s), "state": "finished"} for s in reversed(finished)]
    return shown


def _snapshot(snap: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": snap.get("id"),
        "signal_id": snap.get("signal_id"),
        "kind": snap.get("kind"),
        "paused": bool(snap.get("paused")),
        "started_at": _utc(snap["started_ms"] / 1000) if snap.get("started_ms") else None,
        "finished_at": _utc(snap["finished_ms"] / 1000) if snap.get("finished_ms") else None,
        "tables": [
            {
                # a partitioned source's tables are read per partition (Vitess: per shard)
                "table": t.get("table") + (f"@{t['partition']}" if t.get("partition") else ""),
                "windows_done": t.get("windows_done", 0),
                "windows_total": t.get("windows_total"),
                "rows_released": t.get("rows_released", 0),
                "rows_dropped": t.get("rows_dropped", 0),
                "read_again": t.get("read_again", 0),
                "done": bool(t.get("done")),
            }
            for t in snap.get("tables", [])
        ],
    }


def _delta(config: ConnectorConfig) -> list[dict[str, Any]]:
    root = lakehouse_paths(config)["delta_root"]
    tables = []
    for name in delta_tables(config):
        commit = last_commit(Path(root) / name)
        if commit and commit.get("timestamp_ms"):
            commit["committed_at"] = _utc(commit["timestamp_ms"] / 1000)
        tables.append({"table": name, "path": str(Path(root) / name), "last_commit": commit})
    return tables


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
