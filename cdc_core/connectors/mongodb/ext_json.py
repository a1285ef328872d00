"""BSON values as the MongoDB Java driver writes them in Debezium's MongoDB records.

Debezium's MongoDB connector writes three texts, each in a mode of the Java driver's
JSON writer (research in README "MongoDB"):

- the key's `id`: Extended JSON *relaxed*, compact (`": "` after a name, `,` between
  members): `1004`, `"abc"` (quoted), `{"$oid": "..."}`;
- `after`/`before`: Extended JSON v1 *strict* in the same compact layout:
  `{"_id": {"$oid": "..."},"n": {"$numberLong": "123"},"at": {"$date": 1783078553473}}`;
- `updateDescription.updatedFields`: *relaxed*, with `, ` between members.

pymongo's json_util writes none of these byte for byte (its legacy mode writes int64 as
a bare number), so the texts are written here: documents and values still in their BSON
(`RawValue`, `RawBSONDocument`, what change events and snapshot reads hold) by
`bson_text.py`, as the Java driver reads them; values pymongo decoded (a signal's data,
a test's documents) from those values, the same way where pymongo keeps what the Java
driver keeps.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import uuid
from collections.abc import Mapping
from typing import Any

import orjson
from bson import Binary, Code, DBRef, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS
from bson.raw_bson import RawBSONDocument

from cdc_core.connectors.mongodb.bson_text import RawValue, document_text
from cdc_core.connectors.mongodb.java_bson import decimal128_text, regex_options
from cdc_core.events.java_text import java_double

STRICT, RELAXED = "strict", "relaxed"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH, _MS = EPOCH.replace(tzinfo=None), dt.timedelta(milliseconds=1)


def strict(document: Mapping[str, Any]) -> str:
    """`after`/`before`: Extended JSON v1 strict, compact."""
    return _text(document, STRICT, ",")


def relaxed(value: Any, separator: str = ",") -> str:
    """The key's `id` (compact) or, with `separator=", "`, `updatedFields`."""
    return _text(value, RELAXED, separator)


def _string(text: str) -> str:
    return orjson.dumps(text).decode()


_NAMES: dict[str, str] = {}  # field name → its JSON text: documents repeat their names


def _name(key: str) -> str:
    text = _NAMES.get(key)
    if text is None:
        if len(_NAMES) >= 65536:
            _NAMES.clear()
        text = _NAMES[key] = orjson.dumps(key).decode()
    return text


def _text(value: Any, mode: str, sep: str) -> str:
    """The types most documents are made of, by exact type and without a generator (every
    document of every event passes here: a third of the encoding's time); anything else
    goes the general way."""
    kind = type(value)
    if kind is str:
        return orjson.dumps(value).decode()
    if kind is dict:
        return "{" + sep.join([f"{_name(k)}: {_text(v, mode, sep)}" for k, v in value.items()]) + "}"
    if kind is int and -2147483648 <= value <= 2147483647:
        return str(value)
    if kind is list:
        return "[" + sep.join([_text(v, mode, sep) for v in value]) + "]"
    if kind is float:
        return _double(value, mode)
    return _value(value, mode, sep)


def millis_of(value: dt.datetime | DatetimeMS) -> int:
    """A naive datetime is UTC, as pymongo decodes BSON dates; a DatetimeMS (a date
    outside pymongo's years 1-9999) is its count. Whole timedelta division: exact, and
    every event's `wallTime` passes here (a sixth of the time it took with a float
    division of an aware copy)."""
    if type(value) is DatetimeMS:
        return int(value)
    return (value - (_NAIVE_EPOCH if value.tzinfo is None else EPOCH)) // _MS


def _iso(millis: int) -> str:
    """Java's ISO_OFFSET_DATE_TIME in UTC: no fraction when it is 0, else its digits
    without trailing zeros (`.47`, `.729`)."""
    moment = EPOCH + dt.timedelta(milliseconds=millis)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = millis % 1000
    if fraction:
        text += "." + f"{fraction:03d}".rstrip("0")
    return text + "Z"


def _double(x: float, mode: str) -> str:
    if math.isnan(x) or math.isinf(x):
        name = "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
        return name if mode == STRICT else f'{{"$numberDouble": "{name}"}}'
    return java_double(x)


def _value(value: Any, mode: str, sep: str) -> str:
    if type(value) is RawValue:
        return value.text(mode, sep)
    if isinstance(value, RawBSONDocument):
        return document_text(value.raw, mode, sep)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Int64):
        return f'{{"$numberLong": "{int(value)}"}}' if mode == STRICT else str(int(value))
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return str(value)
        return f'{{"$numberLong": "{value}"}}' if mode == STRICT else str(value)
    if isinstance(value, float):
        return _double(value, mode)
    if isinstance(value, Code):  # (a str: before the str case, or it loses its type)
        scope = "" if value.scope is None else f'{sep}"$scope": {_text(value.scope, mode, sep)}'
        return f'{{"$code": {_string(str(value))}{scope}}}'
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        return "{" + sep.join([f"{_string(str(k))}: {_text(v, mode, sep)}" for k, v in value.items()]) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + sep.join([_text(v, mode, sep) for v in value]) + "]"
    if isinstance(value, ObjectId):
        return f'{{"$oid": "{value}"}}'
    if isinstance(value, Decimal128):
        return f'{{"$numberDecimal": "{decimal128_text(value.bid)}"}}'
    if isinstance(value, (dt.datetime, DatetimeMS)):
        millis = millis_of(value)
        if mode == STRICT:
            return f'{{"$date": {millis}}}'
        if 0 <= millis < 253402300800000:  # years 1970-9999: ISO text, else the count
            return f'{{"$date": "{_iso(millis)}"}}'
        return f'{{"$date": {{"$numberLong": "{millis}"}}}}'
    if isinstance(value, uuid.UUID):
        value = Binary.from_uuid(value)
    if isinstance(value, (Binary, bytes)):
        subtype = value.subtype if isinstance(value, Binary) else 0
        data = base64.b64encode(bytes(value)).decode()
        if mode == STRICT:
            return f'{{"$binary": "{data}"{sep}"$type": "{subtype:02X}"}}'
        return f'{{"$binary": {{"base64": "{data}"{sep}"subType": "{subtype:02X}"}}}}'
    if isinstance(value, Timestamp):
        return f'{{"$timestamp": {{"t": {value.time}{sep}"i": {value.inc}}}}}'
    if isinstance(value, (Regex, re.Pattern)):
        pattern, flags = value.pattern, value.flags  # re's flag bits, as BSON's Regex keeps them
        bits = (("i", 2), ("l", 4), ("m", 8), ("s", 16), ("u", 32), ("x", 64))
        options = regex_options(
            flags if isinstance(flags, str) else "".join(c for c, bit in bits if flags & bit)
        )
        if mode == STRICT:
            return f'{{"$regex": {_string(pattern)}{sep}"$options": "{options}"}}'
        return f'{{"$regularExpression": {{"pattern": {_string(pattern)}{sep}"options": "{options}"}}}}'
    if isinstance(value, MinKey):
        return '{"$minKey": 1}'
    if isinstance(value, MaxKey):
        return '{"$maxKey": 1}'
    if isinstance(value, DBRef):
        return _text(value.as_doc(), mode, sep)
    raise TypeError(f"a BSON value of type {type(value).__name__} has no Extended JSON form here")
