"""Spatial columns → Debezium's geometry structs.

MySQL and MariaDB store a spatial value as its SRID (four little-endian bytes) followed
by its WKB. Debezium writes a POINT column as `io.debezium.data.geometry.Point` (its
coordinates plus the WKB, so a consumer needs no WKB parser for the commonest case) and
every other spatial type as `io.debezium.data.geometry.Geometry` (WKB and SRID).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

from cdc_core.events.connect_schema import Schema
from cdc_core.schema.model import Column

GEOMETRY_TYPES = {
    "GEOMETRY",
    "POINT",
    "LINESTRING",
    "POLYGON",
    "MULTIPOINT",
    "MULTILINESTRING",
    "MULTIPOLYGON",
    "GEOMETRYCOLLECTION",
}

_SRID = {"type": "int32", "optional": True, "field": "srid"}


def geometry_mapping(column: Column, optional: bool) -> tuple[Schema, Callable[[Any], Any]]:
    """The field schema and converter of a spatial column (POINT is Debezium's Point)."""
    point = column.type_name.upper() == "POINT"
    if point:
        fields = [
            {"type": "double", "optional": False, "field": "x"},
            {"type": "double", "optional": False, "field": "y"},
            {"type": "bytes", "optional": True, "field": "wkb"},
            _SRID,
        ]
    else:
        fields = [{"type": "bytes", "optional": False, "field": "wkb"}, _SRID]
    schema = {
        "type": "struct",
        "fields": fields,
        "optional": optional,
        "name": f"io.debezium.data.geometry.{'Point' if point else 'Geometry'}",
        "version": 1,
        "doc": "Geometry (POINT)" if point else "Geometry",
        "field": column.name,
    }

    def convert(v: Any) -> dict[str, Any]:
        raw = v.encode("utf-8", errors="surrogateescape") if isinstance(v, str) else bytes(v)
        srid = int.from_bytes(raw[:4], "little") or None
        wkb = raw[4:]
        value = {"wkb": base64.b64encode(wkb).decode(), "srid": srid}
        if point:
            x, y = _coordinates(wkb)
            value = {"x": x, "y": y, **value}
        return value

    return schema, convert


def _coordinates(wkb: bytes) -> tuple[float, float]:
    """A WKB point's x and y (its first byte says the byte order)."""
    order = "<" if wkb[0] == 1 else ">"
    return struct.unpack_from(f"{order}dd", wkb, 5)
