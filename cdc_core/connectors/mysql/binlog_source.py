"""The MySQL/MariaDB log reader: binlog events → `LogItem`s, in log order.

It owns everything MySQL-specific the pipeline must not know: binlog positions and GTID
sets (and the epoch/rank derived from them), the schema timeline fed by DDL found in the
log, and decoding row images with the schema of their own time. The schema held by the
timeline is cross-checked against the column names `binlog_row_metadata=FULL` writes
into every table-map event; a disagreement stops the streamer instead of decoding a row
with the wrong columns.

Decoding happens in a child process (`binlog_decoder`), in parallel with the pipeline;
this class turns the child's plain event tuples into `LogItem`s. python-mysql-replication
reconnects silently after a lost connection, from where *it* thinks it is; that would
replay or skip events behind the pipeline's back. The child therefore lets it open
exactly one stream connection, and any loss (of the connection or of the child) becomes
a `SourceConnectionLost`, after which the streamer restarts cleanly from its committed
offset.

A stop signal is for the streamer alone: the child ignores SIGINT and SIGTERM, even when
they are sent to the whole process group (Ctrl-C, Airflow stopping a task), so it cannot
die before the streamer has shut down in order; the streamer then kills it. A child that
dies all the same died on its own, and that is a failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import pymysql

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mysql import binlog_decoder as dec
from cdc_core.connectors.mysql import ddl, server
from cdc_core.connectors.mysql.binlog_events import BinlogEvents
from cdc_core.connectors.mysql.decoder_process import DecoderProcess, SourceConnectionLost
from cdc_core.connectors.mysql.position_watermarks import GtidWatermarks
from cdc_core.connectors.mysql.positions import MariaDbGtidState, MySqlGtidSet, binlog_file_index
from cdc_core.connectors.mysql.source_info import source_schema
from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes
from cdc_core.errors import PositionLostError, TidemarkError
from cdc_core.filters import RowShaper, TableFilter
from cdc_core.schema.history import SchemaHistory
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    SourceStatus,
)

log = logging.getLogger("tidemark.mysql")

ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
# Access denied (user/password, database, privilege): retrying cannot help.
ACCESS_ERRORS = {1044, 1045, 1142, 1227, 1370, 1698}


class BinlogSource(BinlogEvents):
    """`cdc_core.source.Source` for MySQL and MariaDB."""

    def __init__(self, config: ConnectorConfig, history: SchemaHistory) -> None:
        self.config = config
        self.history = history
        self.name = config.topic_prefix
        self.params = server.connection_params(config)
        self.server_id = config.get("database.server.id")
        self.tables_filter = TableFilter(config)
        self.signal_table = config.get("signal.data.collection")
        self.skip_unparseable = config.get("schema.history.internal.skip.unparseable.ddl")
        self.only_captured_ddl = config.get("schema.history.internal.store.only.captured.tables.ddl")
        self.failure_mode = config.get("event.processing.failure.handling.mode")
        self.batch_size = config.get("max.batch.size")
        self.modes = TypeModes.from_config(config)
        self.info: server.ServerInfo | None = None
        self.tables: dict[TableId, TableSchema] = {}
        self._decoder: DecoderProcess | None = None
        self._stopping = False
        self._checked: dict[tuple[TableId, tuple[str | None, ...]], TableSchema] = {}
        super().__init__()

    # ------------------------------------------------------------------ Source protocol

    def type_mapper(self) -> MySqlTypeMapper:
        return MySqlTypeMapper(self.modes)

    def source_schema(self) -> dict[str, Any]:
        return source_schema(self.connector_name)

    @property
    def connector_name(self) -> str:  # type: ignore[override]
        """`mariadb` or `mysql`, as Debezium 3 names its connector for the server (known
        once `open` has inspected it)."""
        return self.modes.flavor

    def open(self, offset: Mapping[str, Any] | None) -> None:
        self._open(offset, None)

    def open_after_loss(self, lost: Mapping[str, Any]) -> None:
        """A first start at the server's position now. With GTIDs the epoch is carried in
        the positions: one above the lost position's. Without them it is the binlog file's
        number, which only orders after the lost position's if the server numbers its
        files on from there (a RESET MASTER starts over at 1: refused)."""
        self._open(None, lost)

    def _open(self, offset: Mapping[str, Any] | None, lost: Mapping[str, Any] | None) -> None:
        ctl = self._control()
        try:
            self.info = server.inspect_server(ctl)
            self.modes = replace(self.modes, flavor="mariadb" if self.info.mariadb else "mysql")
            versioned = [
                f"{d}.{t}"
                for d, t in server.list_tables(ctl, ("SYSTEM VERSIONED",))
                if self.tables_filter.captures(TableId(d, t))
            ]
            if versioned:
                raise TidemarkError(server.versioned_refusal(versioned))
            if offset is None:
                self.epoch = 0 if lost is None else int(lost.get("epoch") or 0) + 1
                if lost is not None:
                    self._check_numbering(ctl, lost)  # before the schema history starts over
                position = self._first_start(ctl)
            else:
                position = self._resume(ctl, offset)
        finally:
            ctl.close()
        self._start_stream(position)

    def read(self) -> Iterator[list[LogItem]]:
        batch: list[LogItem] = []
        started = time.monotonic()
        while not self._stopping:
            records = self._receive(0.2)
            if records is None:  # nothing arrived in time
                if batch:
                    yield batch
                    batch, started = [], time.monotonic()
                continue
            for record in records:
                if record[0] == dec.HEARTBEAT:
                    if not self._in_txn:
                        batch.append(PositionAdvance(self._position(record[1]), int(time.time() * 1000)))
                    yield batch
                    batch, started = [], time.monotonic()
                    continue
                self._handle(record, batch)
                if len(batch) >= self.batch_size or (batch and time.monotonic() - started > 0.1):
                    yield batch
                    batch, started = [], time.monotonic()
        if batch:
            yield batch

    def _receive(self, timeout: float) -> list[tuple[Any, ...]] | None:
        """The next batch of event records from the decoder, or None after `timeout`."""
        assert self._decoder is not None
        message = self._decoder.receive(timeout)
        if message is None:
            return None
        if message[0] == dec.EVENTS:
            return message[1]
        raise self._failure(message, "lost the binlog connection to")

    def _failure(self, message: tuple[Any, ...], doing: str) -> TidemarkError:
        """A failure the decoder reported, as the error the streamer acts on."""
        _, kind, args, text = message
        if kind == "operational":
            return self._connection_error(pymysql.err.OperationalError(*args), doing)
        if kind == "connection":
            return SourceConnectionLost(f"{doing} the database: {text}")
        return TidemarkError(f"the binlog decoder failed: {kind}: {text}")

    def current_tables(self) -> Mapping[TableId, TableSchema]:
        return self.tables

    def shaper(self, schema: TableSchema, topic: str, rules: Any, staged: Any = None) -> RowShaper:
        return RowShaper(schema, topic, rules, self.type_mapper(), staged)

    def partitions(self, table: TableId) -> tuple[str | None, ...]:
        return (None,)  # one binlog

    def position_watermarks(self) -> GtidWatermarks:
        """Read-only snapshots: executed-GTID positions stand in for watermark rows."""
        if self.info is None or self.gtids is None:
            raise TidemarkError("read.only snapshots need GTIDs (MariaDB, or MySQL with gtid_mode=ON)")
        return GtidWatermarks(self)

    def chunk_source(self) -> Any:
        from cdc_core.connectors.mysql.chunk_reader import MySqlChunkSource

        return MySqlChunkSource(self.params, self.signal_table, self.modes)

    def stop(self) -> None:
        self._stopping = True

    def committed(self, offset: Mapping[str, Any]) -> None:
        """Nothing is kept past the committed offset: the log itself repeats in order."""

    def close(self) -> None:
        if self._decoder is not None:
            self._decoder.close()
            self._decoder = None

    def status(self, offset: Mapping[str, Any] | None) -> SourceStatus:
        head = None
        lag = None
        try:
            ctl = self._control()
            try:
                info = self.info or server.inspect_server(ctl)
                now = server.current_position(ctl, info)
                head = self.describe({"file": now.file, "pos": now.pos, "gtids": now.gtids})
            finally:
                ctl.close()
        except (pymysql.err.Error, TidemarkError) as exc:
            head = f"unavailable: {exc}"
        position = self.describe(offset["source"]) if offset else "none (not started)"
        return SourceStatus(self.connector_name, position, head, lag)

    def describe(self, position: Mapping[str, Any]) -> str:
        from cdc_core.connectors.mysql.connector import CONNECTOR

        return CONNECTOR.describe_position(position)

    # ------------------------------------------------------------------ start-up

    def _control(self) -> pymysql.Connection:
        try:
            return server.connect(self.params)
        except pymysql.err.OperationalError as exc:
            raise self._connection_error(exc, "cannot connect to") from None

    def _connection_error(self, exc: pymysql.err.OperationalError, doing: str) -> TidemarkError:
        """Refused credentials or privileges are final; anything else is worth a retry."""
        code = exc.args[0] if exc.args else None
        detail = exc.args[1] if len(exc.args) > 1 else str(exc)
        where = f"{self.params['host']}:{self.params['port']} as {self.params['user']}"
        if code in ACCESS_ERRORS:
            variable = self.config.get("database.password.env")
            if self.config.secret("database.password") is None:
                password = f"no password: set the environment variable {variable} (database.password.env)"
            else:
                password = f"the password from {variable} (database.password.env) or the Airflow connection"
            return TidemarkError(
                f"{doing} {where}: {detail}. Check the user, {password}, and the user's grants: REPLICATION "
                "SLAVE, REPLICATION CLIENT, SELECT"
            )
        return SourceConnectionLost(f"{doing} {where}: {detail}")

    def _first_start(self, ctl: pymysql.Connection) -> dict[str, Any]:
        """No offsets yet: read the current position and every table's schema together."""
        assert self.info is not None
        locked = server.try_global_read_lock(ctl)
        try:
            position = server.current_position(ctl, self.info)
            tables = {}
            for database, table in server.list_tables(ctl):
                table_id = TableId(database, table)
                if self.only_captured_ddl and not self.tables_filter.captures(table_id):
                    continue
                statement = server.show_create_table(ctl, database, table)
                rules = server.cascades(statement) if self.tables_filter.captures(table_id) else []
                if rules:
                    log.warning(server.cascade_warning(str(table_id), rules))
                try:
                    tables[table_id] = ddl.parse_create_table(statement, database)
                except ddl.UnparseableDdlError as exc:
                    if self.tables_filter.captures(table_id):
                        raise TidemarkError(
                            f"cannot read the definition of captured table {table_id}: {exc}"
                        ) from None
                    log.warning("skipping the schema of %s (not captured): %s", table_id, exc)
        finally:
            if locked:
                server.release_read_lock(ctl)
        if not locked:
            log.warning("no RELOAD privilege: read the schema without a global read lock")
        self.tables = tables
        self._set_gtids(position.gtids)
        self.file = position.file
        pos = self._position(position.pos)
        self.history.start(self.tables, pos)
        return pos

    def _resume(self, ctl: pymysql.Connection, offset: Mapping[str, Any]) -> dict[str, Any]:
        position = dict(offset["source"])
        if position.get("flavor") not in (None, self._flavor()):
            raise TidemarkError(
                f"the offsets were written for a {position.get('flavor')} server but this is {self._flavor()}"
            )
        self.tables = self.history.recover(int(offset.get("schema_seq", 0)), self._replay)
        self.epoch = int(position.get("epoch", 0))
        self._set_gtids(position.get("gtids"))
        self.file = position["file"]
        if not self._use_gtids() and position["file"] not in server.binlog_files(ctl):
            raise self._purged(position)
        return position

    def _check_numbering(self, ctl: pymysql.Connection, lost: Mapping[str, Any]) -> None:
        """Without GTIDs, whether events from the server's position now order after the
        lost position's (the epoch is the binlog file's number)."""
        assert self.info is not None
        now = server.current_position(ctl, self.info)
        self._set_gtids(now.gtids)
        if self._use_gtids() or not lost.get("file"):
            return
        if binlog_file_index(now.file) < binlog_file_index(str(lost["file"])):
            raise TidemarkError(
                f"cannot start again after the lost position ({self.describe(lost)}): the server's binlog files "
                f"are numbered from {now.file} now, below the lost position's, so new events would order before "
                "those delivered already (the order key is the file's number without GTIDs). Enable GTIDs, or "
                "remove the connector's state and its Delta tables and start again with snapshot.mode: initial"
            )

    def _use_gtids(self) -> bool:
        return self.info is not None and self.info.gtid_mode and self.gtids is not None

    def _set_gtids(self, text: str | None) -> None:
        assert self.info is not None
        if self.info.mariadb:
            self.gtids = MariaDbGtidState.parse(text)
        elif self.info.gtid_mode:
            self.gtids = MySqlGtidSet.parse(text)
        else:
            self.gtids = None

    def _purged(self, position: Mapping[str, Any]) -> PositionLostError:
        return PositionLostError(
            f"the binlog position to resume from ({self.describe(position)}) is no longer on the server: the "
            "binlog was purged (binlog_expire_logs_seconds / PURGE BINARY LOGS) while the connector was stopped. "
            "Events in between are lost to the log. To recover, remove this connector's state folder (offsets "
            "and schema history) and start again: capture restarts from the current position, and an "
            "incremental snapshot re-reads the tables; or set snapshot.mode: when_needed, and the streamer does "
            "so itself. Keep binlogs longer than the longest expected outage."
        )

    def _start_stream(self, position: dict[str, Any]) -> None:
        assert self.info is not None
        kwargs: dict[str, Any] = {
            "connection_settings": self.params,
            "server_id": self.server_id,
            "resume_stream": True,
            "is_mariadb": self.info.mariadb,
        }
        if self._use_gtids():
            kwargs["auto_position"] = str(self.gtids)
        else:
            kwargs["log_file"] = position["file"]
            kwargs["log_pos"] = position["pos"]
        self._decoder = DecoderProcess(
            kwargs, self.tables_filter, self.signal_table, f"tidemark-binlog-decoder-{self.name}"
        )
        # The server checks the requested position when the dump starts, and the decoder
        # reads one event before it reports: a purged position fails here, at start.
        try:
            message = self._decoder.first()
        except SourceConnectionLost:
            self.close()
            raise
        if message[0] == dec.FAILED:
            self.close()
            if (
                message[1] == "operational"
                and message[2]
                and message[2][0] == ER_MASTER_FATAL_ERROR_READING_BINLOG
            ):
                raise self._purged(position)
            raise self._failure(message, "cannot start reading the binlog from")
