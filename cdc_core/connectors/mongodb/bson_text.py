"""BSON values written as Extended JSON from their bytes, as Debezium's records hold them:
the MongoDB Java driver decodes each document into a `BsonDocument` and writes it with
its `JsonWriter` (layouts and modes: `ext_json.py`).

The Python path reads documents here rather than through pymongo, which cannot hold
every value MongoDB stores as the Java driver does: a date past year 9999 raises (or
needs the connection's `datetime_conversion`), a Symbol decodes as a str and Undefined as
None, a DBPointer as a DBRef, a document holding `$ref` becomes a DBRef with its members
reordered, text that is not UTF-8 raises. What the Java driver does instead:

- every type has its text (JsonWriter, JsonMode STRICT and RELAXED, driver 5.6): Symbol
  `{"$symbol": ...}`, Undefined `{"$undefined": true}`, DBPointer `{"$ref": ns, "$id":
  {"$oid": ...}}`, Code with scope `{"$code": ..., "$scope": {...}}`, Decimal128 as
  `Decimal128.toString`, binary subtypes in two upper-case hex digits, the old binary
  subtype 2 without its inner length, regular expression options sorted, any date;
- a name repeated in one document keeps its first place and its last value
  (`BsonDocument` is a `LinkedHashMap`); array members are taken in order, names ignored;
- strings and names that are not UTF-8 are decoded as the JDK does (`java_bson.py`);
- anything else (an unknown type byte, a length that does not add up, a boolean byte not
  0 or 1, an old binary whose two lengths differ) is malformed: `MalformedBson`, which
  names what is wrong and never the document's contents.

The compiled transcoder (`transcoder/src/`) reads and writes documents the same way;
`tests/unit/test_mongodb_transcoder.py` holds the two to the same bytes.
"""

from __future__ import annotations

import base64
import struct

import orjson

from cdc_core.connectors.mongodb.java_bson import decimal128_text, regex_options, text_of
from cdc_core.events.java_text import java_double
from cdc_core.snapshot.keycodec import register_exact

STRICT, RELAXED = "strict", "relaxed"

_INT32 = struct.Struct("<i").unpack_from
_INT64 = struct.Struct("<q").unpack_from
_DOUBLE = struct.Struct("<d").unpack_from
_UINT32_PAIR = struct.Struct("<II").unpack_from
_LAST_MS_OF_9999 = 253402300799999


class MalformedBson(ValueError):
    """Bytes that are not a BSON value the Java driver reads (it would throw too)."""


_NAMES: dict[bytes, tuple[str, str]] = {}  # a name's bytes → (its text, `"text": `)


def _name(raw: bytes) -> tuple[str, str]:
    found = _NAMES.get(raw)
    if found is None:
        if len(_NAMES) >= 65536:
            _NAMES.clear()
        text = text_of(raw)
        found = _NAMES[raw] = (text, orjson.dumps(text).decode() + ": ")
    return found


def _string(data: bytes, p: int, end: int) -> tuple[str, int]:
    """A BSON string at `p`: its JSON text and where it ends."""
    size = _INT32(data, p)[0] if p + 4 <= end else 0
    stop = p + 4 + size
    if size <= 0 or stop > end or data[stop - 1] != 0:
        raise MalformedBson("a string whose length does not fit its bytes")
    return orjson.dumps(text_of(data[p + 4 : stop - 1])).decode(), stop


def _cstring(data: bytes, p: int, end: int) -> tuple[bytes, int]:
    stop = data.find(0, p, end)
    if stop < 0:
        raise MalformedBson("a name or pattern without its terminating zero")
    return data[p:stop], stop + 1


def _size(data: bytes, p: int, end: int, least: int) -> int:
    if p + 4 > end:
        raise MalformedBson("a value cut short")
    size = _INT32(data, p)[0]
    if size < least or p + size > end:
        raise MalformedBson("a length that does not fit its document")
    return size


def _iso(millis: int) -> str:
    """Java's ISO_OFFSET_DATE_TIME in UTC (years 1970-9999 here): no fraction when it is
    0, else its digits without trailing zeros."""
    days, in_day = divmod(millis, 86_400_000)
    # Howard Hinnant's civil_from_days, as the transcoder has it.
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    secs, fraction = divmod(in_day, 1000)
    text = f"{year:04d}-{month:02d}-{day:02d}T{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}"
    if fraction:
        text += "." + f"{fraction:03d}".rstrip("0")
    return text + "Z"


def _double(x: float, strict: bool) -> str:
    if x != x or x in (float("inf"), float("-inf")):
        name = "NaN" if x != x else ("Infinity" if x > 0 else "-Infinity")
        return name if strict else f'{{"$numberDouble": "{name}"}}'
    return java_double(x)


def _document(data: bytes, p: int, end: int, strict: bool, sep: str, array: bool = False) -> tuple[str, int]:
    """The document (or array) at `p`, no further than `end`: its text and where it ends."""
    size = _size(data, p, end, 5)
    stop = p + size - 1  # its terminating zero
    if data[stop] != 0:
        raise MalformedBson("a document without its terminating zero")
    parts: list[str] = []
    places: dict[str, int] | None = None if array else {}
    at = p + 4
    while at < stop:
        kind = data[at]
        named = at + 1
        nul = data.find(0, named, stop)
        if nul < 0:
            raise MalformedBson("a name without its terminating zero")
        at = nul + 1
        # The types documents are mostly made of first, without a call.
        if kind == 0x02:
            text, at = _string(data, at, stop)
        elif kind == 0x10:
            if at + 4 > stop:
                raise MalformedBson("a value cut short")
            text = str(_INT32(data, at)[0])
            at += 4
        elif kind == 0x01:
            if at + 8 > stop:
                raise MalformedBson("a value cut short")
            text = _double(_DOUBLE(data, at)[0], strict)
            at += 8
        elif kind == 0x03 or kind == 0x04:
            text, at = _document(data, at, stop, strict, sep, kind == 0x04)
        else:
            text, at = _value(data, kind, at, stop, strict, sep)
        if places is None:
            parts.append(text)
            continue
        found = _NAMES.get(data[named:nul])
        name, prefix = found if found is not None else _name(data[named:nul])
        place = places.get(name)
        if place is None:
            places[name] = len(parts)
            parts.append(prefix + text)
        else:  # a repeated name: its first place, its last value
            parts[place] = prefix + text
    if at != stop:
        raise MalformedBson("a member running past its document's end")
    body = sep.join(parts)
    return ("[" + body + "]" if array else "{" + body + "}"), stop + 1


def _value(data: bytes, kind: int, p: int, end: int, strict: bool, sep: str) -> tuple[str, int]:
    """Any value at `p` of type `kind`: its text and where it ends."""
    if kind == 0x02:
        return _string(data, p, end)
    if kind == 0x03 or kind == 0x04:
        return _document(data, p, end, strict, sep, kind == 0x04)
    fixed = _FIXED.get(kind)
    if fixed is not None and p + fixed > end:
        raise MalformedBson("a value cut short")
    if kind == 0x10:
        return str(_INT32(data, p)[0]), p + 4
    if kind == 0x01:
        return _double(_DOUBLE(data, p)[0], strict), p + 8
    if kind == 0x12:
        n = _INT64(data, p)[0]
        return (f'{{"$numberLong": "{n}"}}' if strict else str(n)), p + 8
    if kind == 0x09:
        millis = _INT64(data, p)[0]
        if strict:
            return f'{{"$date": {millis}}}', p + 8
        if 0 <= millis <= _LAST_MS_OF_9999:
            return f'{{"$date": "{_iso(millis)}"}}', p + 8
        return f'{{"$date": {{"$numberLong": "{millis}"}}}}', p + 8
    if kind == 0x07:
        return f'{{"$oid": "{data[p : p + 12].hex()}"}}', p + 12
    if kind == 0x08:
        flag = data[p]
        if flag > 1:
            raise MalformedBson("a boolean that is neither 0 nor 1")
        return ("true" if flag else "false"), p + 1
    if kind == 0x0A:
        return "null", p
    if kind == 0x05:
        return _binary(data, p, end, strict, sep)
    if kind == 0x13:
        return f'{{"$numberDecimal": "{decimal128_text(data[p : p + 16])}"}}', p + 16
    if kind == 0x11:
        inc, seconds = _UINT32_PAIR(data, p)
        return f'{{"$timestamp": {{"t": {seconds}{sep}"i": {inc}}}}}', p + 8
    if kind == 0x0B:
        pattern, p = _cstring(data, p, end)
        options, p = _cstring(data, p, end)
        pattern_text = orjson.dumps(text_of(pattern)).decode()
        options_text = orjson.dumps(regex_options(text_of(options))).decode()
        if strict:
            return f'{{"$regex": {pattern_text}{sep}"$options": {options_text}}}', p
        return f'{{"$regularExpression": {{"pattern": {pattern_text}{sep}"options": {options_text}}}}}', p
    if kind == 0x0D:
        code, p = _string(data, p, end)
        return f'{{"$code": {code}}}', p
    if kind == 0x0E:
        symbol, p = _string(data, p, end)
        return f'{{"$symbol": {symbol}}}', p
    if kind == 0x0F:
        size = _size(data, p, end, 14)
        code, at = _string(data, p + 4, p + size)
        scope, at = _document(data, at, p + size, strict, sep)
        if at != p + size:
            raise MalformedBson("code with scope whose length does not add up")
        return f'{{"$code": {code}{sep}"$scope": {scope}}}', at
    if kind == 0x0C:
        namespace, p = _string(data, p, end)
        if p + 12 > end:
            raise MalformedBson("a value cut short")
        return f'{{"$ref": {namespace}{sep}"$id": {{"$oid": "{data[p : p + 12].hex()}"}}}}', p + 12
    if kind == 0x06:
        return '{"$undefined": true}', p
    if kind == 0xFF:
        return '{"$minKey": 1}', p
    if kind == 0x7F:
        return '{"$maxKey": 1}', p
    raise MalformedBson(f"an unknown BSON type 0x{kind:02x}")


_FIXED = {0x10: 4, 0x01: 8, 0x12: 8, 0x09: 8, 0x07: 12, 0x08: 1, 0x13: 16, 0x11: 8}


def _binary(data: bytes, p: int, end: int, strict: bool, sep: str) -> tuple[str, int]:
    if p + 5 > end:
        raise MalformedBson("a value cut short")
    size = _INT32(data, p)[0]
    subtype = data[p + 4]
    start, stop = p + 5, p + 5 + size
    if size < 0 or stop > end:
        raise MalformedBson("a binary whose length does not fit its bytes")
    if subtype == 2:  # the old binary: its length again, which the Java driver strips
        if size < 4 or _INT32(data, start)[0] != size - 4:
            raise MalformedBson("an old binary (subtype 2) whose two lengths differ")
        start += 4
    encoded = base64.b64encode(data[start:stop]).decode()
    if strict:
        return f'{{"$binary": "{encoded}"{sep}"$type": "{subtype:02X}"}}', stop
    return f'{{"$binary": {{"base64": "{encoded}"{sep}"subType": "{subtype:02X}"}}}}', stop


# ---------------------------------------------------------------------------- entry points


def document_text(raw: bytes | memoryview, mode: str, sep: str = ",") -> str:
    """A whole document (its bytes, length first) in `mode` with `sep` between members."""
    data = raw if type(raw) is bytes else bytes(raw)
    text, end = _document(data, 0, len(data), mode == STRICT, sep)
    if end != len(data):
        raise MalformedBson("bytes after the document's end")
    return text


class RawValue:
    """One BSON value as its bytes (`kind`: its type byte), written in either mode when
    asked, each text once. Values compare by their bytes."""

    __slots__ = ("_texts", "data", "kind")

    def __init__(self, kind: int, data: bytes) -> None:
        self.kind = kind
        self.data = data
        self._texts: dict[tuple[str, str], str] = {}

    def text(self, mode: str, sep: str = ",") -> str:
        found = self._texts.get((mode, sep))
        if found is None:
            found, end = _value(self.data, self.kind, 0, len(self.data), mode == STRICT, sep)
            if end != len(self.data):
                raise MalformedBson("bytes after the value's end")
            self._texts[(mode, sep)] = found
        return found

    def string(self) -> str:
        """A string's text, as the Java driver decodes it."""
        if self.kind != 0x02:
            raise MalformedBson("a value that is not a string")
        size = _INT32(self.data, 0)[0]
        return text_of(self.data[4 : 3 + size])

    def integer(self) -> int:
        """An int32's or int64's value."""
        if self.kind == 0x10:
            return int(_INT32(self.data, 0)[0])
        if self.kind == 0x12:
            return int(_INT64(self.data, 0)[0])
        raise MalformedBson("a value that is not an integer")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawValue) and (self.kind, self.data) == (other.kind, other.data)

    def __hash__(self) -> int:
        return hash((self.kind, self.data))

    def __repr__(self) -> str:
        return f"RawValue(0x{self.kind:02x}, {len(self.data)} bytes)"

    def exact_text(self) -> str:
        """The value as its type byte and bytes, base64: how snapshot state keeps it."""
        return base64.b64encode(bytes([self.kind]) + self.data).decode()

    @classmethod
    def from_exact_text(cls, text: str) -> RawValue:
        data = base64.b64decode(text)
        return cls(data[0], data[1:])


# A released window's rows are kept in snapshot state (keycodec), values and all.
register_exact("bsonvalue", RawValue, RawValue.exact_text, RawValue.from_exact_text)


def document_value(raw: bytes | memoryview) -> RawValue:
    return RawValue(0x03, raw if type(raw) is bytes else bytes(raw))


def elements(raw: bytes | memoryview) -> list[tuple[str, RawValue]]:
    """The members of a document or array in stored order, each name as the Java driver
    reads it and each value as its bytes (checked as far as their lengths go); a
    repeated name comes twice (`dict(...)` keeps its first place and last value, as the
    Java driver does)."""
    data = raw if type(raw) is bytes else bytes(raw)
    stop = _size(data, 0, len(data), 5) - 1
    if stop != len(data) - 1 or data[stop] != 0:
        raise MalformedBson("a document whose length does not fit its bytes")
    out = []
    at = 4
    while at < stop:
        kind = data[at]
        named = at + 1
        nul = data.find(0, named, stop)
        if nul < 0:
            raise MalformedBson("a name without its terminating zero")
        start = nul + 1
        end = _end_of(data, kind, start, stop)
        out.append((_name(data[named:nul])[0], RawValue(kind, data[start:end])))
        at = end
    return out


def value_of(raw: bytes | memoryview, wanted: str) -> RawValue | None:
    """The value of one top-level member of a document (the last of a repeated name, as
    the Java driver keeps it), or None when it has none."""
    found = None
    for name, value in elements(raw):
        if name == wanted:
            found = value
    return found


def _end_of(data: bytes, kind: int, p: int, end: int) -> int:
    """Where the value at `p` ends (checked as far as its length goes)."""
    fixed = _FIXED.get(kind)
    if fixed is not None:
        if p + fixed > end:
            raise MalformedBson("a value cut short")
        return p + fixed
    if kind in (0x02, 0x0D, 0x0E):
        return _string(data, p, end)[1]
    if kind in (0x03, 0x04, 0x0F):
        return p + _size(data, p, end, 5)
    if kind == 0x05:
        return _binary(data, p, end, True, ",")[1]
    if kind == 0x0B:
        return _cstring(data, _cstring(data, p, end)[1], end)[1]
    if kind == 0x0C:
        after = _string(data, p, end)[1] + 12
        if after > end:
            raise MalformedBson("a value cut short")
        return after
    if kind in (0x0A, 0x06, 0xFF, 0x7F):
        return p
    raise MalformedBson(f"an unknown BSON type 0x{kind:02x}")
