"""A document's `_id` as its Delta table holds it: in the form its `document` is written.

The record key (Debezium's) writes the `_id` in relaxed Extended JSON; `before`/`after`,
and so the landed `document`, in strict Extended JSON (`ext_json.py`). A reader looking a
row up by `_id`, or comparing it with the document's own `_id`, needs one form, so the
merge lands the key's text rewritten in strict form. It is a function of the key's text
alone, not of a document: a delete without pre-images has no document, and every event
of one MongoDB document must land under one `_id`.

Relaxed text keeps every type strict text tells apart but one: an int64 that fits 32
bits is written as the int32 would be. It lands as the int32's text (`5`, where its
document says `{"$numberLong": "5"}`). MongoDB's own keys do not tell them apart either:
`5` and `NumberLong(5)` are one `_id` to a unique index and to a query.

The JSON is read with number lexemes kept (a double's digits are never re-written) and
members in order and written in the compact layout of `ext_json.py` (`": "` after a
name, `,` between members), strings escaped as orjson escapes them, as every text of the
records is.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# Key texts whose landed form is the text itself, so the merge rewrites no other: a JSON
# string, an integer of at most nine digits, an ObjectId (the `_id` of most collections).
PLAIN = r'^(?:"(?:[^"\\]|\\.)*"|-?[0-9]{1,9}|\{"\$oid": "[0-9a-f]{24}"\})$'

_INT32 = range(-(2**31), 2**31)
_NON_FINITE = {"NaN", "Infinity", "-Infinity"}


class _Number(str):
    """A number's lexeme as the text had it."""


class _Members(list):
    """A JSON object's members, in order (an array is a plain list)."""


def landed_id(key_text: str | None) -> str | None:
    """The key's relaxed Extended JSON text of an `_id` as strict Extended JSON text."""
    if key_text is None:
        return None
    value = json.loads(
        key_text,
        object_pairs_hook=_Members,
        parse_int=_Number,
        parse_float=_Number,
        parse_constant=_Number,
    )
    return _strict(value)


def _strict(value: Any) -> str:
    if isinstance(value, _Number):
        return _integer(value) if value.lstrip("-").isdigit() else str(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, _Members):
        return _document(value)
    return "[" + ",".join(_strict(v) for v in value) + "]"


def _integer(lexeme: str) -> str:
    return lexeme if int(lexeme) in _INT32 else f'{{"$numberLong": "{lexeme}"}}'


def _document(members: _Members) -> str:
    if len(members) == 1:
        name, inner = members[0]
        wrapped = _wrapper(name, inner)
        if wrapped is not None:
            return wrapped
    return "{" + ",".join(f"{orjson.dumps(n).decode()}: {_strict(v)}" for n, v in members) + "}"


def _fields(inner: Any) -> dict[str, Any] | None:
    if isinstance(inner, _Members):
        return dict(inner)
    return None


def _wrapper(name: str, inner: Any) -> str | None:
    """The strict text of a relaxed type wrapper whose strict text differs; None for any
    other member (written as a document member, its value rewritten)."""
    fields = _fields(inner)
    if name == "$date":
        if isinstance(inner, str):
            return f'{{"$date": {_millis(inner)}}}'
        if fields is not None and set(fields) == {"$numberLong"}:
            return f'{{"$date": {int(fields["$numberLong"])}}}'
    elif name == "$numberDouble" and isinstance(inner, str) and inner in _NON_FINITE:
        return inner
    elif name == "$binary" and fields is not None and set(fields) == {"base64", "subType"}:
        data, kind = orjson.dumps(fields["base64"]).decode(), orjson.dumps(fields["subType"]).decode()
        return f'{{"$binary": {data},"$type": {kind}}}'
    elif name == "$regularExpression" and fields is not None and set(fields) == {"pattern", "options"}:
        pattern, options = orjson.dumps(fields["pattern"]).decode(), orjson.dumps(fields["options"]).decode()
        return f'{{"$regex": {pattern},"$options": {options}}}'
    elif name == "$dbPointer" and fields is not None and set(fields) == {"$ref", "$id"}:
        return "{" + f'"$ref": {_strict(fields["$ref"])},"$id": {_strict(fields["$id"])}' + "}"
    elif name in ("$timestamp", "$numberDecimal", "$oid", "$minKey", "$maxKey", "$symbol", "$undefined"):
        # The same text in both modes; a timestamp's unsigned 32-bit parts are no int64s.
        return "{" + f"{orjson.dumps(name).decode()}: {_verbatim(inner)}" + "}"
    return None


def _verbatim(value: Any) -> str:
    """A value written back as it was read (numbers as their lexemes)."""
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, _Members):
        return "{" + ",".join(f"{orjson.dumps(n).decode()}: {_verbatim(v)}" for n, v in value) + "}"
    return _strict(value)


def _millis(iso: str) -> int:
    """Milliseconds since the epoch of Java's ISO_OFFSET_DATE_TIME in UTC as relaxed
    Extended JSON writes a date of years 1970 to 9999 (`2025-06-30T23:59:59.25Z`)."""
    import datetime as dt

    text = iso.removesuffix("Z")
    whole, _, fraction = text.partition(".")
    moment = dt.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (moment - epoch) // dt.timedelta(milliseconds=1) + int((fraction or "0").ljust(3, "0")[:3])
