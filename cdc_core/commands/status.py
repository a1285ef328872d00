"""`tidemark status`: the committed position and progress, whether the streamer runs, and
the source's head (or why it cannot be read).

Only what an offset committed is shown as progress: a streamer killed without a word
leaves a status file that says `running` with its live, uncommitted view, which is set
aside once `cdc_core.pipeline.liveness` finds it dead.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig


def describe_offset(config: ConnectorConfig, offset: dict[str, Any] | None) -> str:
    """The committed offset as people read it: the connector describes its own positions."""
    from cdc_core.connectors.registry import connector_of

    if not offset:
        return "nothing"
    text = connector_of(config).describe_position(offset["source"])
    if offset.get("in_txn"):
        text += f" (inside a transaction, {offset['rows_done']} row(s) delivered)"
    return text


def status_document(config: ConnectorConfig, check_source: bool = True) -> dict[str, Any]:
    """Everything known about a connector's state, as one JSON-ready document."""
    from cdc_core.pipeline.liveness import with_liveness
    from cdc_core.pipeline.state import StateLayout, open_offset_store
    from cdc_core.snapshot.context import SnapshotContext

    layout = StateLayout(config)
    store = open_offset_store(config, layout)
    try:
        offset = store.load()
    finally:
        store.close()
    doc: dict[str, Any] = {
        "connector": config.name,
        "topic_prefix": config.topic_prefix,
        "committed_offset": offset,
        "committed_position": describe_offset(config, offset),
    }
    doc["snapshots"] = SnapshotContext.from_json((offset or {}).get("snapshot")).progress()
    if layout.status.exists():
        doc["streamer"] = with_liveness(orjson.loads(layout.status.read_bytes()))
    if check_source:
        doc["source_head"] = source_head(config, offset, layout)
    return doc


def source_head(config: ConnectorConfig, offset: dict[str, Any] | None, layout: Any) -> str:
    """The source's head as its connector describes it, or why it cannot be read; never
    empty, and never a secret of the connector (its values are masked, whatever a driver
    put into its message)."""
    from cdc_core.connectors.registry import connector_of
    from cdc_core.schema.history import SchemaHistory

    source = None
    try:
        source = connector_of(config).create_source(config, SchemaHistory(layout.history))
        head = source.status(offset).head or "unknown: the connector did not say where the source is"
    except Exception as exc:  # a source's own failure, whatever its type: said, not raised
        head = f"unavailable: {type(exc).__name__}: {exc}"
    finally:
        if source is not None:
            with contextlib.suppress(Exception):  # closing what may never have opened
                source.close()
    return without_secrets(str(head), config)


def without_secrets(text: str, config: ConnectorConfig) -> str:
    for name in ("database.password", "sink.kafka.sasl.password"):
        secret = config.secret(name)
        if secret is not None and secret.reveal():
            text = text.replace(secret.reveal(), "***")
    return text


def print_status(doc: dict[str, Any], config: ConnectorConfig) -> None:
    """`tidemark status` for people."""
    print(f"connector   {doc['connector']} (topics {doc['topic_prefix']}.*)")
    print(f"committed   {doc['committed_position']}")
    if "source_head" in doc:
        print(f"source head {doc['source_head']}")
    streamer = doc.get("streamer")
    if streamer:
        state = streamer["state"]
        if state == "dead":
            print(f"streamer    not running: {streamer['error']}")
            print(
                f"            last status {streamer.get('updated_at')} (pid {streamer.get('pid')}, "
                f"{streamer.get('events_total')} change events in that run); progress below is as committed"
            )
        else:
            print(
                f"streamer    {state} (pid {streamer.get('pid')}, updated {streamer.get('updated_at')}), "
                f"{streamer.get('events_total')} change events since it started"
                + (f": {streamer['error']}" if state == "failed" and streamer.get("error") else "")
            )
        for table, count in sorted(streamer.get("per_table", {}).items()):
            print(f"  {table:40s} {count}")
    live = streamer.get("snapshots") if streamer and streamer.get("state") == "running" else None
    print_snapshots(doc["snapshots"], live, config)


def print_snapshots(progress: dict[str, Any], live: dict[str, Any] | None, config: ConnectorConfig) -> None:
    """Snapshot progress as of the committed offset; a running snapshot that is stalled or
    waiting (by the running streamer's own view, `live`) says so and what to do; then the
    refused signals kept, oldest first."""
    from cdc_core.snapshot.health import live_entry, snapshot_health

    for label, snapshots in (("snapshot", progress["running"]), ("finished", progress["finished"][-3:])):
        for snap in snapshots:
            flags = " paused" if snap.get("paused") else ""
            print(f"{label:11s} {snap['id']} ({snap['kind']}, signal {snap['signal_id']}){flags}")
            for t in snap["tables"]:
                total = t.get("windows_total") or "?"
                name = t["table"] + (f"@{t['partition']}" if t.get("partition") else "")
                print(
                    f"  {name:40s} windows {t.get('windows_done', 0)}/{total}  "
                    f"rows {t.get('rows_released', 0)} released, {t.get('rows_dropped', 0)} dropped"
                    + (f", {t['read_again']} to read again" if t.get("read_again") else "")
                    + ("  done" if t.get("done") else "")
                )
            if label == "snapshot":
                health = snapshot_health(
                    snap, live_entry(live, snap), config.get("airflow.snapshot.stall.seconds")
                )
                if health["problem"]:
                    print(f"  {health['state']}: {health['problem']}")
    refused = progress.get("failed_signals", [])
    dropped = progress.get("failed_signals_dropped", 0)
    if refused or dropped:
        days = config.get("signal.refused.retention.days")
        more = f"; {dropped} older one(s) dropped beyond the 200 kept" if dropped else ""
        print(f"refused     {len(refused)} signal(s) in the last {days} day(s){more}:")
    for entry in refused:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.get("at_ms", 0) / 1000))
        print(
            f"refused     signal {entry['id']} ({entry['type']}, from {entry['channel']}) at {when}: {entry['reason']}"
        )


def cmd_status(config: ConnectorConfig, offline: bool, as_json: bool) -> int:
    doc = status_document(config, check_source=not offline)
    if as_json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
        return 0
    print_status(doc, config)
    return 0
