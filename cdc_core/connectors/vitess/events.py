"""VStream events → the pipeline's `LogItem`s, in stream order.

VTGate sends a shard's transaction as one block (`BEGIN, FIELD?, ROW..., VGTID, COMMIT`,
in one or more responses, never interleaved with another shard's), a DDL as `VGTID,
DDL`, anything else that moved the position as `VGTID, OTHER`. A transaction's id, its
rank and the position to resume after it are all in its VGTID, which comes at its end;
so a transaction is gathered whole and then handed on as `TransactionBegin`, its rows,
`TransactionCommit`.

Positions (what offsets hold) are `{"vgtid", "epochs"}`: the VGTID (every shard's GTID
set, and the copy phase's progress) and each shard's epoch; while the copy phase runs,
also `copy`, the tables it has still to start per shard (`copy_progress.py`). A transaction's restart
position also names its shard, so that a restart inside it can read that shard's next
transaction first, as it was delivered before (see `source.VitessSource`).

The copy phase (`snapshot.mode: initial`) arrives as transactions too, one per batch
of copied rows (timestamp 0, as VTGate writes them). A batch cannot be read again as it
was (the copy resumes from its last primary key at a newer snapshot), so it is marked
not replayable: after a crash inside it, the rows already delivered are closed as a
transaction of their own and the batch is copied again (at least once, never lost).
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any

from cdc_core.connectors.vitess.copy_progress import CopyProgress
from cdc_core.connectors.vitess.fields import PRI_KEY, Decoder, column_of_field, decode_row, decoder
from cdc_core.connectors.vitess.positions import inherited_epoch, is_real, next_epoch, parse_position
from cdc_core.connectors.vitess.source_info import source_block
from cdc_core.connectors.vitess.vgtid import Vgtid
from cdc_core.errors import SchemaMismatchError, TidemarkError
from cdc_core.events.envelope import OP_CREATE, OP_DELETE, OP_UPDATE
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    RowChange,
    SchemaChange,
    TransactionBegin,
    TransactionCommit,
)

log = logging.getLogger("tidemark.vitess")

_DROP = re.compile(r"^\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?`?([^`\s,;]+)`?", re.IGNORECASE)
_KIND = re.compile(r"^\s*(CREATE|ALTER|DROP|RENAME|TRUNCATE)\s+TABLE", re.IGNORECASE)


@dataclass
class _Row:
    schema: TableSchema
    op: str
    before: tuple[Any, ...] | None
    after: tuple[Any, ...] | None
    shard: str


@dataclass
class _Transaction:
    shard: str
    before: Vgtid
    rows: list[_Row | SchemaChange] = field(default_factory=list)
    journal: Any = None
    copy: CopyProgress | None = None  # the copy phase's progress before the transaction
    new_shard: bool = False  # its shard is not in the stream's position (a first start, a reshard)


class EventAssembler:
    """The stream's state: position, epochs, table schemas; `feed` turns events into items."""

    def __init__(
        self,
        name: str,
        keyspace: str,
        vgtid: Vgtid,
        epochs: dict[str, int],
        tables: dict[TableId, TableSchema],
        type_names: Any,
        schema_seq: int = 0,
        copy: CopyProgress | None = None,
        epoch_floor: int = 0,
    ) -> None:
        self.name = name
        self.keyspace = keyspace
        self.vgtid = vgtid
        self.epochs = dict(epochs)
        # The least epoch of any transaction: after a lost VGTID (snapshot.mode
        # when_needed), one above every epoch of the lost position, so whatever shard a
        # key lives on now, its events order after those delivered before the loss.
        self.epoch_floor = epoch_floor
        self.tables = dict(tables)  # the keyspace's tables as the stream last described them
        self.type_names = type_names  # query.Type number -> name
        self.schema_seq = schema_seq
        self._decoding: dict[tuple[str, str], tuple[TableSchema, list[Decoder]]] = {}
        self._txn: _Transaction | None = None
        self._latest: Vgtid | None = None  # the VGTID of the block being gathered
        self.journal: Any = None  # the last reshard journal seen (stop_on_reshard)
        self.copy_completed = False
        self.copy = copy  # while the copy phase runs: what it has still to start
        # (shard, its position after) of each position-moving group handed on since the
        # last `take_groups`: what `delivery_order` records before the items leave
        self.groups: list[tuple[str, str]] = []

    # ------------------------------------------------------------------ positions

    @property
    def at_reshard(self) -> bool:
        """A reshard journal was seen and everything up to it is committed."""
        return self.journal is not None and self._txn is None

    def position(
        self, vgtid: Vgtid | None = None, shard: str | None = None, copy: CopyProgress | None = None
    ) -> dict[str, Any]:
        position: dict[str, Any] = {"vgtid": (vgtid or self.vgtid).to_json(), "epochs": dict(self.epochs)}
        if self.epoch_floor:
            position["epoch_floor"] = self.epoch_floor
        if shard is not None:
            position["shard"] = shard
        copy = copy or self.copy
        if copy is not None:
            position["copy"] = copy.to_json()
        return position

    def take_groups(self) -> list[tuple[str, str]]:
        groups, self.groups = self.groups, []
        return groups

    def _moved(self, shard: str) -> None:
        entry = self.vgtid.shard(shard)
        if entry is not None and is_real(entry.gtid):
            self.groups.append((shard, entry.gtid))

    def request(self, vgtid: Vgtid) -> Vgtid:
        """The VGTID to ask VStream for: `vgtid`, plus the tables the copy phase has still
        to start on shards past their start (a VGTID alone would skip them)."""
        return vgtid if self.copy is None else self.copy.request(vgtid)

    def _vgtid_event(self, message: Any, partial: bool) -> None:
        """A VGTID event holds every streamed shard's position; while one shard alone is
        streamed (`partial`, a restart inside its transaction), it updates that shard."""
        received = Vgtid.from_proto(message)
        if partial:
            merged = self.vgtid
            for entry in received.shards:
                merged = merged.with_shard(entry)
            received = merged
        self._latest = received

    # ------------------------------------------------------------------ events

    def feed(self, event: Any, types: Any, partial: bool = False) -> list[LogItem]:
        """Items for one VEvent (`types`: the VEventType enum)."""
        kind = event.type
        if kind == types.VGTID:
            self._vgtid_event(event.vgtid, partial)
            return []
        if kind == types.BEGIN:
            if self._txn is not None and any(isinstance(r, _Row) for r in self._txn.rows):
                raise TidemarkError(f"VStream sent BEGIN inside a transaction of shard {self._txn.shard}")
            # (a copy batch of an empty table is `BEGIN, FIELD` then `BEGIN, VGTID, COMMIT`:
            # the table's definition goes on into the second)
            carried = self._txn.rows if self._txn is not None else []
            before = self._txn.copy if self._txn is not None else (self.copy and self.copy.copy())
            restart, new_shard = self.vgtid, self.vgtid.shard(event.shard) is None
            named = self._latest.shard(event.shard) if new_shard and self._latest is not None else None
            if named is not None:
                # The shard's first transaction since the stream named it (VTGate's VGTID that
                # resolved `current`, or a reshard's): a restart inside it reads the shard from there.
                restart = restart.with_shard(named)
            self._txn = _Transaction(event.shard, restart, list(carried), copy=before, new_shard=new_shard)
            return []
        if kind == types.FIELD:
            change = self._field(event.field_event)
            if change is not None and self._txn is not None:
                self._txn.rows.append(change)
                return []
            return [change] if change is not None else []
        if kind == types.ROW:
            self._row(event.row_event)
            return []
        if kind == types.COMMIT:
            return self._commit(event)
        if kind == types.DDL:
            return self._ddl(event)
        if kind == types.OTHER:
            return self._advance(event)
        if kind == types.JOURNAL:
            self.journal = event.journal
            if self._txn is not None:
                self._txn.journal = event.journal
            return []
        if kind == types.COPY_COMPLETED:
            if event.keyspace and self.copy is not None:
                self.copy.completed(event.shard)
            if not event.keyspace:
                self.copy = None
                self.copy_completed = True
                log.info("VStream copy phase completed on every shard")
                if self._txn is None:  # the position past the copy, committed even if nothing follows
                    return [PositionAdvance(self.position(), int(time.time() * 1000))]
            return []
        return []  # HEARTBEAT, VERSION, LASTPK, SAVEPOINT, GTID: nothing moves for the pipeline

    def _field(self, message: Any) -> SchemaChange | None:
        table = message.table_name.split(".", 1)[-1]
        columns = tuple(column_of_field(f, self.type_names) for f in message.fields)
        table_id = TableId(self.keyspace, table)
        known = self.tables.get(table_id)
        key = tuple(c.name for c, f in zip(columns, message.fields, strict=True) if f.flags & PRI_KEY)
        if known is not None and set(known.primary_key) == set(key):
            key = known.primary_key  # the index order the snapshot session read
        schema = TableSchema(table_id, columns, key)
        self._decoding[(message.shard, table)] = (schema, [decoder(c) for c in columns])
        if self.copy is not None:
            self.copy.begun(message.shard, table)
        if known is not None and known.columns == schema.columns and known.primary_key == schema.primary_key:
            return None
        self.tables[table_id] = schema
        self.schema_seq += 1
        return SchemaChange(
            None,
            self.keyspace,
            "create_table" if known is None else "alter_table",
            (table_id,),
            (schema,),
            self._source(table, message.shard, 0),
            self.position(),
            self.schema_seq,
            int(time.time() * 1000),
        )

    def _row(self, message: Any) -> None:
        if self._txn is None:
            raise TidemarkError(f"VStream sent a ROW event of {message.table_name} outside a transaction")
        table = message.table_name.split(".", 1)[-1]
        found = self._decoding.get((message.shard, table))
        if found is None:
            raise SchemaMismatchError(
                f"VStream sent rows of {message.table_name} ({message.shard}) before its FIELD event"
            )
        schema, decoders = found
        for change in message.row_changes:
            before = decode_row(change.before, decoders) if change.HasField("before") else None
            after = decode_row(change.after, decoders) if change.HasField("after") else None
            op = (
                OP_UPDATE
                if before is not None and after is not None
                else (OP_CREATE if after is not None else OP_DELETE)
            )
            self._txn.rows.append(_Row(schema, op, before, after, message.shard))

    def _commit(self, event: Any) -> list[LogItem]:
        txn, self._txn = self._txn, None
        if txn is None:
            raise TidemarkError(f"VStream sent COMMIT without BEGIN on shard {event.shard}")
        after = self._latest or self.vgtid
        shard = txn.shard
        entry = after.shard(shard)
        if entry is None or not is_real(entry.gtid):
            raise TidemarkError(f"VStream committed a transaction on shard {shard} without its position")
        before_entry = txn.before.shard(shard)
        if shard in self.epochs and not txn.new_shard:
            previous = before_entry.gtid if before_entry is not None else ""
            epoch = next_epoch(self.epochs[shard], previous, entry.gtid)
        else:  # new to the stream (a reshard, a merge back to a retired name): after every shard it overlaps
            epoch = inherited_epoch(shard, self.epochs)
        epoch = max(epoch, self.epoch_floor)
        restart = self.position(txn.before, shard, txn.copy)
        # (Shards a reshard replaced keep their epochs: each new shard inherits from them
        # at its own first transaction, which may come long after its sibling's.)
        self.epochs[shard] = epoch
        if txn.journal is not None and before_entry is not None:
            # A reshard's journal (stop_on_reshard): the shard's position stays before it,
            # so a restart comes to the journal again and stops there again, instead of
            # streaming on from a shard that no longer serves.
            after = after.with_shard(before_entry)
        self.vgtid, self._latest = after, None
        self._moved(shard)
        ts_ms = event.timestamp * 1000 if event.timestamp else int(time.time() * 1000)
        copy = event.timestamp == 0  # a copy-phase batch (VTGate stamps binlog transactions)
        vgtid_text = after.to_json()
        items: list[LogItem] = [
            TransactionBegin(
                vgtid_text, epoch, parse_position(entry.gtid).rank, ts_ms, restart, replayable=not copy
            )
        ]
        for row in txn.rows:
            if isinstance(row, SchemaChange):
                items.append(row)
                continue
            source = self._source(row.schema.id.table, row.shard, ts_ms, vgtid_text)
            items.append(RowChange(row.schema, row.op, row.before, row.after, source, ts_ms))
        items.append(TransactionCommit(self.position(), ts_ms))
        return items

    def _ddl(self, event: Any) -> list[LogItem]:
        self.vgtid = self._latest or self.vgtid
        self._latest = None
        self._moved(event.shard)
        statement = event.statement
        kind = (_KIND.match(statement).group(1).lower() + "_table") if _KIND.match(statement) else "other"
        dropped = _DROP.match(statement)
        if kind == "truncate_table":
            log.warning(
                "%s on shard %s: Vitess streams no truncate event (nor does Debezium's Vitess connector), so its "
                "rows stay in every copy downstream, Delta included; to drop them there, remove the table's "
                "Delta table and snapshot it again",
                statement.strip()[:200],
                event.shard,
            )
        affected: tuple[TableId, ...] = ()
        if dropped is not None:
            table_id = TableId(self.keyspace, dropped.group(1))
            affected = (table_id,)
            self.tables.pop(table_id, None)
        self.schema_seq += 1
        ts_ms = event.timestamp * 1000 if event.timestamp else int(time.time() * 1000)
        table = dropped.group(1) if dropped else ""
        return [
            SchemaChange(
                statement,
                self.keyspace,
                kind,
                affected,
                (),
                self._source(table, event.shard, ts_ms),
                self.position(),
                self.schema_seq,
                ts_ms,
            )
        ]

    def _advance(self, event: Any) -> list[LogItem]:
        self.vgtid = self._latest or self.vgtid
        self._latest = None
        self._moved(event.shard)
        ts_ms = event.timestamp * 1000 if event.timestamp else int(time.time() * 1000)
        return [PositionAdvance(self.position(), ts_ms)]

    def _source(self, table: str, shard: str, ts_ms: int, vgtid: str | None = None) -> dict[str, Any]:
        return source_block(self.name, self.keyspace, table, shard, vgtid or self.vgtid.to_json(), ts_ms)
