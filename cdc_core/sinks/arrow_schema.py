"""Kafka Connect schemas as the Arrow types the binary event log stores values in.

Values keep Debezium's wire form (days, epoch micros, base64 bytes and decimals), so the
log holds exactly the records the JSON converter writes and one Delta conversion serves
both. Connect's `float` is stored as a double: some sources hand over a decimal text
(`1.1`), and its JSON is that text, which a 32-bit float could not give back.

A row's own nested values (a geometry struct, an array column, any map) have no Arrow
type here: Delta keeps them as JSON text, and a record holding one goes to the log as
JSON (`json_kind`), so no value is ever coerced.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

_PRIMITIVE: dict[str, pa.DataType] = {
    "int8": pa.int8(),
    "int16": pa.int16(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float": pa.float64(),
    "float32": pa.float64(),
    "double": pa.float64(),
    "float64": pa.float64(),
    "boolean": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.string(),  # base64, as in JSON
}
ROW_FIELDS = ("before", "after")


class Untyped(Exception):
    """The schema has a part the log stores as JSON text instead."""


def arrow_type(schema: dict[str, Any], row: bool = False) -> pa.DataType:
    """The Arrow type of a Connect schema; `row`: the schema is a row column's."""
    kind = schema.get("type")
    if kind in _PRIMITIVE:
        return _PRIMITIVE[kind]
    if row:
        raise Untyped(f"row column {schema.get('field')!r} of type {kind}")
    if kind == "struct":
        return _struct(
            [
                pa.field(
                    part["field"],
                    row_type(part)
                    if part.get("field") in ROW_FIELDS and part.get("type") == "struct"
                    else arrow_type(part),
                )
                for part in schema.get("fields", [])
            ]
        )
    if kind == "array" and isinstance(schema.get("items"), dict):
        return pa.list_(arrow_type(schema["items"]))
    raise Untyped(f"{kind} field {schema.get('field')!r}")


def row_type(schema: dict[str, Any]) -> pa.DataType:
    """A row (an envelope's before/after, or a record key): a struct of row columns."""
    if schema.get("type") != "struct":
        return arrow_type(schema, row=True)
    return _struct([pa.field(part["field"], arrow_type(part, row=True)) for part in schema["fields"]])


def _struct(fields: list[pa.Field]) -> pa.DataType:
    if not fields:  # Parquet has no struct without fields (a row whose columns are all excluded)
        raise Untyped("a struct without fields")
    return pa.struct(fields)
