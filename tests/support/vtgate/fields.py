"""A table's FIELD event, as a Vitess tablet's schema engine describes it.

Each column becomes a `query.Field`: its Vitess type (the UNSIGNED flag picks UINT*,
binary strings the BINARY/VARBINARY/BLOB types), MySQL's column flags plus Vitess's
NUM_FLAG for numbers, the length in bytes, the collation id, the decimals, and
`column_type` from information_schema, all read from the shard's own server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_core.connectors.vitess.generated import query_pb2 as q

NOT_NULL, PRI_KEY, UNIQUE_KEY, MULTIPLE_KEY, BLOB, UNSIGNED = 1, 2, 4, 8, 16, 32
BINARY, ENUM, AUTO_INCREMENT, SET, NO_DEFAULT, NUM = 128, 256, 512, 2048, 4096, 32768

_INTS = {"tinyint": "INT8", "smallint": "INT16", "mediumint": "INT24", "int": "INT32", "bigint": "INT64"}
_OTHER = {
    "float": q.FLOAT32, "double": q.FLOAT64, "decimal": q.DECIMAL, "date": q.DATE, "time": q.TIME,
    "datetime": q.DATETIME, "timestamp": q.TIMESTAMP, "year": q.YEAR, "bit": q.BIT, "enum": q.ENUM,
    "set": q.SET, "json": q.JSON, "binary": q.BINARY, "varbinary": q.VARBINARY,
    "tinyblob": q.BLOB, "blob": q.BLOB, "mediumblob": q.BLOB, "longblob": q.BLOB,
    "geometry": q.GEOMETRY, "point": q.GEOMETRY, "linestring": q.GEOMETRY, "polygon": q.GEOMETRY,
}  # fmt: skip
_TEXT = {"char": (q.CHAR, q.BINARY), "varchar": (q.VARCHAR, q.VARBINARY)}
_LONG_TEXT = {"tinytext", "text", "mediumtext", "longtext"}


@dataclass(frozen=True)
class TableFields:
    """A table's fields, and what the double needs to write its values."""

    fields: tuple[Any, ...]  # query.Field
    names: tuple[str, ...]
    data_types: tuple[str, ...]  # information_schema DATA_TYPE, lower case
    lengths: tuple[int, ...]  # BINARY(n): n; temporal types: fractional digits
    primary_key: tuple[str, ...]


def table_fields(conn: Any, database: str, table: str) -> TableFields | None:
    """The table's fields now, or None when it does not exist."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.IS_NULLABLE, c.COLUMN_KEY, c.EXTRA, "
            "c.CHARACTER_OCTET_LENGTH, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.DATETIME_PRECISION, "
            "c.COLLATION_NAME, l.ID, c.COLUMN_DEFAULT IS NULL "
            "FROM information_schema.COLUMNS c LEFT JOIN information_schema.COLLATIONS l "
            "ON l.COLLATION_NAME = c.COLLATION_NAME "
            "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
            (database, table),
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (database, table),
        )
        key = tuple(_text(r[0]) for r in cur.fetchall())
    if not rows:
        return None
    fields, names, types, lengths = [], [], [], []
    for row in rows:
        name, data_type, column_type, nullable, column_key, extra = row[:6]
        octets, precision, scale, fsp, coll, coll_id, nodef = row[6:]
        name, data_type, column_type = _text(name), _text(data_type).lower(), _text(column_type)
        unsigned = "unsigned" in column_type
        vtype, flags = _type(data_type, unsigned, coll is None)
        if nullable == "NO":
            flags |= NOT_NULL
        if _text(column_key) == "PRI":
            flags |= PRI_KEY | (NO_DEFAULT if nodef else 0)
        elif _text(column_key) == "UNI":
            flags |= UNIQUE_KEY
        elif _text(column_key) == "MUL":
            flags |= MULTIPLE_KEY
        if "auto_increment" in _text(extra):
            flags |= AUTO_INCREMENT
        if name in key and len(key) > 1:
            flags |= 16384  # PART_KEY
        decimals = _decimals(data_type, scale, fsp)
        length = int(octets or precision or 0)
        fields.append(
            q.Field(
                name=name,
                type=vtype,
                table=table,
                org_table=table,
                database=database,
                org_name=name,
                column_length=min(length, 4294967295),
                charset=int(coll_id) if coll_id else 63,
                decimals=decimals,
                flags=flags,
                column_type=column_type,
            )
        )
        names.append(name)
        types.append(data_type)
        lengths.append(_width(data_type, octets, precision, fsp))
    return TableFields(tuple(fields), tuple(names), tuple(types), tuple(lengths), key)


_TEMPORAL = ("time", "datetime", "timestamp")


def _decimals(data_type: str, scale: Any, fsp: Any) -> int:
    if data_type == "decimal":
        return int(scale or 0)
    if data_type in _TEMPORAL:
        return int(fsp or 0)
    return 31 if data_type in ("float", "double") else 0


def _width(data_type: str, octets: Any, precision: Any, fsp: Any) -> int:
    """What writing a value needs: BINARY(n)'s n, BIT(n)'s n, a temporal type's digits."""
    if data_type == "binary":
        return int(octets or 0)
    if data_type == "bit":
        return int(precision or 1)
    return int(fsp or 0) if data_type in _TEMPORAL else 0


def _type(data_type: str, unsigned: bool, binary_charset: bool) -> tuple[int, int]:
    """(Vitess type, type flags) of an information_schema DATA_TYPE."""
    if data_type in _INTS:
        name = ("U" if unsigned else "") + _INTS[data_type]
        return q.Type.Value(name), NUM | (UNSIGNED if unsigned else 0)
    if data_type in _TEXT:
        text, binary = _TEXT[data_type]
        return (binary, BINARY) if binary_charset else (text, 0)
    if data_type in _LONG_TEXT:
        return (q.BLOB, BLOB | BINARY) if binary_charset else (q.TEXT, BLOB)
    vtype = _OTHER.get(data_type)
    if vtype is None:
        return q.VARCHAR, 0
    flags = 0
    if vtype in (q.FLOAT32, q.FLOAT64, q.DECIMAL, q.YEAR):
        flags |= NUM | (UNSIGNED if unsigned else 0)
    if vtype in (q.BINARY, q.VARBINARY):
        flags |= BINARY
    if vtype == q.BLOB:
        flags |= BLOB | BINARY
    if vtype == q.ENUM:
        flags |= ENUM
    if vtype == q.SET:
        flags |= SET
    return vtype, flags


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, (bytes, bytearray)) else ("" if value is None else str(value))
