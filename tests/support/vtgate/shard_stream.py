"""One shard's binlog as a Vitess tablet's vstreamer turns it into VEvents, in the
batches the tablet sends them to VTGate (`vstreamer.parseEvents`).

* A MariaDB GTID event starts a transaction with BEGIN (a standalone one, a DDL, has
  none); XID ends it with GTID (the whole position after it) and COMMIT.
* TABLE_MAP gives a FIELD the first time this streamer sees the table id, if the filter
  matches: a DDL gives the table a new id, so a new FIELD comes before its next ROW.
* Each rows event is one ROW with a RowChange per row; tables the filter does not match
  give nothing, so a transaction can be empty (`BEGIN, GTID, COMMIT`).
* A DDL on a matched table of the keyspace's database is `GTID, DDL`; other DDL, grants
  and the like are `GTID, OTHER`; SAVEPOINT is dropped.
* `_vt.resharding_journal` rows of this keyspace are JOURNAL events; `_vt.heartbeat`
  rows are ROWs of an internal table when the stream asked for them.
* BEGIN, FIELD, GTID and JOURNAL wait in a buffer; COMMIT, DDL and OTHER send it; ROWs
  send what is buffered when their row bytes would pass the packet size (250,000).

A shard server also holds other keyspaces' databases (and other test sessions'), where a
real shard's MySQL holds only its keyspace's database, `_vt` and the system schemas. So
a transaction that writes only in other databases (or only other shards' sidecar rows),
and DDL on other databases, is left out, as if they lived on servers of their own; the
position still moves past it and shows in the next VGTID.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pymysql
from google.protobuf import text_format
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    FormatDescriptionEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_core.connectors.vitess.generated import binlogdata_pb2 as bd
from tests.support.vtgate import statements
from tests.support.vtgate.errors import shard_server_error, stream_error, tablet_error
from tests.support.vtgate.fields import TableFields, internal_fields, keyspace_fields, table_fields
from tests.support.vtgate.positions import Position
from tests.support.vtgate.shard_context import ShardContext, next_server_id
from tests.support.vtgate.values import binlog_text, encode_row, row_images

log = logging.getLogger("vtgate.double")
T = bd.VEventType
Send = Callable[[list[Any]], None]
STANDALONE = 1  # MariaDB GTID flag: a statement with no transaction around it (DDL)


@dataclass
class _Plan:
    kind: str  # "table", "journal", "heartbeat", "foreign"
    fields: TableFields | None = None
    stream_rows: bool = True
    field_sent: bool = False  # FIELD goes out with the table id's first ROW


@dataclass
class _Transaction:
    own: bool = False  # wrote in this keyspace's database or this shard's sidecar rows
    foreign: bool = False  # wrote in another keyspace's database


class BinlogStreamer:
    """One vstreamer instance: reads from `position` (exclusive) and sends batches until
    stopped, or until its position reaches `stop_at` (catch-up and fast-forward).
    `table_gate` drops the FIELD and ROW events of tables a copy has not reached."""

    def __init__(
        self,
        shard: ShardContext,
        position: Position,
        send: Send,
        *,
        stop_at: Position | None = None,
        internal_tables: frozenset[str] = frozenset(),
        table_gate: Callable[[str], bool] | None = None,
        on_connected: Callable[[], None] | None = None,
        preload: bool = False,
    ) -> None:
        self.shard, self.position, self.send = shard, position, send
        self.stop_at, self.internal_tables, self.table_gate = stop_at, internal_tables, table_gate
        self.on_connected = on_connected  # once the server has accepted the position
        self.preload = preload
        self._plans: dict[int, _Plan | None] = {}
        self._buffer: list[Any] = []
        self._size = 0
        self._txn: _Transaction | None = None
        self._meta: pymysql.Connection | None = None
        # With `preload`, the matching tables' fields are read before streaming, as a tablet's
        # schema engine holds them in memory: a table's first event waits for no query.
        self._schema: dict[str, TableFields] = {}  # each used once, dropped at any DDL

    # ------------------------------------------------------------------ reading

    def run(self) -> None:
        if self._reached():
            return
        if self.preload:
            try:
                self._schema = keyspace_fields(self._conn(), self.shard.keyspace, self.shard.rules.matches)
            except pymysql.err.MySQLError as exc:
                raise shard_server_error(exc, str(self.position)) from None
        reader = BinLogStreamReader(
            connection_settings=dict(self.shard.params),
            server_id=next_server_id(),
            blocking=True,
            is_mariadb=True,
            auto_position=self.position.gtid_list,
            slave_heartbeat=0.5,
            only_events=[
                MariadbGtidEvent, QueryEvent, XidEvent, TableMapEvent, WriteRowsEvent, UpdateRowsEvent,
                DeleteRowsEvent, HeartbeatLogEvent, RotateEvent, FormatDescriptionEvent,
            ],
            enable_logging=False,
        )  # fmt: skip
        stream = None
        try:
            for event in reader:
                if self.shard.stop.is_set():
                    return
                if stream is None:
                    stream = reader._stream_connection
                elif reader._stream_connection is not stream:
                    # The library reconnects by itself from where it started; a tablet's
                    # stream breaks instead, and VTGate resumes it from its last position.
                    raise stream_error(
                        str(self.position), "lost connection to the shard server", grpc.StatusCode.UNAVAILABLE
                    )
                if self._handle(event):
                    return
        except pymysql.err.MySQLError as exc:
            raise shard_server_error(exc, str(self.position)) from None
        except (OSError, EOFError) as exc:
            raise stream_error(
                str(self.position), f"{type(exc).__name__}: {exc}", grpc.StatusCode.UNAVAILABLE
            ) from None
        finally:
            reader.close()
            if self._meta is not None:
                self._meta.close()

    def _reached(self) -> bool:
        return self.stop_at is not None and self.position.contains(self.stop_at)

    def _handle(self, event: Any) -> bool:
        """Handle one binlog event; True once `stop_at` is reached."""
        now = time.time_ns()
        if isinstance(event, (RotateEvent, FormatDescriptionEvent)):
            if self.on_connected is not None:
                connected, self.on_connected = self.on_connected, None
                connected()
        elif isinstance(event, MariadbGtidEvent):
            self.position = self.position.after(event.gtid)
            if event.flags & STANDALONE:
                self._txn = None
            else:
                self._txn = _Transaction()
                self._buffer_event(bd.VEvent(type=T.BEGIN, timestamp=event.timestamp, current_time=now))
        elif isinstance(event, QueryEvent):
            return self._query(event, now)
        elif isinstance(event, XidEvent):
            self._end(event.timestamp, now, with_gtid=True)
            return self._reached()
        elif isinstance(event, TableMapEvent):
            self._table_map(event, now)
        elif isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
            self._rows(event, now)
        return False

    def _end(self, timestamp: int, now: int, with_gtid: bool) -> None:
        txn, self._txn = self._txn, None
        if txn is not None and txn.foreign and not txn.own:
            self._buffer, self._size = [], 0  # another keyspace's transaction
            return
        if with_gtid:
            self._buffer_event(
                bd.VEvent(type=T.GTID, gtid=str(self.position), timestamp=timestamp, current_time=now)
            )
        self._buffer.append(bd.VEvent(type=T.COMMIT, timestamp=timestamp, current_time=now))
        self._flush()

    def _query(self, event: QueryEvent, now: int) -> bool:
        sql = event.query.decode(errors="replace") if isinstance(event.query, bytes) else event.query
        statement = statements.classify(sql)
        if statement.category == statements.BEGIN:
            self._buffer_event(bd.VEvent(type=T.BEGIN, timestamp=event.timestamp, current_time=now))
            return False
        if statement.category == statements.COMMIT:  # a non-transactional engine's commit: no GTID
            self._end(event.timestamp, now, with_gtid=False)
            return self._reached()
        if statement.category in (statements.SAVEPOINT, statements.ROLLBACK, statements.DML):
            return False
        session_db = _text(event.schema)
        if statement.category in (statements.DDL, statements.DB_DDL):
            self._schema.clear()  # the schema engine reloads after a DDL
        kind = statements.event_kind(
            statement, session_db, self.shard.keyspace, self.shard.foreign, self.shard.rules.matches
        )
        if kind is not None:
            gtid = bd.VEvent(
                type=T.GTID, gtid=str(self.position), timestamp=event.timestamp, current_time=now
            )
            self._buffer_event(gtid)
            ddl = kind == statements.DDL
            self._buffer.append(
                bd.VEvent(
                    type=T.DDL if ddl else T.OTHER,
                    statement=sql if ddl else "",
                    timestamp=event.timestamp,
                    current_time=now,
                )
            )
            self._flush()
        return self._reached()

    # ------------------------------------------------------------------ tables and rows

    def _table_map(self, event: TableMapEvent, now: int) -> None:
        if event.table_id in self._plans:
            return
        schema, table = _text(event.schema), _text(event.table)
        plan: _Plan | None = None
        if schema == "_vt":
            if table == "resharding_journal":
                plan = _Plan("journal")
            elif table == "heartbeat":
                streamed = "heartbeat" in self.internal_tables
                plan = _Plan(
                    "heartbeat", internal_fields(self._conn(), table) if streamed else None, streamed
                )
        elif schema == self.shard.keyspace:
            if self.shard.rules.matches(table):
                plan = _Plan("table", self._fields(table, event))
        elif self.shard.foreign(schema):
            plan = _Plan("foreign")
        self._plans[event.table_id] = plan

    def _fields(self, table: str, event: TableMapEvent) -> TableFields:
        found = self._schema.pop(table, None)
        if found is None or len(found.fields) != len(event.columns):
            found = table_fields(self._conn(), self.shard.keyspace, table)
        if found is None:
            raise tablet_error(grpc.StatusCode.UNKNOWN, f"unknown table {table} in schema")
        if len(found.fields) < len(event.columns):
            types = [c.type for c in event.columns]
            raise tablet_error(
                grpc.StatusCode.UNKNOWN,
                f"cannot determine table columns for {table}: event has {types}, schema has {list(found.names)}",
            )
        return found.truncated(len(event.columns))

    def _rows(self, event: Any, now: int) -> None:
        plan = self._plans.get(event.table_id)
        txn = self._txn if self._txn is not None else _Transaction()
        if plan is None:
            txn.own = True  # the server's own bookkeeping, or a table the filter leaves out
            return
        if plan.kind == "foreign":
            txn.foreign = True
            return
        if plan.kind == "journal":
            self._journal(event, txn, now)
            return
        images = row_images(event)
        if plan.kind == "heartbeat":
            images = [i for i in images if self._heartbeat_is_mine(i, event, txn)]
            if not plan.stream_rows:
                return
        else:
            txn.own = True
        changes = [
            bd.RowChange(before=self._encode(event, before), after=self._encode(event, after))
            for before, after in images
        ]
        if not changes:
            return
        if not plan.field_sent and plan.fields is not None:
            plan.field_sent = True
            self._buffer_event(self._field_event(plan, _text(event.table), event.timestamp, now))
        row = bd.VEvent(
            type=T.ROW,
            timestamp=event.timestamp,
            current_time=now,
            row_event=bd.RowEvent(
                table_name=_text(event.table),
                row_changes=changes,
                keyspace=self.shard.keyspace,
                shard=self.shard.shard,
                flags=event.flags,
                is_internal_table=plan.kind == "heartbeat",
            ),
        )
        size = sum(len(c.before.values) + len(c.after.values) for c in changes)
        if self._size + size > self.shard.packet_size:
            self._flush()
        self._size += size
        self._buffer_event(row)

    def _field_event(self, plan: _Plan, table: str, timestamp: int, now: int) -> Any:
        assert plan.fields is not None
        return bd.VEvent(
            type=T.FIELD,
            timestamp=timestamp,
            current_time=now,
            field_event=bd.FieldEvent(
                table_name=table,
                fields=list(plan.fields.fields),
                keyspace=self.shard.keyspace,
                shard=self.shard.shard,
                enum_set_string_values=plan.kind == "table" and plan.fields.has_enum_or_set,
                is_internal_table=plan.kind == "heartbeat",
            ),
        )

    def _heartbeat_is_mine(self, image: tuple[Any, Any], event: Any, txn: _Transaction) -> bool:
        values = (image[1] or image[0])[0]
        names = [c.name for c in event.columns]
        owner = _text(values[names.index("keyspaceShard")]) if "keyspaceShard" in names else ""
        if owner == f"{self.shard.keyspace}:{self.shard.shard}":
            txn.own = True
            return True
        txn.foreign = True  # another keyspace's (or shard's) tablet wrote it
        return False

    def _journal(self, event: Any, txn: _Transaction, now: int) -> None:
        names = [c.name for c in event.columns]
        for _, after in row_images(event):
            if after is None:
                continue
            values = dict(zip(names, after[0], strict=True))
            database = _text(values.get("db_name"))
            if database != self.shard.keyspace:
                txn.foreign = True  # another keyspace's reshard
                continue
            txn.own = True
            journal = text_format.Parse(_text(values.get("val")), bd.Journal())
            self._buffer_event(
                bd.VEvent(type=T.JOURNAL, journal=journal, timestamp=event.timestamp, current_time=now)
            )

    @staticmethod
    def _encode(event: Any, image: Any) -> Any:
        if image is None:
            return None
        values, none_sources = image
        return encode_row(
            tuple(
                binlog_text(v, c, none_sources.get(c.name, ""))
                for v, c in zip(values, event.columns, strict=True)
            )
        )

    # ------------------------------------------------------------------ sending

    def _buffer_event(self, event: Any) -> None:
        event.keyspace, event.shard = self.shard.keyspace, self.shard.shard
        self._buffer.append(event)

    def _flush(self) -> None:
        batch, self._buffer, self._size = self._buffer, [], 0
        for event in batch:
            event.keyspace, event.shard = self.shard.keyspace, self.shard.shard
        if self.table_gate is not None:
            batch = [e for e in batch if self.table_gate(_table_of(e))]
        if batch:
            self.send(batch)

    def _conn(self) -> pymysql.Connection:
        if self._meta is None:
            self._meta = self.shard.connect()
        return self._meta


def _table_of(event: Any) -> str:
    if event.type == T.ROW:
        return event.row_event.table_name
    if event.type == T.FIELD:
        return event.field_event.table_name
    return ""


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
