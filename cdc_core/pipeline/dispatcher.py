"""The one door every change passes through, in a fixed order:
filter → transaction metadata (order key) → shape (convert, mask) → serialise → offsets.

One place to reason about ordering: the dispatcher sees log items in log order and
assigns every record the offset from which a restart would resume right after it. After
a restart inside a transaction, the connector re-reads the transaction from its start;
the dispatcher numbers the re-read rows exactly as before but suppresses the records that
were already acknowledged, so nothing is lost, nothing is duplicated, and every event
keeps its order key.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.events.envelope import (
    ENDS_HEADER,
    OP_TRUNCATE,
    ORDER_HEADER,
    Record,
)
from cdc_core.events.topics import table_topic
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.record_writer import RecordWriter
from cdc_core.pipeline.release_payload import release_payload
from cdc_core.pipeline.row_events import row_events
from cdc_core.pipeline.schema_change_payload import schema_change_payload
from cdc_core.schema.model import TableId
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    RenderedChanges,
    RowChange,
    SchemaChange,
    Shaper,
    SnapshotRelease,
    Source,
    StateChange,
    TransactionBegin,
    TransactionCommit,
)
from cdc_core.transactions import (
    OpenTransaction,
    begin_payload,
    end_payload,
)

log = logging.getLogger("tidemark.dispatcher")


def make_offset(
    source: dict[str, Any],
    in_txn: bool,
    rows_done: int,
    schema_seq: int,
    snapshot: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The committed-offset document: where to resume, what to skip there, and the
    snapshot state at that point of the log."""
    offset = {"source": source, "in_txn": in_txn, "rows_done": rows_done, "schema_seq": schema_seq}
    if snapshot is not None:
        offset["snapshot"] = snapshot
    return offset


@dataclass
class DispatchStats:
    events: int = 0
    records: int = 0
    per_table: Counter[str] = field(default_factory=Counter)
    last_source_ts_ms: int | None = None
    last_position: dict[str, Any] | None = None


class _ShaperEntry:
    __slots__ = ("key_schema", "schema", "shaper", "staged", "value_schema")

    def __init__(self, schema: Any, shaper: Shaper, key_schema: bytes | None, value_schema: bytes) -> None:
        self.schema = schema
        self.shaper = shaper
        self.key_schema = key_schema
        self.value_schema = value_schema
        # Shapers of this schema's Spark-staged snapshot rows, by staged form digest.
        self.staged: dict[str, Shaper] = {}


class Dispatcher:
    def __init__(
        self,
        config: ConnectorConfig,
        source: Source,
        tracker: AckTracker,
        resume: dict[str, Any] | None = None,
    ) -> None:
        self.prefix = config.topic_prefix
        self.tables = TableFilter(config)
        self.rules = ColumnRules(config)
        self.types = source.type_mapper()
        self.shapes = source.shaper  # how the source's rows become events
        self.source_schema = source.source_schema()
        self.tracker = tracker
        self.skipped_ops = {op for op in config.get("skipped.operations") if op != "none"}
        self.txn_metadata = config.get("provide.transaction.metadata")
        self.schema_changes = config.get("include.schema.changes")
        self.records = RecordWriter(config, source.connector_name)
        self._shapers: dict[int, _ShaperEntry] = {}
        self.stats = DispatchStats()
        self.schema_seq = int(resume.get("schema_seq", 0)) if resume else 0
        self.snapshot_state: dict[str, Any] | None = resume.get("snapshot") if resume else None
        # After a restart inside a transaction: suppress this many of its rows (and its
        # BEGIN, when one of them was captured: that BEGIN went out with it).
        self._suppress_rows = int(resume["rows_done"]) if resume and resume.get("in_txn") else -1
        self._txn: OpenTransaction | None = None
        # Whether the open transaction's BEGIN was emitted (or, after a restart, delivered).
        self._begun = False
        self._restart: dict[str, Any] | None = None
        self._rows_in_txn = 0
        self._synthetic: str | None = None
        self._replayable = True
        # A transaction that could not be read again, cut by a crash (`interrupted` in the
        # offset): its END, with what was delivered of it, goes out first.
        self._interrupted: dict[str, Any] | None = resume.get("interrupted") if resume else None
        self._resume_source: dict[str, Any] | None = resume.get("source") if resume else None

    # ------------------------------------------------------------------ topics, shapers

    def topic_for(self, table: TableId) -> str:
        return table_topic(self.prefix, table.topic_suffix())

    def _shaper(self, schema: Any) -> _ShaperEntry:
        entry = self._shapers.get(id(schema))
        if entry is not None and entry.schema is schema:
            return entry
        topic = self.topic_for(schema.id)
        shaper = self.shapes(schema, topic, self.rules)
        envelope = shaper.envelope_schema(self.source_schema, self.txn_metadata)
        entry = _ShaperEntry(
            schema,
            shaper,
            orjson.dumps(shaper.key_schema) if shaper.key_schema else None,
            orjson.dumps(envelope),
        )
        if len(self._shapers) > 10_000:
            self._shapers.clear()
        self._shapers[id(schema)] = entry
        return entry

    def _staged_shaper(self, entry: _ShaperEntry, form: StagedForm) -> Shaper:
        """The shaper of rows in a staged form: the same events from fewer, shaped values."""
        shaper = entry.staged.get(form.digest)
        if shaper is None:
            shaper = self.shapes(entry.schema, entry.shaper.topic, self.rules, staged=form)
            entry.staged[form.digest] = shaper
        return shaper

    # ------------------------------------------------------------------ the door

    def process(self, items: list[LogItem]) -> list[tuple[Record, int]]:
        """Records for a batch of log items, each paired with its ack-tracker entry."""
        out: list[tuple[Record, int]] = []
        if self._interrupted is not None:
            self._close_interrupted(out)
        for item in items:
            if isinstance(item, RowChange):
                self._row(item, out)
            elif isinstance(item, RenderedChanges):
                self._rendered(item, out)
            elif isinstance(item, TransactionBegin):
                self._begin(item, out)
            elif isinstance(item, TransactionCommit):
                self._commit(item, out)
            elif isinstance(item, SchemaChange):
                self._schema_change(item, out)
            elif isinstance(item, PositionAdvance):
                self._advance(item.position, item.ts_ms)
            elif isinstance(item, StateChange):
                self.snapshot_state = item.snapshot
            elif isinstance(item, SnapshotRelease):
                self._snapshot_release(item, out)
            else:
                raise TypeError(f"unknown log item {item!r}")
        return out

    def state_at_rest(self) -> None:
        """The snapshot state committed where the log rests: signals from the kafka or
        file channel changed it while no log item came to carry it. Only between
        transactions (where the last position resumes after everything processed); else
        the next item of the log carries it."""
        position = self.stats.last_position or self._resume_source
        if self._txn is not None or self._suppress_rows >= 0 or self._interrupted is not None or not position:
            return
        self.tracker.add(make_offset(position, False, 0, self.schema_seq, self.snapshot_state), 0)

    def _emit(self, records: list[Record], offset: dict[str, Any], out: list[tuple[Record, int]]) -> None:
        entry = self.tracker.add(offset, len(records))
        out.extend((r, entry) for r in records)
        self.stats.records += len(records)

    def _begin(self, item: TransactionBegin, out: list[tuple[Record, int]]) -> None:
        """Open the transaction without emitting anything: as in Debezium, its BEGIN goes
        out with its first captured event (`_with_begin`), so a transaction that touches
        no captured table has neither BEGIN nor END."""
        self._txn = OpenTransaction(None if item.standalone else item.id, item.epoch, item.rank, item.ts_ms)
        self._restart = item.restart
        self._synthetic = item.synthetic
        self._replayable = item.replayable
        self._rows_in_txn = 0
        # Resuming at an in-transaction offset with no row delivered: only an eager BEGIN
        # of an earlier release committed such an offset, so that BEGIN was delivered.
        self._begun = self._suppress_rows == 0

    def _with_begin(self, records: list[Record]) -> list[Record]:
        """The records of a transaction's first captured event (or release record),
        preceded by its BEGIN. They share one ack-tracker entry and its offset, so a
        restart either finds them all delivered (the row is suppressed, and so is BEGIN)
        or emits them all again: never a second BEGIN, never none."""
        if self._begun or self._txn is None:
            return records
        self._begun = True
        if not self.txn_metadata or self._txn.id is None:  # no BEGIN for a standalone change
            return records
        return [*self.records.transaction(self._txn.id, begin_payload(self._txn)), *records]

    def _commit(self, item: TransactionCommit, out: list[tuple[Record, int]]) -> None:
        txn, self._txn = self._txn, None
        self._suppress_rows = -1
        self._begun = False
        offset = make_offset(item.position, False, 0, self.schema_seq, self.snapshot_state)
        self.stats.last_position = item.position
        records = []
        if txn is not None and txn.id is not None and self.txn_metadata and txn.total > 0:
            records += self.records.transaction(txn.id, end_payload(txn, item.ts_ms))
        self._emit(records, offset, out)

    def _advance(self, position: dict[str, Any], ts_ms: int) -> None:
        self.tracker.add(make_offset(position, False, 0, self.schema_seq, self.snapshot_state), 0)
        self.stats.last_position = position

    def _row(self, item: RowChange, out: list[tuple[Record, int]]) -> None:
        self._rows_in_txn += 1
        schema = item.table
        self.stats.last_source_ts_ms = item.ts_ms
        if not self.tables.captures(schema.id) or item.op in self.skipped_ops:
            if item.op == OP_TRUNCATE and self.tables.captures(schema.id):
                log.warning(
                    "TRUNCATE of %s not emitted (skipped.operations holds t, the default): its rows stay in "
                    "every copy downstream, Delta included; set skipped.operations to none to land truncates",
                    schema.id,
                )
            return
        suppressed = self._rows_in_txn <= self._suppress_rows
        entry = self._shaper(schema)
        shaper = entry.shaper if item.staged is None else self._staged_shaper(entry, item.staged)
        events = row_events(item, shaper, self._block)
        if suppressed:
            self._begun = True  # delivered before the restart, after (or with) its BEGIN
            return
        records = self.records.changes(entry.key_schema, entry.value_schema, events, entry.shaper.payload)
        self.stats.events += len(events)
        self.stats.per_table[str(schema.id)] += len(events)
        self._emit(self._with_begin(records), self._row_offset(), out)

    def _rendered(self, item: RenderedChanges, out: list[tuple[Record, int]]) -> None:
        """Changes the source rendered itself, each a transaction of its own: their records
        under one offset, the log's position after the last. Inside a transaction (a
        restart suppressing what was delivered) they are taken one by one."""
        if self._txn is not None or self._suppress_rows >= 0 or self._interrupted is not None:
            out.extend(self.process(item.expand()))
            return
        schema = item.table
        self.stats.last_source_ts_ms = item.ts_ms
        self.stats.last_position = item.position
        offset = make_offset(item.position, False, 0, self.schema_seq, self.snapshot_state)
        rows = item.rows
        if self.skipped_ops:
            rows = [row for row in rows if row[0] not in self.skipped_ops]
        if not rows or not self.tables.captures(schema.id):
            self.tracker.add(offset, 0)
            return
        entry = self._shaper(schema)
        records = self.records.rendered(entry.key_schema, entry.value_schema, entry.shaper.topic, rows)
        self.stats.events += len(rows)
        self.stats.per_table[str(schema.id)] += len(rows)
        self._emit(records, offset, out)

    def _snapshot_release(self, item: SnapshotRelease, out: list[tuple[Record, int]]) -> None:
        """The lakehouse fast path's release record, on `<prefix>.snapshot_releases`: the
        staged file, the keys to leave out (in event form, with their fields' schemas), and
        the order key it takes."""
        self._rows_in_txn += 1
        collection = str(item.table.id)
        # Numbered even when suppressed, so what follows keeps its order key after a restart.
        block = self._block(collection)
        if self._rows_in_txn <= self._suppress_rows:
            self._begun = True  # delivered before the restart, after (or with) its BEGIN
            return
        payload = release_payload(item, self.types, block)
        key = {"data_collection": collection, "window": item.window}
        record = self.records.without_schema(f"{self.prefix}.snapshot_releases", key, payload)
        self._emit(self._with_begin([record]), self._row_offset(), out)

    def _row_offset(self) -> dict[str, Any]:
        """Where to resume right after the current row: inside its transaction; or, for
        one that cannot be read again, before it, naming what of it was delivered."""
        if not self._replayable and self._txn is not None:
            offset = make_offset(self._restart or {}, False, 0, self.schema_seq, self.snapshot_state)
            txn = self._txn
            offset["interrupted"] = {
                "id": txn.id,
                "epoch": txn.epoch,
                "rank": txn.rank,
                "ts_ms": txn.ts_ms,
                "total": txn.total,
                "per_table": dict(txn.per_table),
            }
            return offset
        offset = make_offset(
            self._restart or {}, True, self._rows_in_txn, self.schema_seq, self.snapshot_state
        )
        return self._with_synthetic(offset)

    def _close_interrupted(self, out: list[tuple[Record, int]]) -> None:
        """The END of a transaction a crash cut and the log cannot give again: it counts
        what was delivered of it (at least that, as committed), so a consumer that waits
        for complete transactions (the Delta merge) takes it."""
        cut, self._interrupted = self._interrupted or {}, None
        txn = OpenTransaction(cut["id"], cut["epoch"], cut["rank"], cut["ts_ms"])
        txn.total, txn.per_table = int(cut["total"]), dict(cut["per_table"])
        records = []
        if self.txn_metadata and txn.total > 0 and txn.id is not None:
            records += self.records.transaction(txn.id, end_payload(txn, txn.ts_ms))
        offset = make_offset(self._resume_source or {}, False, 0, self.schema_seq, self.snapshot_state)
        self._emit(records, offset, out)

    def _with_synthetic(self, offset: dict[str, Any]) -> dict[str, Any]:
        """A transaction that is not in the log is named, so a restart inside it can have
        the snapshot stage replay it before reading on from `restart`."""
        if self._synthetic is not None:
            offset["synthetic"] = self._synthetic
        return offset

    def _block(self, data_collection: str) -> dict[str, Any] | None:
        if self._txn is None:
            return None
        block = self._txn.next_block(data_collection)
        return block if self.txn_metadata else None

    def _order_headers(self, item: SchemaChange) -> tuple[tuple[str, bytes], ...]:
        """Where a schema change falls among the transactions, and the captured tables whose
        rows it ends (`SchemaChange.order`, `.ends`), for the Delta merge."""
        if item.order is None:
            return ()
        ends = [[t.database, t.table] for t in item.ends if self.tables.captures(t)]
        order = ((ORDER_HEADER, b"%d,%d" % item.order),)
        return (*order, (ENDS_HEADER, orjson.dumps(ends))) if ends else order

    def _schema_change(self, item: SchemaChange, out: list[tuple[Record, int]]) -> None:
        self.schema_seq = item.history_seq
        offset = make_offset(item.position, False, 0, self.schema_seq, self.snapshot_state)
        self.stats.last_position = item.position
        captured = [t for t in item.affected if self.tables.captures(t)]
        database_level = not item.affected and item.database and self.tables.captures_database(item.database)
        records = []
        if self.schema_changes and (captured or database_level):
            payload = schema_change_payload(item, captured)
            key = {"databaseName": item.database or ""}
            records.append(self.records.without_schema(self.prefix, key, payload, self._order_headers(item)))
        self._emit(records, offset, out)
