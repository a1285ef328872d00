"""Which tables an execute-snapshot request reads, checked against the live database.

The chunk job plans its windows from this, and Airflow's validate step runs it before a
signal is sent, so a request naming a table outside the capture list, a filter over an
unknown column, a table without a usable key or (for a lakehouse release) a key column
the column rules change is refused with the same words in both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pymysql

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mysql import server
from cdc_core.connectors.mysql.ddl import parse_create_table
from cdc_core.connectors.mysql.types import MySqlTypeMapper, TypeModes
from cdc_core.errors import TidemarkError
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.signals.actions import ExecuteSnapshot, matching_tables
from cdc_core.signals.conditions import Condition, parse_condition
from cdc_core.snapshot.chunks import snapshot_key
from cdc_core.snapshot.staged_form import StagedForm


@dataclass(frozen=True)
class RequestedTable:
    table: TableId
    schema: TableSchema
    key: tuple[str, ...]
    condition_text: str | None
    condition: Condition | None


def table_schema(conn: pymysql.Connection, table: TableId) -> TableSchema:
    return parse_create_table(server.show_create_table(conn, table.database, table.table), table.database)


class Shaping:
    """The connector's column rules and type mapping, which give each table's staged form
    (picklable: the chunk job's Python reader builds forms on the executors)."""

    def __init__(self, config: ConnectorConfig, flavor: str) -> None:
        self.rules = ColumnRules(config)
        self.types = MySqlTypeMapper(TypeModes.from_config(config, flavor))

    def form(self, schema: TableSchema, snapshot_key: Sequence[str]) -> StagedForm:
        return StagedForm(schema, self.rules, self.types, tuple(snapshot_key))


def requested_tables(
    config: ConnectorConfig, conn: pymysql.Connection, action: ExecuteSnapshot
) -> list[RequestedTable]:
    """Every table the request names, with its chunk key and parsed filter; a
    TidemarkError naming every problem otherwise."""
    tables, problems = matching_tables(
        action.collections, [TableId(*t) for t in server.list_tables(conn)], TableFilter(config).captures
    )
    if problems:
        raise TidemarkError("; ".join(problems))
    shaping = Shaping(config, server.flavor(conn))
    found = []
    for table in tables:
        schema = table_schema(conn, table)
        key = snapshot_key(schema, action.surrogate_key, shaping.rules.key_for(schema))
        if action.release == "lakehouse":
            shaping.form(schema, key).check_mergeable()
        text = action.condition_for(table)
        condition = parse_condition(text, schema.column_names) if text else None
        found.append(RequestedTable(table, schema, key, text, condition))
    return found


def check_snapshot_request(config: ConnectorConfig, action: ExecuteSnapshot) -> list[dict[str, object]]:
    """The request as the chunk reader will run it (table, key, filter), without reading
    a row; raises what the streamer would refuse the signal for."""
    conn = server.connect(server.connection_params(config))
    try:
        return [
            {"table": str(r.table), "key": list(r.key), "filter": r.condition_text}
            for r in requested_tables(config, conn, action)
        ]
    finally:
        conn.close()
