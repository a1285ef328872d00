"""Key values in JSON, exactly: watermark rows and offsets carry chunk boundaries, and a
boundary read back must compare equal to the value the database returned (an int stays an
int, a DECIMAL a Decimal, a DATETIME a datetime, bytes bytes, a BSON value the same BSON
value). A source's own value type that no form here keeps exactly (a MongoDB value held
as its BSON bytes) registers a tag and how it is written and read back (`register_exact`).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cdc_core.errors import TidemarkError

# tag → (the type, how a value of it is written as text, how that text is read back)
_EXACT: dict[str, tuple[type, Callable[[Any], str], Callable[[str], Any]]] = {}


def register_exact(tag: str, kind: type, write: Callable[[Any], str], read: Callable[[str], Any]) -> None:
    """Values of `kind` travel as `{"$<tag>": write(value)}` and come back as `read(text)`:
    the connector that makes them registers them when its module is loaded, which is
    before any state holding them is read (the source opens first)."""
    _EXACT[tag] = (kind, write, read)


def exact_tag_of(v: Any) -> str | None:
    """The tag of a value of a registered type (`register_exact`), else None."""
    for tag, (kind, _, _) in _EXACT.items():
        if isinstance(v, kind):
            return tag
    return None


def exact_text(tag: str, v: Any) -> str:
    return _EXACT[tag][1](v)


def from_exact_text(tag: str, text: str) -> Any:
    entry = _EXACT.get(tag)
    if entry is None:
        raise TidemarkError(f"values tagged {tag!r} are not known here (their connector is not loaded)")
    return entry[2](text)


def encode_value(v: Any) -> Any:
    if v is None or (isinstance(v, (str, int, float)) and not isinstance(v, bool)):
        return v
    if isinstance(v, bool):
        return {"$bool": v}
    if isinstance(v, Decimal):
        return {"$dec": str(v)}
    if isinstance(v, dt.datetime):
        return {"$dt": v.isoformat()}
    if isinstance(v, dt.date):
        return {"$d": v.isoformat()}
    if isinstance(v, dt.timedelta):
        return {"$td": (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds}
    if type(v).__module__.startswith("bson.") or isinstance(v, (dict, list)):
        return {"$bson": _bson(v)}  # a document database's key (an ObjectId, a document, ...)
    if isinstance(v, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(v)).decode()}
    for tag, (kind, write, _) in _EXACT.items():
        if isinstance(v, kind):
            return {f"${tag}": write(v)}
    raise TidemarkError(f"cannot use a {type(v).__name__} value as a snapshot chunk boundary")


def decode_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    ((tag, raw),) = v.items()
    if tag == "$dec":
        return Decimal(raw)
    if tag == "$dt":
        return dt.datetime.fromisoformat(raw)
    if tag == "$d":
        return dt.date.fromisoformat(raw)
    if tag == "$td":
        return dt.timedelta(microseconds=raw)
    if tag == "$b":
        return base64.b64decode(raw)
    if tag == "$bool":
        return bool(raw)
    if tag == "$bson":
        import bson

        return bson.decode(base64.b64decode(raw))["v"]
    exact = _EXACT.get(tag[1:])
    if exact is not None:
        return exact[2](raw)
    raise TidemarkError(f"unknown encoded key value {v!r}")


def _bson(v: Any) -> str:
    """A BSON value, exactly: as a one-field document's bytes (base64)."""
    import bson

    return base64.b64encode(bson.encode({"v": v})).decode()


def encode_key(key: tuple[Any, ...] | None) -> list[Any] | None:
    return None if key is None else [encode_value(v) for v in key]


def decode_key(data: list[Any] | None) -> tuple[Any, ...] | None:
    return None if data is None else tuple(decode_value(v) for v in data)
