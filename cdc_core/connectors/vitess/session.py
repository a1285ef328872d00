"""The Vitess snapshot session: VTGate's MySQL protocol, one shard at a time.

Incremental snapshots read each shard in windows of its own (`partitions`), between
watermark rows written into that shard's signal table, so a window's LW, chunk and HW
all lie in one shard's log and its released rows carry that shard's order key. VTGate
sends a query to one shard when the session targets it (``USE `keyspace:shard` ``), and
then passes it on unchanged, so table names are left unqualified. Everything else (key
order, bound values, the filter grammar, FLOAT read exactly) is MySQL's, and reused from
the MySQL connector's session.
"""

from __future__ import annotations

from typing import Any

import pymysql

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mysql.chunk_reader import CONVERSIONS, MySqlChunkSource
from cdc_core.connectors.mysql.server import quote
from cdc_core.connectors.vitess.fields import column_of
from cdc_core.connectors.vitess.types import VitessModes, VitessTypeMapper
from cdc_core.errors import SourceUnavailableError, TidemarkError
from cdc_core.schema.model import TableId, TableSchema


def mysql_params(config: ConnectorConfig) -> dict[str, Any]:
    secret = config.secret("database.password")
    return {
        "host": config.get("vitess.mysql.hostname") or config.get("database.hostname"),
        "port": config.get("vitess.mysql.port"),
        "user": config.get("database.user"),
        "password": secret.reveal() if secret else "",
    }


class VitessSession(MySqlChunkSource):
    """`cdc_core.connector.SourceSession` on a Vitess keyspace, through VTGate."""

    def __init__(self, config: ConnectorConfig) -> None:
        params = mysql_params(config)
        try:
            self.conn = pymysql.connect(
                **params,
                autocommit=True,
                connect_timeout=10,
                conv=CONVERSIONS,
                init_command="SET time_zone = '+00:00'",
            )
        except pymysql.err.OperationalError as exc:
            raise SourceUnavailableError(
                f"cannot reach VTGate's MySQL protocol at {params['host']}:{params['port']} "
                f"(vitess.mysql.hostname / vitess.mysql.port): {exc.args[-1]}"
            ) from None
        self.keyspace = config.get("vitess.keyspace")
        configured = config.get("vitess.shard")
        self.configured_shards = tuple(configured) if configured else ()
        self.signal_table = config.get("signal.data.collection")
        self.tablet_type = config.get("vitess.tablet.type").lower().replace("master", "primary")
        self.modes = VitessModes.from_config(config)
        self._target: str | None = None
        self._info = None
        self._modes = None

    # ------------------------------------------------------------------ targeting

    def shards(self) -> tuple[str, ...]:
        """The keyspace's shards (those `vitess.shard` names, when set)."""
        if self.configured_shards:
            return self.configured_shards
        with self.conn.cursor() as cur:
            cur.execute("SHOW VITESS_SHARDS LIKE %s", (f"{self.keyspace}/%",))
            found = [row[0].split("/", 1)[1] for row in cur.fetchall()]
        if not found:
            raise TidemarkError(f"VTGate knows no shard of keyspace {self.keyspace!r} (vitess.keyspace)")
        return tuple(sorted(found))

    def _use(self, partition: str | None) -> None:
        shard = partition if partition is not None else self.shards()[0]
        target = f"{self.keyspace}:{shard}@{self.tablet_type}"
        if target != self._target:
            with self.conn.cursor() as cur:
                cur.execute(f"USE {quote(target)}")
            self._target = target

    def _table_sql(self, table: TableId) -> str:
        if table.database != self.keyspace:
            raise TidemarkError(f"{table} is not in keyspace {self.keyspace} (vitess.keyspace)")
        return quote(table.table)

    def partitions(self, table: TableSchema) -> tuple[str | None, ...]:
        return self.shards()

    # ------------------------------------------------------------------ schema

    def list_tables(self) -> list[TableId]:
        self._use(None)
        with self.conn.cursor() as cur:
            cur.execute("SHOW FULL TABLES")
            return [TableId(self.keyspace, row[0]) for row in cur.fetchall() if row[1] == "BASE TABLE"]

    def table_schema(self, table: TableId) -> TableSchema:
        self._use(None)
        name = self._table_sql(table)
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            try:
                cur.execute(f"SHOW FULL COLUMNS FROM {name}")
            except pymysql.err.ProgrammingError as exc:
                raise TidemarkError(f"{table}: {exc.args[-1]}") from None
            columns = tuple(
                column_of(
                    r["Field"], _text(r["Type"]), r["Null"] == "YES", collation=_text(r["Collation"]) or None
                )
                for r in cur.fetchall()
            )
            cur.execute(f"SHOW INDEX FROM {name} WHERE Key_name = 'PRIMARY'")
            key = tuple(r["Column_name"] for r in sorted(cur.fetchall(), key=lambda r: r["Seq_in_index"]))
        return TableSchema(table, columns, key)

    def type_mapper(self) -> VitessTypeMapper:
        return VitessTypeMapper(self.modes)

    # ------------------------------------------------------------------ signals

    def read_signal(self, signal_id: str) -> Any:
        """A signal row, from whichever shard it was written to."""
        for shard in self.shards():
            self._use(shard)
            found = super().read_signal(signal_id)
            if found is not None:
                return found
        return None

    def position_marker(self) -> str:
        """No single position stands for a keyspace (each shard has its own), so none is
        given: snapshots read with watermark rows, never read-only."""
        return ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value or "")
