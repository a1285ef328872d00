"""`tidemark`: run a streamer or inspect its state.

tidemark stream --config connector.yaml     stream until SIGTERM (live status line)
tidemark status --config connector.yaml     last committed position, progress, source head
tidemark signal KIND --config connector.yaml [...] [--wait]
    send execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot or log through
    the connector's signal channel; prints the signal's id
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
    from cdc_core.commands.status import describe_offset

    return describe_offset(config, offset)


def status_document(config: ConnectorConfig, check_source: bool = True) -> dict[str, Any]:
    """Everything known about a connector's state (`cdc_core.commands.status`), as the
    Airflow plugins and the status page read it."""
    from cdc_core.commands.status import status_document as document

    return document(config, check_source)


def cmd_status(args: argparse.Namespace) -> int:
    from cdc_core.commands.status import cmd_status as status

    return status(_load(args.config), args.offline, args.json)


def cmd_signal(args: argparse.Namespace) -> int:
    from cdc_core.commands.signal import cmd_signal as send

    return send(_load(args.config), args)


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
    from cdc_core.commands.signal import add_arguments

    add_arguments(sub)
    sub.choices["signal"].set_defaults(func=cmd_signal)
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
