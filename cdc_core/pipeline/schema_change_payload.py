"""The value of a schema-change record (topic `<prefix>`): the DDL and the definitions of
the captured tables it changed, in Debezium's `tableChanges` form."""

from __future__ import annotations

from typing import Any

from cdc_core.schema.model import TableId
from cdc_core.source import SchemaChange


def schema_change_payload(item: SchemaChange, captured: list[TableId]) -> dict[str, Any]:
    by_id = {t.id: t for t in item.tables}
    changes = []
    for table_id in captured:
        schema = by_id.get(table_id)
        change_type = "DROP" if schema is None else ("CREATE" if item.kind == "create_table" else "ALTER")
        changes.append(
            {
                "type": change_type,
                "id": f'"{table_id.database}"."{table_id.table}"',
                "table": None if schema is None else _table_change(schema),
            }
        )
    return {
        "source": item.source,
        "ts_ms": item.ts_ms,
        "databaseName": item.database or "",
        "schemaName": None,
        "ddl": item.ddl,
        "tableChanges": changes,
    }


def _table_change(schema: Any) -> dict[str, Any]:
    return {
        "defaultCharsetName": schema.charset,
        "primaryKeyColumnNames": list(schema.primary_key),
        "columns": [
            {
                "name": c.name,
                "typeName": c.type_name,
                "typeExpression": c.type_name,
                "charsetName": c.charset,
                "length": c.length,
                "scale": c.scale,
                "position": i + 1,
                "optional": c.nullable,
                "autoIncremented": c.auto_increment,
                "generated": c.generated,
                "comment": c.comment,
                "enumValues": list(c.enum_values) or None,
            }
            for i, c in enumerate(schema.columns)
        ],
        "comment": schema.comment,
    }
