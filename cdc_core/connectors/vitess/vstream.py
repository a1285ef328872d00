"""A VStream call to VTGate over gRPC: the request, and its responses as a blocking queue.

The call runs in a thread of its own that hands each `VStreamResponse` over through a
small bounded queue, so the source can wait for the next one with a timeout (the
streamer must be able to stop within a second on an idle keyspace) and a slow sink holds
the gRPC stream back instead of filling memory. A gRPC error becomes the connector's
error type: connection trouble is retried from the committed offset, a lost or foreign
position is not.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

import grpc

from cdc_core.connectors.vitess.vgtid import Vgtid
from cdc_core.errors import PositionLostError, SourceUnavailableError, TidemarkError

log = logging.getLogger("tidemark.vitess")

_END = object()
TABLET_TYPES = {"MASTER": "PRIMARY", "PRIMARY": "PRIMARY", "REPLICA": "REPLICA", "RDONLY": "RDONLY"}


def stubs() -> Any:
    """The generated VStream stubs (`make stubs`), with a clear error when they are missing."""
    try:
        from cdc_core.connectors.vitess.generated import (
            binlogdata_pb2,
            query_pb2,
            topodata_pb2,
            vtgate_pb2,
            vtgateservice_pb2_grpc,
        )
    except ImportError as exc:
        raise TidemarkError(
            f"the Vitess gRPC stubs are missing ({exc}): run `make install` (scripts/vitess_stubs.sh generates "
            "them from the protos of Vitess's gRPC client jar)"
        ) from None
    return _Stubs(binlogdata_pb2, query_pb2, topodata_pb2, vtgate_pb2, vtgateservice_pb2_grpc)


@dataclass(frozen=True)
class _Stubs:
    binlogdata: Any
    query: Any
    topodata: Any
    vtgate: Any
    service: Any


@dataclass(frozen=True)
class StreamSettings:
    target: str  # host:port of VTGate's gRPC service
    tablet_type: str = "MASTER"
    stop_on_reshard: bool = False
    keyspace_heartbeats: bool = False
    heartbeat_seconds: int = 0
    max_message_bytes: int = 64 * 1024 * 1024
    metadata: tuple[tuple[str, str], ...] = ()


def open_channel(settings: StreamSettings, timeout: float = 10.0) -> grpc.Channel:
    """A channel to VTGate, checked to connect (a clear error when it does not)."""
    channel = grpc.insecure_channel(
        settings.target,
        options=[
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.keepalive_time_ms", 30_000),
        ],
    )
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        channel.close()
        raise SourceUnavailableError(
            f"cannot reach VTGate's gRPC service at {settings.target} within {timeout:.0f}s "
            "(database.hostname / database.port)"
        ) from None
    return channel


class VStreamCall:
    """One VStream RPC from `vgtid`; `next(timeout)` gives its responses in order."""

    def __init__(self, channel: grpc.Channel, settings: StreamSettings, vgtid: Vgtid) -> None:
        pb = stubs()
        self.settings = settings
        request = pb.vtgate.VStreamRequest(
            tablet_type=pb.topodata.TabletType.Value(TABLET_TYPES[settings.tablet_type.upper()]),
            vgtid=vgtid.to_proto(pb.binlogdata),
            # Every table: the connector filters, so tables created later are streamed too.
            filter=pb.binlogdata.Filter(rules=[pb.binlogdata.Rule(match="/.*")]),
            flags=pb.vtgate.VStreamFlags(
                stop_on_reshard=settings.stop_on_reshard,
                heartbeat_interval=settings.heartbeat_seconds,
                stream_keyspace_heartbeats=settings.keyspace_heartbeats,
            ),
        )
        self._call = pb.service.VitessStub(channel).VStream(request, metadata=settings.metadata or None)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=32)
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="vstream", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            for response in self._call:
                self._put(response)
            self._put(_END)
        except grpc.RpcError as exc:
            self._put(exc)
        except Exception as exc:  # a stub or decoding fault: surfaced, never swallowed
            self._put(exc)

    def _put(self, item: Any) -> None:
        while not self._cancelled.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def next(self, timeout: float) -> Any:
        """The next response; None after `timeout` without one; `ENDED` when VTGate ended
        the stream normally. Errors are raised as the connector's errors."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is _END:
            return ENDED
        if isinstance(item, grpc.RpcError):
            raise vstream_error(item, self.settings.target)
        if isinstance(item, Exception):
            raise item
        return item

    def cancel(self) -> None:
        self._cancelled.set()
        self._call.cancel()
        self._thread.join(timeout=5)


ENDED = object()


def vstream_error(exc: grpc.RpcError, target: str) -> TidemarkError:
    """A gRPC status as what the streamer does about it (with VTGate's own words)."""
    code = exc.code() if hasattr(exc, "code") else None
    text = exc.details() if hasattr(exc, "details") else str(exc)
    where = f"VTGate {target}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED):
        return SourceUnavailableError(f"{where}: the VStream broke ({code.name}: {text})")
    if code == grpc.StatusCode.CANCELLED:
        return SourceUnavailableError(f"{where}: the VStream was cancelled ({text})")
    if text and ("purged" in text or "errno 1236" in text):
        return PositionLostError(
            f"{where}: a shard no longer has the binlog position to resume from ({text}). The changes in "
            "between are lost to streaming: with snapshot.mode=when_needed the streamer copies the tables again "
            "and streams on; otherwise remove the connector's offsets and start again with snapshot.mode=initial "
            "(or take an incremental snapshot)"
        )
    if text and "GTIDSet Mismatch" in text:
        return PositionLostError(
            f"{where}: a shard has not reached the position in the committed VGTID ({text}); the offsets are "
            "from another cluster or the shard was restored from an older backup"
        )
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return TidemarkError(f"{where} does not serve VStream ({text}); is database.port VTGate's gRPC port?")
    name = code.name if code is not None else "error"
    return TidemarkError(f"{where}: VStream failed ({name}: {text})")
