"""The double's process: VTGate's gRPC service (VStream; every other RPC UNIMPLEMENTED)
and its MySQL protocol, on loopback ports, over the shard servers of a topology file.

    python -m tests.support.vtgate --topology FILE --grpc-port P --mysql-port Q

It keeps no state of its own, so a test can kill it (even with SIGKILL) and start it
again on the same ports: clients reconnect and resume from their VGTID."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from cdc_core.connectors.vitess.generated import vtgateservice_pb2_grpc
from tests.support.vtgate.mysql_router import Router
from tests.support.vtgate.topology import Topology
from tests.support.vtgate.vstream import StreamError, VStreamSession

log = logging.getLogger("vtgate.double")


class VitessService(vtgateservice_pb2_grpc.VitessServicer):
    def __init__(self, topology: Topology, credentials: dict[str, Any], copy_rows: int) -> None:
        self.topology, self.credentials, self.copy_rows = topology, credentials, copy_rows

    def VStream(self, request: Any, context: Any) -> Any:  # gRPC's method name
        try:
            session = VStreamSession(self.topology, self.credentials, request, self.copy_rows)
            yield from session.responses(context)
        except StreamError as exc:
            context.abort(exc.code, exc.message)


def serve(topology: Path, grpc_port: int, mysql_port: int, copy_rows: int) -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    # Clients log in as the CDC user; the tablets read binlogs and copy tables as the
    # shard servers' admin (LOCK TABLES, consistent snapshots), as Vitess's own users do.
    user = os.environ.get("TIDEMARK_DB_USER", "tidemark")
    password = os.environ.get("TIDEMARK_DB_PASSWORD", "tidemark-dev")
    credentials = {
        "user": os.environ.get("TIDEMARK_ADMIN_USER", "tidemark_admin"),
        "password": os.environ.get("TIDEMARK_ADMIN_PASSWORD", "tidemark-admin-dev"),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    vtgateservice_pb2_grpc.add_VitessServicer_to_server(
        VitessService(Topology(topology), credentials, copy_rows), server
    )
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    server.start()
    router = Router(mysql_port, Topology(topology), user, password)
    threading.Thread(target=router.serve_forever, name="mysql", daemon=True).start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    log.info("VTGate double: gRPC 127.0.0.1:%d, MySQL 127.0.0.1:%d", grpc_port, mysql_port)
    done.wait()
    router.shutdown()
    server.stop(grace=1).wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="VTGate test double")
    parser.add_argument("--topology", required=True, type=Path)
    parser.add_argument("--grpc-port", required=True, type=int)
    parser.add_argument("--mysql-port", required=True, type=int)
    parser.add_argument("--copy-batch-rows", type=int, default=1000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(args.topology, args.grpc_port, args.mysql_port, args.copy_batch_rows)
    return 0
