"""One shard's stream as its Vitess tablet serves it to VTGate (`uvstreamer.Stream`).

The request's gtid decides what happens first (`uvstreamer.init`):

* `current`: the server's position now, sent at once as `[GTID, OTHER]`, then binlog
  streaming from there;
* a position: binlog streaming after it, if the server has reached it (otherwise the
  INVALID_ARGUMENT `GTIDSet Mismatch` VTGate retries on other tablets);
* `""` or copy progress in `table_p_ks`: the copy phase (`copy_phase.py`), then
  COPY_COMPLETED, then binlog streaming from the last snapshot.

Each streaming phase is a new vstreamer, so FIELD events start afresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate.copy_phase import TableCopy, copy_plans
from tests.support.vtgate.errors import tablet_error
from tests.support.vtgate.positions import Position
from tests.support.vtgate.shard_context import ShardContext
from tests.support.vtgate.shard_stream import BinlogStreamer, Send

T = bd.VEventType


class TabletStream:
    """A shard's VStream from `gtid` (and `table_p_ks`), sent in tablet batches."""

    def __init__(
        self,
        shard: ShardContext,
        gtid: str,
        table_pks: list[Any],
        internal_tables: frozenset[str] = frozenset(),
        connected: Callable[[], None] = lambda: None,
    ) -> None:
        self.shard, self.gtid, self.table_pks = shard, gtid, table_pks
        self.internal_tables = internal_tables
        self.connected = connected  # called before `current` is announced (the session's start gate)

    def run(self, send: Send) -> None:
        shard = self.shard

        def tagged(events: list[Any]) -> None:  # every event carries its shard
            for event in events:
                event.keyspace, event.shard = shard.keyspace, shard.shard
            send(events)

        plans = copy_plans(shard, self.table_pks) if self.gtid == "" or self.table_pks else {}
        position = Position()
        announce: Callable[[], None] | None = None
        if self.gtid != "":
            now = shard.current_position()
            if self.gtid == "current":
                position = now
                # `[GTID, OTHER]` goes out once the binlog connection is up (the tablet sends
                # it just before connecting): a client that writes as soon as it has it
                # finds its writes streamed at once.
                events = [bd.VEvent(type=T.GTID, gtid=str(now)), bd.VEvent(type=T.OTHER)]

                def announce() -> None:
                    self.connected()
                    tagged(events)
            else:
                position = Position.decode(self.gtid)
                if not now.contains(position):
                    raise tablet_error(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"GTIDSet Mismatch: requested source position:{position}, current target vrep position: {now}",
                    )
        if position.is_zero and not plans:
            raise tablet_error(grpc.StatusCode.UNKNOWN, "stream needs a position or a table to copy")
        if plans:
            position = TableCopy(shard, plans, position, tagged).run()
            if shard.stop.is_set():
                return
            tagged([bd.VEvent(type=T.COPY_COMPLETED)])
        BinlogStreamer(
            shard, position, tagged, internal_tables=self.internal_tables, on_connected=announce, preload=True
        ).run()
