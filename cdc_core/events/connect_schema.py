"""Kafka Connect schemas in their JSON-converter form (`{"type": ..., "fields": [...]}`).

Debezium events optionally carry these (`schemas.enable`); consumers such as the Delta
merge use them to type columns. Connectors map their column types to these field
schemas; this module builds the structs around them (key, row value, envelope).
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def field(
    type_: str,
    name: str,
    optional: bool = True,
    logical: str | None = None,
    version: int | None = None,
    parameters: dict[str, str] | None = None,
    default: Any = None,
) -> Schema:
    """One field schema. `logical` is the semantic type name (e.g. `io.debezium.time.Date`)."""
    schema: Schema = {"type": type_, "optional": optional}
    if logical:
        schema["name"] = logical
    if version is not None:
        schema["version"] = version
    if parameters:
        schema["parameters"] = parameters
    if default is not None:
        schema["default"] = default
    schema["field"] = name
    return schema


def struct(
    name: str,
    fields: list[Schema],
    optional: bool = False,
    field_name: str | None = None,
    version: int | None = None,
) -> Schema:
    """A struct schema, its keys in the order Kafka's JsonConverter writes them."""
    schema: Schema = {"type": "struct", "fields": fields, "optional": optional, "name": name}
    if version is not None:
        schema["version"] = version
    if field_name:
        schema["field"] = field_name
    return schema


def transaction_block_schema(ordered: bool = True, standalone: bool = False) -> Schema:
    """The `transaction` block: Debezium's fields plus the ordered-metadata pair.
    `standalone`: the source writes changes outside transactions (MongoDB), whose blocks
    carry the order with a null `id`."""
    fields = [
        field("string", "id", optional=standalone),
        field("int64", "total_order", optional=False),
        field("int64", "data_collection_order", optional=False),
    ]
    if ordered:
        fields += [
            field("int64", "transaction_epoch", optional=False),
            field("int64", "transaction_rank", optional=False),
        ]
    return struct("event.block", fields, optional=True, field_name="transaction", version=1)


def envelope_schema(topic: str, row: Schema, source: Schema, ordered: bool = True) -> Schema:
    """`<topic>.Envelope`: before/after rows, source, transaction, op and timestamps."""
    before = {**row, "optional": True, "field": "before"}
    after = {**row, "optional": True, "field": "after"}
    return struct(
        f"{topic}.Envelope",
        [
            before,
            after,
            source,
            transaction_block_schema(ordered),
            field("string", "op", optional=False),
            field("int64", "ts_ms"),
            field("int64", "ts_us"),
            field("int64", "ts_ns"),
        ],
        version=2,
    )


def row_schema(topic: str, fields: list[Schema]) -> Schema:
    return struct(f"{topic}.Value", fields, optional=True)


def key_schema(topic: str, fields: list[Schema]) -> Schema:
    return struct(f"{topic}.Key", fields, optional=False)
