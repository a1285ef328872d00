"""A collection as the pipeline sees it, and its events as Debezium's MongoDB connector
writes them.

A collection has no fixed columns: its table schema holds two, `_id` (the key) and
`document` (the whole document), and a row image is the pair. The envelope is Debezium's
MongoDB one: key `{"id": <_id as relaxed Extended JSON>}`, value `{before, after,
updateDescription, source, op, ts_ms, transaction}` where `before` and `after` are the
documents as strict Extended JSON text (`io.debezium.data.Json`) and `updateDescription`
what an update changed (`removedFields`, `updatedFields`, `truncatedArrays`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cdc_core.connectors.mongodb.ext_json import relaxed, strict
from cdc_core.connectors.mongodb.field_rules import FieldRules
from cdc_core.events import connect_schema
from cdc_core.events.connect_schema import Schema, field, struct
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import IDENTITY, ColumnMapping

ID, DOCUMENT = "_id", "document"


def collection_schema(table: TableId) -> TableSchema:
    return TableSchema(
        table, (Column(ID, "BSON", nullable=False), Column(DOCUMENT, "DOCUMENT")), (ID,), documents=True
    )


def _json(name: str) -> Schema:
    return field("string", name, optional=True, logical="io.debezium.data.Json", version=1)


UPDATE_DESCRIPTION = struct(
    "io.debezium.connector.mongodb.changestream.updatedescription",
    [
        {
            "type": "array",
            "items": {"type": "string", "optional": False},
            "optional": True,
            "field": "removedFields",
        },
        _json("updatedFields"),
        {
            "type": "array",
            "items": struct(
                "io.debezium.connector.mongodb.changestream.truncatedarray",
                [field("string", "field", optional=False), field("int32", "size", optional=False)],
                version=1,
            ),
            "optional": True,
            "field": "truncatedArrays",
        },
    ],
    optional=True,
    field_name="updateDescription",
    version=1,
)


class DocumentShaper:
    """`cdc_core.source.Shaper` of a collection."""

    def __init__(self, schema: TableSchema, topic: str) -> None:
        self.schema = schema
        self.topic = topic
        self.key_plan = True
        self.key_schema: Schema | None = connect_schema.key_schema(
            topic, [field("string", "id", optional=False)]
        )

    def key(self, values: tuple[Any, ...]) -> dict[str, Any]:
        return {"id": relaxed(values[0])}

    def key_values(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        return (values[0],)

    def row(self, values: tuple[Any, ...] | None) -> str | None:
        if values is None or values[1] is None:
            return None
        return strict(values[1])

    def envelope_schema(self, source: Schema, ordered: bool) -> Schema:
        return struct(
            f"{self.topic}.Envelope",
            [
                _json("before"),
                _json("after"),
                UPDATE_DESCRIPTION,
                source,
                field("string", "op"),
                field("int64", "ts_ms"),
                connect_schema.transaction_block_schema(ordered, standalone=True),
            ],
        )

    def payload(self, event: Any) -> dict[str, Any]:
        return {
            "before": event.before,
            "after": event.after,
            "updateDescription": (event.extra or {}).get("updateDescription"),
            "source": event.source,
            "op": event.op,
            "ts_ms": event.ts_ns // 1_000_000,
            "transaction": event.transaction,
        }


class MongoTypeMapper:
    """`cdc_core.source.TypeMapper` of a collection's two columns (picklable); `field_rules`:
    the connector's `field.exclude.list` and `field.renames`, which shape its documents."""

    def __init__(self, field_rules: FieldRules | None = None) -> None:
        self.field_rules = field_rules

    def map_column(self, column: Column, optional: bool | None = None) -> ColumnMapping:
        opt = column.nullable if optional is None else optional
        if column.name == ID:
            return ColumnMapping(field("string", ID, opt), relaxed)
        return ColumnMapping(_json(column.name), strict)

    def key_value(self, column: Column) -> Callable[[Any], Any]:
        """`_id`s compare as their relaxed Extended JSON text: one text for one value,
        hashable whatever the BSON type (a document too). Windows of a collection record
        every key: Python does not order these texts as MongoDB orders the values."""
        return lambda v: None if v is None else relaxed(v)

    def key_event_value(self, column: Column) -> Callable[[Any], Any]:
        """An `_id`'s canonical form is already its event value (the key's relaxed text);
        encoding it again would name a key no staged row has."""
        return lambda v: v

    def staged_digest(self, table: TableId) -> str:
        """The collection's field rules: a window staged under others (changed mid-snapshot,
        to leave out a field that must not land, say) is read again, not released."""
        paths = self.field_rules.of_table(table) if self.field_rules is not None else ()
        return repr([p.as_tuple() for p in paths]) if paths else ""


__all__ = ["DOCUMENT", "ID", "IDENTITY", "DocumentShaper", "MongoTypeMapper", "collection_schema"]
