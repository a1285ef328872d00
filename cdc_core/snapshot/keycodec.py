"""Key values in JSON, exactly: watermark rows and offsets carry chunk boundaries, and a
boundary read back must compare equal to the value the database returned (an int stays an
int, a DECIMAL a Decimal, a DATETIME a datetime, bytes bytes, a BSON value the same BSON
value)."""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal
from typing import Any

from cdc_core.errors import TidemarkError


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
    raise TidemarkError(f"unknown encoded key value {v!r}")


def _bson(v: Any) -> str:
    """A BSON value, exactly: as a one-field document's bytes (base64)."""
    import bson

    return base64.b64encode(bson.encode({"v": v})).decode()


def encode_key(key: tuple[Any, ...] | None) -> list[Any] | None:
    return None if key is None else [encode_value(v) for v in key]


def decode_key(data: list[Any] | None) -> tuple[Any, ...] | None:
    return None if data is None else tuple(decode_value(v) for v in data)
