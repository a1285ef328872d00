"""A change event's documents read from their BSON (`bson_text.py`), as the MongoDB Java
driver reads them in Debezium: `fullDocument`, `fullDocumentBeforeChange`, the `_id` of
`documentKey`, `updateDescription`. pymongo decodes only the event's own fields
(`ENVELOPE`), with options of the connector's own whatever the connection string asks
(its `datetime_conversion`, its `unicode_decode_error_handler`): it never decodes a
document, so a value it cannot hold (a date past year 9999, a Symbol) never stops the
stream. What cannot be read raises `MalformedBson`, which `events.py` hands to
event.processing.failure.handling.mode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson.codec_options import CodecOptions, DatetimeConversion
from bson.raw_bson import RawBSONDocument

from cdc_core.connectors.mongodb.bson_text import (
    RELAXED,
    MalformedBson,
    RawValue,
    document_text,
    elements,
    value_of,
)
from cdc_core.connectors.mongodb.field_rules import (
    FieldPath,
    apply_to_change,
    apply_to_document,
    apply_to_name,
)

# How an event's own fields are decoded: its documents stay BSON (`RawBSONDocument`), a
# date of any year reads (DatetimeMS past pymongo's range), whatever the connection asks.
ENVELOPE: CodecOptions[RawBSONDocument] = CodecOptions(
    document_class=RawBSONDocument,
    tz_aware=True,
    datetime_conversion=DatetimeConversion.DATETIME_AUTO,
    unicode_decode_error_handler="replace",
)


def envelope(raw: bytes | memoryview) -> RawBSONDocument:
    """A raw change event (any buffer) as `feed` reads it."""
    return RawBSONDocument(raw if type(raw) is bytes else bytes(raw), ENVELOPE)


def document(value: Any) -> RawValue | None:
    """A document of the event as its BSON (anything else, null included: none)."""
    return RawValue(0x03, bytes(value.raw)) if isinstance(value, RawBSONDocument) else None


def key_of(document_key: Any, full: RawValue | None) -> RawValue | None:
    """The document's `_id` (null too: a collection may hold one document whose `_id` is
    null): from `documentKey`, else from the document."""
    found = value_of(bytes(document_key.raw), "_id") if isinstance(document_key, RawBSONDocument) else None
    if found is None and full is not None:
        found = value_of(full.data, "_id")
    return found


def readable_key(event: Mapping[str, Any]) -> str | None:
    """The `_id` of a change that cannot be read, for its message, when it can be."""
    try:
        key = key_of(event.get("documentKey"), None)
        return None if key is None else key.text(RELAXED)
    except Exception:  # whatever keeps it from being read: the message says so
        return None


def update_description(described: bytes, paths: tuple[FieldPath, ...] = ()) -> dict[str, Any]:
    """`updateDescription` as the record holds it: removed fields (null when none),
    updated fields as relaxed text with `, ` between members, truncated arrays; the
    collection's field.exclude.list / field.renames rules (`paths`) applied."""
    parts = dict(elements(described))
    names = []
    for item in _items(parts.get("removedFields")):
        name = apply_to_name(_member(item, 0x02, "removedFields").string(), paths)
        if name is not None:
            names.append(name)
    sizes = []
    for item in _items(parts.get("truncatedArrays")):
        member = dict(elements(_member(item, 0x03, "truncatedArrays").data))
        size = member.get("newSize")
        if size is None or size.kind not in (0x10, 0x12):
            raise MalformedBson("truncatedArrays holds a member without its size")
        name = apply_to_name(_member(member.get("field"), 0x02, "truncatedArrays").string(), paths)
        if name is not None:
            sizes.append({"field": name, "size": size.integer()})
    updated = parts.get("updatedFields")
    if updated is None or updated.kind == 0x0A:
        text = "{}"
    else:
        data = _member(updated, 0x03, "updatedFields").data
        text = document_text(apply_to_change(data, paths) if paths else data, RELAXED, ", ")
    return {"removedFields": names or None, "updatedFields": text, "truncatedArrays": sizes or None}


def shaped(document: RawValue | None, paths: tuple[FieldPath, ...]) -> RawValue | None:
    """A document with the collection's field rules applied (itself when none)."""
    if document is None or not paths:
        return document
    return RawValue(0x03, apply_to_document(document.data, paths))


def _items(value: RawValue | None) -> list[RawValue]:
    if value is None or value.kind == 0x0A:
        return []
    return [item for _, item in elements(_member(value, 0x04, "updateDescription").data)]


def _member(value: RawValue | None, kind: int, where: str) -> RawValue:
    if value is None or value.kind != kind:
        raise MalformedBson(f"{where} holds a value of an unexpected type")
    return value
