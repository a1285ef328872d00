"""Which tables an execute-snapshot request reads, checked against the live source.

Written once for every connector: the Spark chunk job plans its windows from it, and
Airflow's validate step runs it before a signal is sent, so a request naming a table
outside the capture list, a filter over an unknown column, a table without a usable key
or (for a lakehouse release) a key column the column rules change is refused with the
same words in both, and as the streamer refuses it (`matching_tables`, `snapshot_key`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TidemarkError
from cdc_core.filters import ColumnRules, TableFilter
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.signals.actions import ExecuteSnapshot, matching_tables
from cdc_core.signals.conditions import Condition, condition_fields, parse_condition
from cdc_core.snapshot.chunks import snapshot_key
from cdc_core.snapshot.staged_form import StagedForm

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.connector import Connector, SourceSession
    from cdc_core.source import TypeMapper


@dataclass(frozen=True)
class RequestedTable:
    table: TableId
    schema: TableSchema
    key: tuple[str, ...]
    condition_text: str | None
    condition: Condition | None


class Shaping:
    """The connector's column rules and type mapping, which give each table's staged form
    (picklable: the chunk job's Python reader builds forms on the executors)."""

    def __init__(self, config: ConnectorConfig, types: TypeMapper) -> None:
        self.rules = ColumnRules(config)
        self.types = types

    def form(self, schema: TableSchema, snapshot_key: Sequence[str]) -> StagedForm:
        return StagedForm(schema, self.rules, self.types, tuple(snapshot_key))


def requested_tables(
    config: ConnectorConfig, session: SourceSession, action: ExecuteSnapshot, shaping: Shaping | None = None
) -> list[RequestedTable]:
    """Every table the request names, with its chunk key and parsed filter; a
    TidemarkError naming every problem otherwise."""
    capture = TableFilter(config)
    tables, problems = matching_tables(
        action.collections, session.list_tables(), capture.captures, excluded_by=capture.excluded_by
    )
    problems += action.unmatched_conditions(tables)
    if problems:
        raise TidemarkError("; ".join(problems))
    shaping = shaping or Shaping(config, session.type_mapper())
    found = []
    for table in tables:
        schema = session.table_schema(table)
        key = snapshot_key(schema, action.surrogate_key, shaping.rules.key_for(schema))
        if action.release == "lakehouse":
            shaping.form(schema, key).check_mergeable()
        text = action.condition_for(table)
        condition = parse_condition(text, condition_fields(schema)) if text else None
        found.append(RequestedTable(table, schema, key, text, condition))
    return found


def check_snapshot_request(
    connector: Connector, config: ConnectorConfig, action: ExecuteSnapshot
) -> list[dict[str, Any]]:
    """The request as the chunk reader will run it (table, key, filter), without reading
    a row; raises what the streamer would refuse the signal for."""
    session = connector.open_session(config)
    try:
        return [
            {"table": str(r.table), "key": list(r.key), "filter": r.condition_text}
            for r in requested_tables(config, session, action)
        ]
    finally:
        session.close()
