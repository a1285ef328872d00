"""Snapshot chunk reads and watermark writes on MySQL/MariaDB.

Boundaries and ranges use row-value comparisons (`(a, b) > (%s, %s)`), so composite keys
order as the index does and strings compare under the column's own collation, in the
server. Every identifier comes from the schema timeline and is backtick-quoted; every
value is a bound parameter. The session runs in UTC so TIMESTAMP values read here equal
those decoded from the binlog, and under READ COMMITTED so a chunk sees only committed
rows (what DBLog's watermark ordering assumes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson
import pymysql
from pymysql import converters
from pymysql.constants import FIELD_TYPE

from cdc_core.connectors.mysql import server
from cdc_core.connectors.mysql.positions import MySqlGtidSet, binlog_file_index
from cdc_core.connectors.mysql.server import quote
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.signals.conditions import render
from cdc_core.snapshot.chunks import ChunkPlan, Key, chained_boundaries

MAX_SIGNAL_DATA = 2048
VISIBLE_WAIT_S = 30.0  # a read-only chunk waits this long for the database to show a commit
# Column types whose values Python orders exactly as the server does.
_EXACT = {
    "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT", "DECIMAL", "NUMERIC", "FLOAT", "DOUBLE",
    "DATE", "DATETIME", "TIMESTAMP", "TIME", "YEAR", "BINARY", "VARBINARY", "BIT",
}  # fmt: skip


def table_name(table: TableId) -> str:
    return f"{quote(table.database)}.{quote(table.table)}"


def select_list(schema: TableSchema) -> str:
    """The columns a chunk query reads, in table order. A FLOAT is read as the DOUBLE it
    widens to exactly (`* 1e0`, which keeps -0.0): the text protocol prints a FLOAT with six significant
    digits (1.234567 as 1.23457), where the binlog has all its bits."""
    return ", ".join(
        f"{quote(c.name)} * 1e0 AS {quote(c.name)}" if c.type_name.upper() == "FLOAT" else quote(c.name)
        for c in schema.columns
    )


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """pymysql gives a date Python cannot hold (MySQL's zero dates, '2024-00-00') as its
    text; the binlog decoder gives None, which the type mapping makes null (or the epoch
    in a NOT NULL column)."""

    def convert(text: str) -> Any:
        value = parse(text)
        return None if isinstance(value, str) else value

    return convert


# pymysql's conversions, with dates read as the binlog decoder reads them.
CONVERSIONS = {
    **converters.conversions,
    FIELD_TYPE.DATE: _or_none(converters.convert_date),
    FIELD_TYPE.DATETIME: _or_none(converters.convert_datetime),
    FIELD_TYPE.TIMESTAMP: _or_none(converters.convert_datetime),
}


# A placeholder no identifier can hold: MySQL names never contain U+0000.
_SLOT = "\x00"


def where_clause(
    plan: ChunkPlan,
    lo: Key | None,
    hi: Key | None,
    value: Callable[[Any], str],
    text: Callable[[str], str] = lambda s: s,
) -> str:
    """The condition of window `(lo, hi]` with the plan's filter ("" when there is none).
    `value` gives the SQL for each value (a bound-parameter mark, or a literal) and `text`
    escapes the rest (pymysql needs `%` doubled)."""
    key = text(", ".join(quote(k) for k in plan.key))
    wrap = (lambda s: f"({s})") if len(plan.key) > 1 else (lambda s: s)
    clauses: list[str] = []
    if lo is not None:
        clauses.append(f"{wrap(key)} > {wrap(', '.join(value(v) for v in lo))}")
    if hi is not None:
        clauses.append(f"{wrap(key)} <= {wrap(', '.join(value(v) for v in hi))}")
    if plan.condition is not None:
        sql, values = render(plan.condition, quote, placeholder=_SLOT)
        first, *rest = sql.split(_SLOT)
        pieces = [text(first)] + [value(v) + text(p) for v, p in zip(values, rest, strict=True)]
        clauses.append("(" + "".join(pieces) + ")")
    return " AND ".join(clauses)


class MySqlChunkSource:
    """`cdc_core.connector.SourceSession` on MySQL/MariaDB. (Vitess's session is one too,
    through VTGate's MySQL protocol: it names tables within a shard target, `_table_sql`,
    and reads each partition's chunks on its shard, `_use`.)"""

    def __init__(self, params: dict[str, Any], signal_table: str | None, modes: Any = None) -> None:
        try:
            self.conn = server.connect(params, init_command="SET time_zone = '+00:00'", conv=CONVERSIONS)
        except pymysql.err.OperationalError as exc:
            raise TidemarkError(
                f"snapshot reader cannot connect to {params.get('host')}:{params.get('port')}: {exc.args[-1]}"
            ) from None
        with self.conn.cursor() as cur:
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        self.signal_table = signal_table
        self._info: server.ServerInfo | None = None
        self._modes = modes  # the connector's handling modes (TypeModes without the flavor)

    def close(self) -> None:
        self.conn.close()

    def list_tables(self) -> list[TableId]:
        return [TableId(*t) for t in server.list_tables(self.conn)]

    def table_schema(self, table: TableId) -> TableSchema:
        from cdc_core.connectors.mysql.ddl import parse_create_table

        return parse_create_table(
            server.show_create_table(self.conn, table.database, table.table), table.database
        )

    def type_mapper(self) -> Any:
        """The mapping for this server (Debezium's MariaDB connector maps JSON as text)."""
        from dataclasses import replace

        from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes

        return MySqlTypeMapper(replace(self._modes or TypeModes(), flavor=server.flavor(self.conn)))

    def read_signal(self, signal_id: str) -> Any:
        from cdc_core.signals.actions import RawSignal

        if not self.signal_table:
            return None
        with self.conn.cursor() as cur:
            cur.execute(
                f"SELECT id, type, data FROM {self._table_sql(TableId.parse(self.signal_table))} WHERE id = %s",
                (signal_id,),
            )
            row = cur.fetchone()
        return None if row is None else RawSignal(row[0], row[1], row[2], "source")

    def _where(self, plan: ChunkPlan, lo: Key | None, hi: Key | None) -> tuple[str, list[Any]]:
        params: list[Any] = []

        def bind(value: Any) -> str:
            params.append(value)
            return "%s"

        where = where_clause(plan, lo, hi, bind, text=lambda s: s.replace("%", "%%"))
        return (" WHERE " + where if where else ""), params

    def _table_sql(self, table: TableId) -> str:
        """How a query names `table`."""
        return table_name(table)

    def _use(self, partition: str | None) -> None:
        """Send the next queries to `partition` (one server here: nothing to do)."""

    def _order(self, plan: ChunkPlan) -> str:
        return " ORDER BY " + ", ".join(quote(k) for k in plan.key)

    def next_boundary(self, plan: ChunkPlan, lo: Key | None, size: int) -> Key | None:
        self._use(plan.partition)
        where, params = self._where(plan, lo, None)
        sql = (
            f"SELECT {', '.join(quote(k) for k in plan.key)} FROM {self._table_sql(plan.table.id)}{where}"
            f"{self._order(plan)} LIMIT 1 OFFSET {int(size) - 1}"
        )
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            row = cur.fetchone()
        return None if row is None else tuple(row)

    def boundaries(self, plan: ChunkPlan, size: int) -> list[Key]:
        """Every `size`-th key. Keyed by the primary key, a chain of `next_boundary`
        queries: each walks `size` entries of the clustered index from the last boundary
        (5M rows: about a second). Any other key has no index to walk, and each of those
        queries would sort the table again, so one pass with ROW_NUMBER() instead (MySQL 8,
        MariaDB 10.2+; 5M rows: about 14 seconds), keys streamed from the server."""
        if plan.key == tuple(plan.table.primary_key):
            return chained_boundaries(self, plan, size)
        self._use(plan.partition)
        where, params = self._where(plan, None, None)
        keys = ", ".join(quote(k) for k in plan.key)
        aliases = ", ".join(f"k{i}" for i in range(len(plan.key)))
        inner = ", ".join(f"{quote(k)} AS k{i}" for i, k in enumerate(plan.key))
        sql = (
            f"SELECT {aliases} FROM (SELECT {inner}, ROW_NUMBER() OVER (ORDER BY {keys}) AS rn "
            f"FROM {self._table_sql(plan.table.id)}{where}) numbered WHERE MOD(rn, {int(size)}) = 0 ORDER BY rn"
        )
        with self.conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute(sql, params)
            return [tuple(row) for row in cur]

    def read_chunk(self, plan: ChunkPlan, lo: Key | None, hi: Key | None) -> list[tuple[Any, ...]]:
        self._use(plan.partition)
        where, params = self._where(plan, lo, hi)
        sql = f"SELECT {select_list(plan.table)} FROM {self._table_sql(plan.table.id)}{where}{self._order(plan)}"
        with self.conn.cursor() as cur:
            cur.execute(sql, params)
            return [tuple(row) for row in cur.fetchall()]

    def partitions(self, table: TableSchema) -> tuple[str | None, ...]:
        return (None,)  # one binlog

    def write_watermark(
        self, kind: str, signal_id: str, data: dict[str, Any], partition: str | None = None
    ) -> None:
        if not self.signal_table:
            raise TidemarkError("incremental snapshots need signal.data.collection (the signal table)")
        payload = orjson.dumps(data).decode()
        if len(payload) > MAX_SIGNAL_DATA:
            raise TidemarkError(
                f"a {kind} row needs {len(payload)} characters but the signal table's data column holds "
                f"{MAX_SIGNAL_DATA}; the chunk key values or the signal's data are too long. Widen the data column."
            )
        target = self._table_sql(TableId.parse(self.signal_table))
        self._use(partition)
        try:
            with self.conn.cursor() as cur:
                cur.execute(
                    f"INSERT INTO {target} (id, type, data) VALUES (%s, %s, %s)", (signal_id, kind, payload)
                )
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in (1142, 1044):
                raise TidemarkError(
                    f"the connector's user may not write watermarks to {self.signal_table}: {exc.args[1]}. Grant "
                    "INSERT on the signal table, or use the read-only snapshot mode (GTID watermarks)."
                ) from None
            raise

    def delete_watermark(self, signal_id: str, partition: str | None = None) -> None:
        if not self.signal_table:
            raise TidemarkError("incremental snapshots need signal.data.collection (the signal table)")
        target = self._table_sql(TableId.parse(self.signal_table))
        self._use(partition)
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"DELETE FROM {target} WHERE id = %s", (signal_id,))
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] in (1142, 1044):
                raise TidemarkError(
                    f"the connector's user may not delete watermarks from {self.signal_table}: {exc.args[1]}. "
                    "Grant DELETE on the signal table, or set incremental.snapshot.watermarking.strategy: "
                    "insert_insert."
                ) from None
            raise

    def read_chunk_seeing(
        self, plan: ChunkPlan, lo: Key | None, hi: Key | None, position: Mapping[str, Any] | None
    ) -> list[tuple[Any, ...]]:
        """Read-only snapshots: the chunk, read once this session sees every transaction
        of the binlog up to `position` (where the streamer stood when the window opened).
        A commit hands a transaction to the binlog, and so to the streamer, before other
        sessions see it (MariaDB's group commit; a semi-synchronous replica's
        acknowledgement can come in between)."""
        deadline = time.monotonic() + VISIBLE_WAIT_S
        while position is not None and not self._sees(position):
            if time.monotonic() > deadline:
                raise TidemarkError(
                    f"the server did not show the transactions up to {position.get('file')}:{position.get('pos')} "
                    f"to other sessions within {VISIBLE_WAIT_S:.0f}s; the chunk is read again later"
                )
            time.sleep(0.005)
        return self.read_chunk(plan, lo, hi)

    def _sees(self, position: Mapping[str, Any]) -> bool:
        """Whether a read started now sees every transaction up to `position`: MariaDB gives
        the binlog position a consistent snapshot starts at (all that is visible, and no
        more); MySQL adds a GTID to gtid_executed after the transaction is visible."""
        if self._info is None:
            self._info = server.inspect_server(self.conn)
        with self.conn.cursor() as cur:
            if self._info.mariadb:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                try:
                    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                    status = {name.lower(): value for name, value in cur.fetchall()}
                finally:
                    cur.execute("COMMIT")
                seen = (
                    binlog_file_index(status["binlog_snapshot_file"]),
                    int(status["binlog_snapshot_position"]),
                )
                return seen >= (binlog_file_index(position["file"]), int(position["pos"]))
            cur.execute("SELECT @@GLOBAL.gtid_executed")
            executed = MySqlGtidSet.parse(cur.fetchone()[0])
        return executed.succeeds(MySqlGtidSet.parse(position.get("gtids")))

    def position_marker(self) -> str:
        """The server's executed GTID position now (read-only watermarks)."""
        if self._info is None:
            self._info = server.inspect_server(self.conn)
        return server.current_position(self.conn, self._info).gtids or ""

    def exact_key_order(self, plan: ChunkPlan) -> bool:
        for name in plan.key:
            column = plan.table.column(name)
            if column is None:
                return False
            if column.type_name.upper() not in _EXACT:
                return False  # text: collations (case, accents, trailing spaces) are the server's business
        return True
