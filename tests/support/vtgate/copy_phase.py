"""VStream's copy phase on one shard, as a Vitess tablet's uvstreamer runs it (gtid `""`,
or copy progress in `table_p_ks`; `vstreamer/copy.go`).

The tables the filter matches are copied one at a time, in name order. Before each
table but the first, the binlog is caught up to the server's head, sending only what
concerns tables already copied or in progress (`shouldSendEventForTable`; a table not
started yet gives nothing, so transactions can be empty). Each table is read from a
consistent snapshot: `LOCK TABLES t READ`, the position, `START TRANSACTION WITH
CONSISTENT SNAPSHOT`, `UNLOCK TABLES`; the binlog is fast-forwarded to that position
when it is ahead. Then, as tablet batches:

    [BEGIN, FIELD]                 enum_set_string_values always true
    [GTID]                         only when the position moved (the first table)
    [ROW..., LASTPK, COMMIT]       one ROW per row; LASTPK: the table's last key so far
    [BEGIN], [ROW..., LASTPK, COMMIT]   each further batch
    [BEGIN, LASTPK(completed), COMMIT]  the table is done

which VTGate turns into responses with VGTIDs whose `table_p_ks` carry the last keys.
Rows are read with MySQL's text protocol on a `SET NAMES binary` connection in UTC.
Resuming with `table_p_ks` copies each listed table after its last key, and every other
matching table from the start (a finished table is copied again, as Vitess does)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
import pymysql
from pymysql.converters import encoders

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from cdc_core.connectors.vitess.generated import query_pb2 as q
from tests.support.vtgate.errors import tablet_error
from tests.support.vtgate.fields import TableFields, quote, table_fields
from tests.support.vtgate.positions import Position
from tests.support.vtgate.shard_context import ShardContext
from tests.support.vtgate.shard_stream import BinlogStreamer, Send
from tests.support.vtgate.values import copy_text, decode_row, encode_row

T = bd.VEventType
_INTEGER_TYPES = {q.INT8, q.UINT8, q.INT16, q.UINT16, q.INT24, q.UINT24, q.INT32, q.UINT32, q.INT64, q.UINT64}


@dataclass
class CopyPlan:
    table: str
    lastpk: Any | None  # query.QueryResult of the last key copied; None: not started


def copy_plans(shard: ShardContext, table_pks: list[Any]) -> dict[str, CopyPlan]:
    """The tables to copy (`uvstreamer.buildTablePlan`), with any progress to resume."""
    progress: dict[str, Any] = {}
    for tpk in table_pks:
        if tpk.HasField("lastpk") and not tpk.lastpk.fields:
            raise tablet_error(
                grpc.StatusCode.UNKNOWN, f"lastpk for table {tpk.table_name} has no fields defined"
            )
        progress[tpk.table_name] = tpk.lastpk if tpk.HasField("lastpk") else None
    with shard.connect() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE'",
            (shard.keyspace,),
        )
        tables = sorted(r[0] for r in cur.fetchall())
    if tables:
        for name in shard.rules.named_tables():
            if name not in tables:
                raise tablet_error(grpc.StatusCode.UNKNOWN, f"table {name} is not present in the database")
    return {t: CopyPlan(t, progress.get(t)) for t in tables if t != "dual" and shard.rules.matches(t)}


class TableCopy:
    """Copies the planned tables and returns the position streaming goes on from."""

    def __init__(
        self, shard: ShardContext, plans: dict[str, CopyPlan], position: Position, send: Send
    ) -> None:
        self.shard, self.plans, self.position, self.send = shard, plans, position, send

    def run(self) -> Position:
        for table in sorted(self.plans):
            if self.shard.stop.is_set():
                break
            if not self.position.is_zero:
                self._stream_to(self.shard.current_position())  # catch-up
            self._copy(table)
        return self.position

    def _sendable(self, table: str) -> bool:
        """Catch-up and fast-forward carry tables copied or in progress only."""
        plan = self.plans.get(table)
        return plan is None or plan.lastpk is not None

    def _stream_to(self, target: Position) -> None:
        streamer = BinlogStreamer(
            self.shard, self.position, self.send, stop_at=target, table_gate=self._sendable
        )
        streamer.run()
        self.position = streamer.position

    def _copy(self, table: str) -> None:
        plan = self.plans[table]
        lock = self.shard.connect()
        snap = self.shard.connect(use_unicode=False, conv=dict(encoders))  # values as the server's text
        try:
            with lock.cursor() as lc, snap.cursor() as sc:
                sc.execute("SET NAMES binary")
                sc.execute("SET time_zone = '+00:00'")
                lc.execute(f"LOCK TABLES {quote(self.shard.keyspace)}.{quote(table)} READ")
                lc.execute("SELECT @@global.gtid_binlog_pos")
                snapshot = Position.from_server(lc.fetchone()[0])
                sc.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                lc.execute("UNLOCK TABLES")
            if not self.position.is_zero and not self.position.contains(snapshot):
                self._stream_to(snapshot)  # fast-forward
            fields = table_fields(snap_meta := self.shard.connect(), self.shard.keyspace, table)
            snap_meta.close()
            if fields is None:
                raise tablet_error(grpc.StatusCode.UNKNOWN, f"unknown table {table} in schema")
            field_event = bd.FieldEvent(
                table_name=table,
                fields=list(fields.fields),
                keyspace=self.shard.keyspace,
                shard=self.shard.shard,
                enum_set_string_values=True,
            )
            self.send([bd.VEvent(type=T.BEGIN), bd.VEvent(type=T.FIELD, field_event=field_event)])
            if snapshot != self.position:
                self.send([bd.VEvent(type=T.GTID, gtid=str(snapshot))])
                self.position = snapshot
            self._rows(snap, fields, plan)
            with snap.cursor() as sc:
                sc.execute("COMMIT")
        finally:
            lock.close()
            snap.close()
        done = bd.LastPKEvent(table_last_p_k=bd.TableLastPK(table_name=table), completed=True)
        self.send(
            [bd.VEvent(type=T.BEGIN), bd.VEvent(type=T.LASTPK, last_p_k_event=done), bd.VEvent(type=T.COMMIT)]
        )
        del self.plans[table]

    def _rows(self, snap: pymysql.Connection, fields: TableFields, plan: CopyPlan) -> None:
        key = fields.copy_key
        order = ", ".join(quote(c) for c in key)
        sql = f"SELECT {', '.join(quote(c) for c in fields.names)} FROM {quote(self.shard.keyspace)}.{quote(plan.table)}"
        if fields.primary_key:
            sql += " FORCE INDEX (PRIMARY)"
        params: list[Any] = []
        if plan.lastpk is not None and plan.lastpk.rows:
            sql += f" WHERE ({order}) > ({', '.join(['%s'] * len(key))})"
            params = _typed(plan.lastpk)
        sql += f" ORDER BY {order}"
        positions = [fields.names.index(c) for c in key]
        key_fields = fields.key_fields()
        in_transaction = True  # the FIELD's BEGIN is still open
        with snap.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(sql, params)
            batch: list[tuple[Any, ...]] = []
            size = 0
            for row in cur:
                if self.shard.stop.is_set():
                    return
                values = tuple(copy_text(v) for v in row)
                batch.append(values)
                size += sum(len(v) for v in values if v is not None)
                if len(batch) >= self.shard.copy_rows or size >= self.shard.packet_size:
                    self._send_batch(plan, batch, positions, key_fields, in_transaction)
                    in_transaction, batch, size = False, [], 0
            if batch:
                self._send_batch(plan, batch, positions, key_fields, in_transaction)

    def _send_batch(
        self,
        plan: CopyPlan,
        batch: list[tuple[Any, ...]],
        positions: list[int],
        key_fields: list[Any],
        open_tx: bool,
    ) -> None:
        if not open_tx:
            self.send([bd.VEvent(type=T.BEGIN)])
        events = [
            bd.VEvent(
                type=T.ROW,
                row_event=bd.RowEvent(
                    table_name=plan.table,
                    row_changes=[bd.RowChange(after=encode_row(values))],
                    keyspace=self.shard.keyspace,
                    shard=self.shard.shard,
                ),
            )
            for values in batch
        ]
        last = encode_row(tuple(batch[-1][i] for i in positions))
        lastpk = q.QueryResult(fields=key_fields, rows=[last])
        progress = bd.LastPKEvent(table_last_p_k=bd.TableLastPK(table_name=plan.table, lastpk=lastpk))
        events += [bd.VEvent(type=T.LASTPK, last_p_k_event=progress), bd.VEvent(type=T.COMMIT)]
        self.send(events)
        plan.lastpk = lastpk


def _typed(lastpk: Any) -> list[Any]:
    """A lastpk's values as query parameters: integers as numbers, other text as text."""
    out: list[Any] = []
    for field, raw in zip(lastpk.fields, decode_row(lastpk.rows[0]), strict=True):
        if raw is None:
            out.append(None)
        elif field.type in _INTEGER_TYPES:
            out.append(int(raw))
        elif field.charset == 63 and field.type not in (q.DECIMAL, q.FLOAT32, q.FLOAT64):
            out.append(bytes(raw))
        else:
            out.append(bytes(raw).decode("utf-8", errors="surrogateescape"))
    return out
