"""The MySQL/MariaDB binlog's events, as the decoder child hands them over, turned into
`LogItem`s: transactions from GTID, BEGIN, XID and COMMIT events with their order key,
DDL applied to the schema timeline (and kept in the schema history), TRUNCATE as an
`op=t` event, row images checked against their table map. `BinlogSource` opens the
stream and feeds it; this half holds the log state it moves along."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cdc_core.connectors.mysql import binlog_decoder as dec
from cdc_core.connectors.mysql import ddl, server
from cdc_core.connectors.mysql.ddl_effects import check_effects
from cdc_core.connectors.mysql.ddl_tokens import shorten
from cdc_core.connectors.mysql.positions import MariaDbGtidState, MySqlGtidSet, binlog_file_index
from cdc_core.connectors.mysql.source_info import TIDEMARK_VERSION
from cdc_core.connectors.mysql.statement_dml import dml_tables, is_dml
from cdc_core.errors import SchemaMismatchError, TidemarkError
from cdc_core.events.envelope import OP_CREATE, OP_TRUNCATE, OP_UPDATE
from cdc_core.filters import TableFilter
from cdc_core.schema.history import SchemaHistory
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    RowChange,
    SchemaChange,
    TransactionBegin,
    TransactionCommit,
)

log = logging.getLogger("tidemark.mysql")


class BinlogEvents:
    """The log-reading half of `BinlogSource`: position, GTID state and transaction in
    progress, and what each decoded event adds to a batch."""

    # Set by `BinlogSource` from its configuration and the server it opened.
    name: str
    history: SchemaHistory
    info: server.ServerInfo | None
    tables: dict[TableId, TableSchema]
    tables_filter: TableFilter
    skip_unparseable: bool
    only_captured_ddl: bool
    failure_mode: str
    connector_name: str  # `mysql` or `mariadb`
    _checked: dict[tuple[TableId, tuple[str | None, ...]], TableSchema]

    def __init__(self) -> None:
        self.file = ""
        self.epoch = 0
        self.gtids: MariaDbGtidState | MySqlGtidSet | None = None
        self._pending_gtid: str | None = None
        self._txn_gtids: Any = None
        self._in_txn = False
        self._thread: int | None = None
        self._txn_tables: set[str] = set()  # tables the open transaction changed (for XA)
        self._prepared_xa: dict[bytes, set[str]] = {}  # XA transactions emitted at their PREPARE
        self._begin_pos = 0
        self._restart: dict[str, Any] = {}

    def _flavor(self) -> str:
        assert self.info is not None
        return "mariadb" if self.info.mariadb else "mysql"

    def _position(self, pos: int) -> dict[str, Any]:
        position: dict[str, Any] = {
            "flavor": self._flavor(),
            "file": self.file,
            "pos": pos,
            "epoch": self.epoch,
        }
        if self.gtids is not None:
            position["gtids"] = str(self.gtids)
        return position

    def _handle(self, record: tuple[Any, ...], batch: list[LogItem]) -> None:
        kind = record[0]
        if kind == dec.ROWS:
            self._rows(record, batch)
        elif kind == dec.ROTATE:
            self.file = record[1]
        elif kind == dec.MARIADB_GTID:
            _, gtid, flags, timestamp, start = record
            self._gtid(gtid, start, batch, timestamp * 1000, begins=not (flags & 1))
        elif kind == dec.MYSQL_GTID:
            _, gtid, timestamp, start = record
            self._gtid(gtid, start, batch, timestamp * 1000, begins=False)
        elif kind == dec.QUERY:
            self._query(record, batch)
        elif kind == dec.XID:
            self._commit(record[2], batch, record[1] * 1000)
        elif kind == dec.XA_PREPARE:
            _, timestamp, end_pos, one_phase, gtrid = record
            if not one_phase:
                self._prepared_xa[gtrid] = set(self._txn_tables)
            self._commit(end_pos, batch, timestamp * 1000)
        elif kind == dec.UNREADABLE:
            _, event_type, start, _end = record
            self._cannot_process(f"the binlog holds {dec.unreadable(event_type)} at {self.file}:{start}")

    def _gtid(self, gtid: str, start: int, batch: list[LogItem], ts_ms: int, begins: bool) -> None:
        """A GTID event starts a transaction (MariaDB) or names the next one (MySQL)."""
        self._pending_gtid = gtid
        self._begin_pos = start
        self._restart = self._position(self._begin_pos)
        if begins:
            self._begin(batch, ts_ms)

    def _begin(self, batch: list[LogItem], ts_ms: int) -> None:
        gtid = self._pending_gtid
        if gtid is not None and self.gtids is not None:
            after = self.gtids.with_gtid(gtid)
            epoch = self.epoch if after.succeeds(self.gtids) else self.epoch + 1
            self._txn_gtids = (after, epoch)
            rank = after.rank()
            txn_id = gtid
        else:
            epoch, rank = binlog_file_index(self.file), self._begin_pos
            self._txn_gtids = None
            txn_id = f"file={self.file},pos={self._begin_pos}"
        self._in_txn = True
        self._txn_tables = set()
        batch.append(TransactionBegin(txn_id, epoch, rank, ts_ms, self._restart))

    def _commit(self, end_pos: int, batch: list[LogItem], ts_ms: int) -> None:
        if not self._in_txn:
            return
        self._apply_txn_gtids()
        self._in_txn = False
        self._thread = None
        batch.append(TransactionCommit(self._position(end_pos), ts_ms))

    def _apply_txn_gtids(self) -> None:
        if self._txn_gtids is not None:
            self.gtids, self.epoch = self._txn_gtids
            self._txn_gtids = None
        self._pending_gtid = None

    def _query(self, record: tuple[Any, ...], batch: list[LogItem]) -> None:
        _, query, database, thread_id, timestamp, start, end_pos = record
        ts_ms = timestamp * 1000
        query = query.strip()
        upper = query[:10].upper()
        if upper.startswith("BEGIN"):
            if self._in_txn:
                return
            if not self._pending_gtid:
                self._begin_pos = start
                self._restart = self._position(self._begin_pos)
            self._thread = thread_id
            self._begin(batch, ts_ms)
            return
        if upper.startswith("COMMIT"):
            self._commit(end_pos, batch, ts_ms)
            return
        if upper.startswith("XA "):
            self._xa_outcome(query)
            return
        if upper.startswith(("ROLLBACK", "SAVEPOINT")):
            return
        if not self._pending_gtid and not self._in_txn:
            # Without a GTID event, a statement's restart point is its own start.
            self._begin_pos = start
            self._restart = self._position(self._begin_pos)
        if is_dml(query):
            self._statement_dml(query, database or None, start)
        self._ddl(query, database or None, end_pos, batch, ts_ms, start)

    def _xa_outcome(self, query: str) -> None:
        """A prepared XA transaction's changes went out at its XA PREPARE (where the binlog
        holds them, with no later copy): its XA COMMIT adds nothing, and an XA ROLLBACK
        cannot take them back from the copies downstream, so it is said, naming the tables."""
        words = query.split(None, 2)
        if len(words) < 3 or words[1].upper() not in ("COMMIT", "ROLLBACK"):
            return
        gtrid = _xa_gtrid(words[2])
        tables = self._prepared_xa.pop(gtrid, None) if gtrid is not None else None
        if words[1].upper() == "ROLLBACK":
            log.warning(
                "%s at %s: the prepared XA transaction's changes were emitted at its XA PREPARE and stay in "
                "every copy downstream, Delta included (tables: %s); correct those rows there",
                query[:200],
                self.file,
                ", ".join(sorted(tables)) if tables else "not known since this run began",
            )

    def _ddl(
        self, query: str, database: str | None, end_pos: int, batch: list[LogItem], ts_ms: int, start: int
    ) -> None:
        try:
            outcome = ddl.apply_ddl(query, database, self.tables)
        except ddl.UnparseableDdlError as exc:
            if not self.skip_unparseable:
                raise TidemarkError(
                    f"cannot parse DDL at {self.file}:{start}: {exc}. Set "
                    "schema.history.internal.skip.unparseable.ddl=true to skip such statements (only if they do "
                    "not change captured tables)"
                ) from None
            log.warning("skipping DDL the parser cannot read at %s:%s: %s", self.file, end_pos, exc)
            outcome = None
        gtid = self._pending_gtid
        self._apply_txn_gtids_for_standalone(gtid)
        position = self._position(end_pos)
        if outcome is None or outcome.kind == "ignored":
            batch.append(PositionAdvance(position, ts_ms))
            return
        if outcome.kind == "truncate_table":
            for table_id in outcome.affected:
                schema = self.tables.get(table_id)
                if schema is not None and self.tables_filter.captures(table_id):
                    self._truncate(schema, batch, ts_ms, gtid, end_pos)
            batch.append(PositionAdvance(position, ts_ms))
            return
        check_effects(query, outcome, self.tables_filter.captures, f"{self.file}:{start}")
        self.tables = dict(outcome.tables)
        self._checked.clear()
        if self.only_captured_ddl and not any(self.tables_filter.captures(t) for t in outcome.affected):
            batch.append(PositionAdvance(position, ts_ms))
            return
        seq = self.history.append(query, database, position, ts_ms)
        self.history.maybe_checkpoint(self.tables, position)
        source = self.source_block_at(database or "", None, ts_ms, gtid, end_pos, 0)
        affected_schemas = tuple(self.tables[t] for t in outcome.affected if t in self.tables)
        # The rows gone from a name: a dropped (or renamed away) table's, a replaced one's,
        # and either name's in a rename (a swap leaves each name holding the other's rows).
        gone = tuple(t for t in outcome.affected if t not in self.tables) + outcome.replaced
        ends = outcome.affected if outcome.kind == "rename_table" else gone
        batch.append(
            SchemaChange(
                query,
                database,
                outcome.kind,
                outcome.affected,
                affected_schemas,
                source,
                position,
                seq,
                ts_ms,
                self._order(end_pos),
                ends,
            )
        )

    def _truncate(
        self, schema: TableSchema, batch: list[LogItem], ts_ms: int, gtid: str | None, end_pos: int
    ) -> None:
        """TRUNCATE is DDL in the log; Debezium emits it as an `op=t` event in its own transaction."""
        restart = self._restart
        txn_id = gtid or f"file={self.file},pos={end_pos}"
        batch.append(TransactionBegin(txn_id, *self._order(end_pos), ts_ms, restart))
        source = self.source_block_at(schema.id.database, schema.id.table, ts_ms, gtid, end_pos, 0)
        batch.append(RowChange(schema, OP_TRUNCATE, None, None, source, ts_ms))
        batch.append(TransactionCommit(self._position(end_pos), ts_ms))

    def _order(self, end_pos: int) -> tuple[int, int]:
        """(epoch, rank) of a statement outside any transaction (DDL), its GTID applied."""
        if self.gtids is not None:
            return self.epoch, self.gtids.rank()
        return binlog_file_index(self.file), end_pos

    def _apply_txn_gtids_for_standalone(self, gtid: str | None) -> None:
        if gtid is not None and self.gtids is not None and not self._in_txn:
            after = self.gtids.with_gtid(gtid)
            self.epoch = self.epoch if after.succeeds(self.gtids) else self.epoch + 1
            self.gtids = after
        if not self._in_txn:
            self._pending_gtid = None

    def _rows(self, record: tuple[Any, ...], batch: list[LogItem]) -> None:
        _, op, db, table, names, timestamp, start, _end, rows, error = record
        table_id = TableId(db, table)
        if names == server.SEQUENCE_COLUMNS and table_id not in self.tables:
            return  # a MariaDB sequence's own state (NEXTVAL, SETVAL): not a table's rows
        schema = self._schema_for(table_id, names)
        self._txn_tables.add(str(table_id))
        if rows is None:
            self._decode_failure(table_id, start, error)
            return
        ts_ms = timestamp * 1000
        gtid = self._pending_gtid
        source_block = self.source_block_at
        append = batch.append
        if op == OP_UPDATE:
            for index, (before, after) in enumerate(rows):
                append(
                    RowChange(
                        schema, op, before, after, source_block(db, table, ts_ms, gtid, start, index), ts_ms
                    )
                )
        elif op == OP_CREATE:
            for index, after in enumerate(rows):
                append(
                    RowChange(
                        schema, op, None, after, source_block(db, table, ts_ms, gtid, start, index), ts_ms
                    )
                )
        else:
            for index, before in enumerate(rows):
                append(
                    RowChange(
                        schema, op, before, None, source_block(db, table, ts_ms, gtid, start, index), ts_ms
                    )
                )

    def _decode_failure(self, table_id: TableId, pos: int, error: str) -> None:
        self._cannot_process(f"cannot decode a row event of {table_id} at {self.file}:{pos}: {error}")

    def _statement_dml(self, query: str, database: str | None, pos: int) -> None:
        """A data change the binlog holds as its statement (a session's binlog_format
        STATEMENT or MIXED): no rows to emit, so one on a captured table cannot be processed."""
        captured = sorted(str(t) for t in dml_tables(query, database) if self.tables_filter.captures(t))
        if captured:
            self._cannot_process(
                f"a change of {', '.join(captured)} at {self.file}:{pos} is logged as its statement, not its "
                f"rows ({shorten(query)}): the session that ran it set binlog_format=STATEMENT or MIXED, and "
                "rows are needed (binlog_format=ROW for every writer). event.processing.failure.handling.mode="
                "warn skips such statements; an incremental snapshot of the table then re-reads its rows (a row "
                "such a statement deleted stays until deleted again)"
            )

    def _cannot_process(self, message: str) -> None:
        if self.failure_mode == "fail":
            raise TidemarkError(message + " (event.processing.failure.handling.mode=fail)") from None
        if self.failure_mode == "warn":
            log.warning("%s; skipped", message)

    def _schema_for(self, table_id: TableId, names: tuple[str | None, ...]) -> TableSchema:
        """The timeline's schema, checked once per table-map against its FULL metadata."""
        schema = self.tables.get(table_id)
        if schema is None:
            raise SchemaMismatchError(
                f"row event for {table_id} at {self.file}, but the schema history has no definition of it; "
                "the history is incomplete (was it created with store.only.captured.tables.ddl while the capture "
                "list changed?). Reset the connector's state to rebuild it from the current schema."
            )
        key = (table_id, names)
        if self._checked.get(key) is schema:
            return schema
        expected = list(schema.column_names)
        if len(names) != len(expected) or any(
            n is not None and not n.startswith("UNKNOWN_COL") and n.lower() != e.lower()
            for n, e in zip(names, expected, strict=False)
        ):
            raise SchemaMismatchError(
                f"the binlog's table map for {table_id} at {self.file} has columns {list(names)}, but the schema "
                f"history says {expected}; refusing to decode rows with the wrong columns. A DDL statement was "
                "probably missed (applied with sql_log_bin=0?). Reset the connector's state to rebuild the "
                "history from the current schema."
            )
        self._checked[key] = schema
        return schema

    def source_block_at(
        self, db: str, table: str | None, ts_ms: int, gtid: str | None, pos: int, row: int
    ) -> dict[str, Any]:
        return {
            "version": TIDEMARK_VERSION,
            "connector": self.connector_name,
            "name": self.name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": db,
            "sequence": None,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "table": table,
            "server_id": self.info.server_id if self.info else 0,
            "gtid": gtid,
            "file": self.file,
            "pos": pos,
            "row": row,
            "thread": self._thread,
            "query": None,
        }

    def _replay(
        self, entry: dict[str, Any], tables: Mapping[TableId, TableSchema]
    ) -> Mapping[TableId, TableSchema]:
        """Re-apply one stored DDL entry while recovering the timeline."""
        return ddl.apply_ddl(entry["ddl"], entry.get("database"), tables).tables


def _xa_gtrid(xid: str) -> bytes | None:
    """The gtrid of an XA statement's xid as the binlog writes it (`X'6131',X'',1` or
    `'a1'`), in the bytes the XA PREPARE event carries."""
    text = xid.strip()
    try:
        if text[:2].upper() == "X'":
            return bytes.fromhex(text[2 : text.index("'", 2)])
        if text[:1] in ("'", '"'):
            return text[1 : text.index(text[0], 1)].encode()
    except ValueError:
        return None
    return None
