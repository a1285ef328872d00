"""`tidemark`: run a streamer or inspect its state.

tidemark stream --config connector.yaml     stream until SIGTERM (live status line)
tidemark status --config connector.yaml     last committed position, progress, source head
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig, load_config
from cdc_core.errors import TidemarkError

# Exit code of `tidemark stream` when another streamer holds the connector's lease, so a
# supervisor can tell "already running" from a crash.
LEASE_HELD = 3


def _load(path: str) -> ConnectorConfig:
    return load_config(Path(path))


def cmd_stream(args: argparse.Namespace) -> int:
    from cdc_core.pipeline.state import LeaseError
    from cdc_core.pipeline.streamer import Streamer

    config = _load(args.config)
    show = args.status_line == "always" or (args.status_line == "auto" and sys.stderr.isatty())
    streamer = Streamer(config, status_line=show)
    streamer.install_signal_handlers()
    try:
        code = streamer.run(max_seconds=args.max_seconds, stop_when_idle=args.stop_when_idle)
    except LeaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return LEASE_HELD
    if streamer.status_line:
        sys.stderr.write("\n")
    logging.getLogger("tidemark").info(
        "stopped: %d events, committed %s",
        streamer.events_total,
        _describe_offset(config, streamer.committed),
    )
    return code


def _describe_offset(config: ConnectorConfig, offset: dict[str, Any] | None) -> str:
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
    from cdc_core.pipeline.state import StateLayout, open_offset_store

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
        "committed_position": _describe_offset(config, offset),
    }
    from cdc_core.snapshot.context import SnapshotContext

    doc["snapshots"] = SnapshotContext.from_json((offset or {}).get("snapshot")).progress()
    if layout.status.exists():
        doc["streamer"] = orjson.loads(layout.status.read_bytes())
    if check_source:
        from cdc_core.connectors.registry import connector_of
        from cdc_core.schema.history import SchemaHistory

        source = connector_of(config).create_source(config, SchemaHistory(layout.history))
        status = source.status(offset)
        doc["source_head"] = status.head
    return doc


def cmd_status(args: argparse.Namespace) -> int:
    config = _load(args.config)
    doc = status_document(config, check_source=not args.offline)
    if args.json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2, default=str).decode() + "\n")
        return 0
    print(f"connector   {doc['connector']} (topics {doc['topic_prefix']}.*)")
    print(f"committed   {doc['committed_position']}")
    if "source_head" in doc:
        print(f"source head {doc['source_head']}")
    streamer = doc.get("streamer")
    if streamer:
        print(
            f"streamer    {streamer['state']} (pid {streamer['pid']}, updated {streamer['updated_at']}), "
            f"{streamer['events_total']} change events since it started"
        )
        for table, count in sorted(streamer.get("per_table", {}).items()):
            print(f"  {table:40s} {count}")
        skipped = streamer.get("skipped_events") or {}
        if skipped.get("total"):
            print(
                f"skipped     {skipped['total']} event(s) left out (event.processing.failure.handling.mode)"
            )
            for event in skipped.get("recent", [])[-5:]:
                print(
                    f"  {event['table']} _id {event['key'] or 'unreadable'} at {event['where']}: {event['reason']}"
                )
    live = streamer.get("snapshots") if streamer and streamer.get("state") == "running" else None
    _print_snapshots(doc["snapshots"], live, config.get("airflow.snapshot.stall.seconds"))
    return 0


def _print_snapshots(progress: dict[str, Any], live: dict[str, Any] | None, stall_seconds: float) -> None:
    """Snapshot progress as of the committed offset; a running snapshot that is stalled or
    waiting (by the running streamer's own view, `live`) says so and what to do."""
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
                health = snapshot_health(snap, live_entry(live, snap), stall_seconds)
                if health["problem"]:
                    print(f"  {health['state']}: {health['problem']}")
    for refused in progress.get("failed_signals", []):
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(refused.get("at_ms", 0) / 1000))
        print(
            f"refused     signal {refused['id']} ({refused['type']}, from {refused['channel']}) at {when}: {refused['reason']}"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidemark", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    stream = sub.add_parser("stream", help="stream changes until stopped")
    stream.add_argument("--config", required=True)
    stream.add_argument("--max-seconds", type=float, help="stop after this long (bounded runs)")
    stream.add_argument("--stop-when-idle", type=float, help="stop once the log was idle this many seconds")
    stream.add_argument(
        "--status-line",
        nargs="?",
        const="always",
        default=True,
        help="show the live status line (default: on a tty)",
    )
    stream.set_defaults(func=cmd_stream)
    status = sub.add_parser("status", help="show the committed position and progress")
    status.add_argument("--config", required=True)
    status.add_argument("--json", action="store_true")
    status.add_argument("--offline", action="store_true", help="do not connect to the source")
    status.set_defaults(func=cmd_status)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.Formatter.converter = time.gmtime
    # `kill -USR1 <pid>` writes every thread's stack to stderr (the streamer's log under
    # Airflow): what a process that seems stuck is waiting for, without stopping it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        return args.func(args)
    except TidemarkError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
