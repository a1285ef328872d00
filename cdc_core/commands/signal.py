"""`tidemark signal`: send execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot
or log through the connector's signal channel, and optionally wait for the streamer's
answer.

The signal is validated first as the streamer will validate it (`parse_signal`; for an
execute-snapshot, the tables, filters and keys against the live source, as the snapshot
DAG's validate step does), so a malformed one is refused here and never sent. Its id is
printed on stdout, alone, for scripts; everything else goes to stderr.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.errors import TidemarkError

# Exit codes: 0 sent (and, with --wait, acted on); 1 refused (here or by the streamer) or
# not sent; TIMED_OUT: sent, but no answer within --timeout.
TIMED_OUT = 4

KINDS = ("execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot", "log")


def signal_data(kind: str, args: Any) -> dict[str, Any]:
    """The signal's `data`, in Debezium's fields and Tidemark's extensions."""
    if kind == "execute-snapshot":
        data: dict[str, Any] = {"data-collections": list(args.tables), "type": args.type}
        if args.condition:
            data["additional-conditions"] = [{"data-collection": t, "filter": f} for t, f in args.condition]
        if args.surrogate_key:
            data["surrogate-key"] = args.surrogate_key
        for name, value in (
            ("tidemark.reader", args.reader),
            ("tidemark.release", args.release),
            ("tidemark.chunk-size", args.chunk_size),
        ):
            if value is not None:
                data[name] = value
        return data
    if kind == "stop-snapshot":
        return {"type": "incremental", **({"data-collections": list(args.tables)} if args.tables else {})}
    if kind == "pause-snapshot":
        return {"type": "incremental"}
    if kind == "log":
        return {"message": args.message}
    return {}


def check_signal(
    config: ConnectorConfig, signal_id: str, kind: str, data: dict[str, Any], channel: str, source: bool
) -> list[dict[str, Any]]:
    """Refuse what the streamer would refuse, before anything is sent: the same parser,
    and for an execute-snapshot (`source`: against the live source) the same table,
    filter and key checks. Returns the tables an execute-snapshot would read."""
    from cdc_core.signals.actions import ExecuteSnapshot, RawSignal, parse_signal

    action = parse_signal(RawSignal(signal_id, kind, data, channel))
    if source and isinstance(action, ExecuteSnapshot):
        from cdc_core.connectors.registry import connector_of
        from cdc_core.snapshot.requests import check_snapshot_request

        return check_snapshot_request(connector_of(config), config, action)
    return []


def signal_outcome(offset: dict[str, Any] | None, signal_id: str) -> tuple[str, str | None]:
    """What the committed offsets say of a signal: ("refused", reason), ("acted", what)
    or ("pending", None)."""
    from cdc_core.snapshot.context import SnapshotContext

    context = SnapshotContext.from_json((offset or {}).get("snapshot"))
    for refused in reversed(context.refused):
        if refused.get("id") == signal_id:
            return "refused", str(refused.get("reason"))
    running = next((s for s in context.snapshots if signal_id in (s.signal_id, s.id)), None)
    if running is not None:
        return "acted", f"snapshot {running.id} is running"
    finished = next((f for f in context.finished if signal_id in (f.get("signal_id"), f.get("id"))), None)
    if finished is not None:
        return "acted", f"snapshot {finished.get('id')} has finished"
    if context.seen(signal_id):
        return "acted", None
    return "pending", None


def wait_for_answer(config: ConnectorConfig, signal_id: str, timeout: float, poll: float = 1.0) -> int:
    """Follows the committed offsets until the streamer acted on the signal or refused it."""
    from cdc_core.commands.status import status_document

    deadline = time.monotonic() + timeout
    said_not_running = False
    while True:
        doc = status_document(config, check_source=False)
        outcome, detail = signal_outcome(doc.get("committed_offset"), signal_id)
        if outcome == "refused":
            print(f"the streamer refused signal {signal_id}: {detail}", file=sys.stderr)
            return 1
        if outcome == "acted":
            print(
                f"the streamer acted on signal {signal_id}" + (f": {detail}" if detail else ""),
                file=sys.stderr,
            )
            return 0
        streamer = doc.get("streamer") or {}
        if streamer.get("state") != "running" and not said_not_running:
            why = streamer.get("error") or streamer.get("state") or "it has never started"
            print(
                f"waiting: the streamer is not running ({why}); it acts on the signal once it runs",
                file=sys.stderr,
            )
            said_not_running = True
        if time.monotonic() >= deadline:
            print(f"no answer to signal {signal_id} within {timeout:.0f}s (it stays sent)", file=sys.stderr)
            return TIMED_OUT
        time.sleep(poll)


def cmd_signal(config: ConnectorConfig, args: Any) -> int:
    from cdc_core.commands.status import without_secrets
    from cdc_core.connectors.registry import connector_of
    from cdc_core.signals.actions import SignalError
    from cdc_core.signals.sending import send_through

    kind = args.kind
    enabled = config.get("signal.enabled.channels")
    channel = args.channel or enabled[0]
    signal_id = args.id or f"cli-{uuid.uuid4().hex}"
    data = signal_data(kind, args)
    if args.id and channel == "kafka":
        print(
            "note: the kafka channel names its signals by their place (kafka-<partition>-<offset>)",
            file=sys.stderr,
        )
    try:
        tables = check_signal(config, signal_id, kind, data, channel, source=not args.no_source_check)
    except (SignalError, TidemarkError) as exc:
        print(f"error: signal refused, nothing sent: {without_secrets(str(exc), config)}", file=sys.stderr)
        return 1
    except Exception as exc:  # the source's driver: unreachable, refused, ...
        print(
            f"error: cannot check the signal against the source, nothing sent: "
            f"{without_secrets(f'{type(exc).__name__}: {exc}', config)} (--no-source-check checks its form only)",
            file=sys.stderr,
        )
        return 1
    try:
        sent_id = send_through(channel, connector_of(config), config, signal_id, kind, data)
    except Exception as exc:
        print(f"error: the signal was not sent: {without_secrets(str(exc), config)}", file=sys.stderr)
        return 1
    print(sent_id)
    where = {
        "source": config.get("signal.data.collection"),
        "kafka": config.get("signal.kafka.topic"),
        "file": config.get("signal.file"),
    }[channel]
    print(f"sent {kind} signal {sent_id} through the {channel} channel ({where})", file=sys.stderr)
    for table in tables:
        print(
            f"  {table['table']} by {', '.join(table['key'])}"
            + (f" where {table['filter']}" if table["filter"] else ""),
            file=sys.stderr,
        )
    if data.get("tidemark.reader") == "spark":
        print(
            f"the windows are read by the Spark chunk job: spark-submit spark_jobs/incremental_snapshot.py "
            f"--config {config.source_path} --signal {sent_id} --staging PATH",
            file=sys.stderr,
        )
    if args.wait:
        return wait_for_answer(config, sent_id, args.timeout)
    return 0


def add_arguments(sub: Any) -> None:
    """`tidemark signal KIND --config FILE ...`."""
    from cdc_core.signals.sending import CHANNELS

    signal = sub.add_parser("signal", help="send a signal through the connector's signal channel")
    kinds = signal.add_subparsers(dest="kind", required=True)
    for kind in KINDS:
        parser = kinds.add_parser(kind, help=_HELP[kind])
        parser.add_argument("--config", required=True)
        parser.add_argument(
            "--channel", choices=CHANNELS, help="one of signal.enabled.channels (default: the first of them)"
        )
        parser.add_argument(
            "--id", help="the signal's id (default: cli-<random>; the kafka channel names its own)"
        )
        parser.add_argument(
            "--wait", action="store_true", help="wait until the streamer acted on it or refused it"
        )
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds --wait waits (default 300)")
        if kind == "execute-snapshot":
            parser.add_argument(
                "--tables",
                nargs="+",
                required=True,
                metavar="REGEX",
                help="data-collections: db.table regexes",
            )
            parser.add_argument("--type", choices=("incremental", "blocking"), default="incremental")
            parser.add_argument(
                "--condition",
                nargs=2,
                action="append",
                metavar=("TABLE", "FILTER"),
                help="an additional condition: the tables it applies to (regex) and its filter",
            )
            parser.add_argument("--surrogate-key", help="the column to chunk by instead of the primary key")
            parser.add_argument(
                "--reader", choices=("inprocess", "spark"), help="tidemark.reader (default inprocess)"
            )
            parser.add_argument(
                "--release", choices=("stream", "lakehouse"), help="tidemark.release (default stream)"
            )
            parser.add_argument("--chunk-size", type=int, help="tidemark.chunk-size: rows per window")
            parser.add_argument(
                "--no-source-check",
                action="store_true",
                help="check the signal's form only, not its tables against the source",
            )
        else:
            parser.set_defaults(no_source_check=True)
        if kind == "stop-snapshot":
            parser.add_argument(
                "--tables",
                nargs="+",
                metavar="REGEX",
                help="stop these tables only (default: the whole snapshot)",
            )
        if kind == "log":
            parser.add_argument("--message", required=True)


_HELP = {
    "execute-snapshot": "start an incremental or blocking snapshot of tables",
    "stop-snapshot": "stop the running incremental snapshot, whole or for some tables",
    "pause-snapshot": "pause the running incremental snapshot (streaming goes on)",
    "resume-snapshot": "resume a paused incremental snapshot",
    "log": "write a message into the streamer's log",
}
