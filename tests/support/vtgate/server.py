"""The double's process: VTGate's gRPC service (`vtgateservice.Vitess`: VStream; every
other RPC answers UNIMPLEMENTED) and VTGate's MySQL protocol, on loopback ports, over
the shard servers of a topology file.

    python -m tests.support.vtgate --topology FILE --grpc-port P --mysql-port Q
        [--tablet-heartbeats SECONDS] [--copy-batch-rows N] [--packet-size BYTES]

Clients log in to the MySQL port as the CDC user (TIDEMARK_DB_USER, password
TIDEMARK_DB_PASSWORD); the tablets read binlogs and copy tables as the shard servers'
admin (TIDEMARK_ADMIN_USER / TIDEMARK_ADMIN_PASSWORD: LOCK TABLES, consistent
snapshots), as Vitess's own users do. It keeps no state of its own besides the topology
file, so a test can kill it (even with SIGKILL) and start it again on the same ports:
clients reconnect and resume from their VGTIDs. Logs go to stderr; SIGTERM ends it."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from cdc_core.connectors.vitess.generated import vtgateservice_pb2_grpc
from tests.support.vtgate.errors import VStreamError
from tests.support.vtgate.heartbeats import HeartbeatWriter
from tests.support.vtgate.mysql_router import Router
from tests.support.vtgate.topology import Topology
from tests.support.vtgate.vstream import StreamSettings, VStreamSession

log = logging.getLogger("vtgate.double")
# Vitess's gRPC server settings (`servenv/grpc_server.go`): clients may ping every 10 s (a
# client's 30 s keepalive must not earn a GOAWAY "too_many_pings"), the server pings an
# idle connection after 10 s, and messages up to 16 MiB (`--grpc_max_message_size`).
GRPC_OPTIONS = [
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
]


class VitessService(vtgateservice_pb2_grpc.VitessServicer):
    """VStream; the base class answers every other RPC with UNIMPLEMENTED."""

    def __init__(self, topology: Topology, settings: StreamSettings) -> None:
        self.topology, self.settings = topology, settings

    def VStream(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            session = VStreamSession(self.topology, self.settings, request)
            yield from session.responses(context)
        except VStreamError as exc:
            context.abort(exc.code, exc.message)


def serve(args: argparse.Namespace) -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    topology = Topology(args.topology)
    tablets = {
        "user": os.environ.get("TIDEMARK_ADMIN_USER", "tidemark_admin"),
        "password": os.environ.get("TIDEMARK_ADMIN_PASSWORD", "tidemark-admin-dev"),
    }
    settings = StreamSettings(tablets, packet_size=args.packet_size, copy_rows=args.copy_batch_rows)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="grpc"), options=GRPC_OPTIONS
    )
    vtgateservice_pb2_grpc.add_VitessServicer_to_server(VitessService(topology, settings), server)
    server.add_insecure_port(f"127.0.0.1:{args.grpc_port}")
    server.start()
    router = Router(
        args.mysql_port,
        topology,
        user=os.environ.get("TIDEMARK_DB_USER", "tidemark"),
        password=os.environ.get("TIDEMARK_DB_PASSWORD", "tidemark-dev"),
    )
    threading.Thread(target=router.serve_forever, name="mysql", daemon=True).start()
    heartbeats = None
    if args.tablet_heartbeats:
        heartbeats = HeartbeatWriter(topology, tablets, args.tablet_heartbeats)
        heartbeats.start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    log.info("VTGate double: gRPC 127.0.0.1:%d, MySQL 127.0.0.1:%d", args.grpc_port, args.mysql_port)
    done.wait()
    log.info("VTGate double: stopping")
    if heartbeats is not None:
        heartbeats.stop.set()
    router.shutdown()
    server.stop(grace=1).wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.vtgate", description="VTGate test double")
    parser.add_argument("--topology", required=True, type=Path, help="the topology file (JSON)")
    parser.add_argument("--grpc-port", required=True, type=int)
    parser.add_argument("--mysql-port", required=True, type=int)
    parser.add_argument("--tablet-heartbeats", type=float, default=0, metavar="SECONDS",
                        help="write _vt.heartbeat on every shard this often (off by default)")  # fmt: skip
    parser.add_argument(
        "--copy-batch-rows", type=int, default=10_000, help="rows per copy-phase batch at most"
    )
    parser.add_argument(
        "--packet-size", type=int, default=250_000, help="row bytes per batch (vstream_packet_size)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>`: every thread's stack to the log
    serve(args)
    return 0
