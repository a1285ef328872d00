"""A table's columns as a Vitess tablet's schema engine describes them in FIELD events.

The schema engine runs `SELECT * FROM t WHERE 1 != 1` and keeps the result's column
definitions (name, table, database, type, length, decimals, flags), to which Vitess's
MySQL client adds NUM_FLAG for numeric types; the vstreamer then overwrites `column_type`
and `charset` from `information_schema.columns` (the collation's id, 63 when it has
none). The double does the same against the shard server, so lengths and flags are the
server's own (`bigint NOT NULL` primary key: 53251, `int unsigned`: 32800). The Vitess
type comes from the MySQL type and flags as `sqltypes.MySQLToType` maps them: UNSIGNED
picks UINT*, BINARY_FLAG makes CHAR/VARCHAR/TEXT into BINARY/VARBINARY/BLOB.

Internal tables (`_vt.heartbeat`) keep the result's fields as they are, with no
`column_type` (`vstreamer.buildSidecarTablePlan`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pymysql

from cdc_core.connectors.vitess.generated import query_pb2 as q

NUM_FLAG = 32768
UNSIGNED, BINARY, ENUM, SET = 32, 128, 256, 2048
_NOT_FIXED_DEC = {31, 39}  # MySQL's and MariaDB's "no declared scale" (FLOAT, DOUBLE)

# sqltypes.mysqlToType
_TYPES = {
    0: q.DECIMAL, 1: q.INT8, 2: q.INT16, 3: q.INT32, 4: q.FLOAT32, 5: q.FLOAT64, 6: q.NULL_TYPE,
    7: q.TIMESTAMP, 8: q.INT64, 9: q.INT24, 10: q.DATE, 11: q.TIME, 12: q.DATETIME, 13: q.YEAR,
    15: q.VARCHAR, 16: q.BIT, 17: q.TIMESTAMP, 18: q.DATETIME, 19: q.TIME, 245: q.JSON, 246: q.DECIMAL,
    247: q.ENUM, 248: q.SET, 249: q.TEXT, 250: q.TEXT, 251: q.TEXT, 252: q.TEXT, 253: q.VARCHAR,
    254: q.CHAR, 255: q.GEOMETRY,
}  # fmt: skip
_UNSIGNED_OF = {q.INT8: q.UINT8, q.INT16: q.UINT16, q.INT24: q.UINT24, q.INT32: q.UINT32, q.INT64: q.UINT64}
_BINARY_OF = {q.TEXT: q.BLOB, q.VARCHAR: q.VARBINARY, q.CHAR: q.BINARY}


def vitess_type(mysql_type: int, flags: int) -> int:
    """`sqltypes.MySQLToType`: the Vitess type of a MySQL column type and its flags."""
    typ = _TYPES.get(mysql_type, q.VARBINARY)
    if typ in _UNSIGNED_OF and flags & UNSIGNED:
        return _UNSIGNED_OF[typ]
    if typ in _BINARY_OF and flags & BINARY:
        return _BINARY_OF[typ]
    if typ == q.CHAR and flags & ENUM:
        return q.ENUM
    if typ == q.CHAR and flags & SET:
        return q.SET
    return typ


def is_numeric(mysql_type: int) -> bool:
    """`mysql.IsNum`: the types Vitess's client marks with NUM_FLAG."""
    return (mysql_type <= 9 and mysql_type != 7) or mysql_type in (13, 246)


@dataclass(frozen=True)
class TableFields:
    """A table's FIELD columns and its primary key."""

    table: str
    fields: tuple[Any, ...]  # query.Field
    primary_key: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def has_enum_or_set(self) -> bool:
        return any(f.type in (q.ENUM, q.SET) for f in self.fields)

    @property
    def copy_key(self) -> tuple[str, ...]:
        """The columns the copy phase orders by: the primary key, else every column."""
        return self.primary_key or self.names

    def key_fields(self) -> list[Any]:
        """The copy key's fields as a lastpk carries them: name, type, charset and flags."""
        by_name = {f.name: f for f in self.fields}
        return [
            q.Field(name=n, type=by_name[n].type, charset=by_name[n].charset, flags=by_name[n].flags)
            for n in self.copy_key
        ]

    def truncated(self, count: int) -> TableFields:
        """The first `count` columns (a binlog event written before columns were added)."""
        return replace(self, fields=self.fields[:count])


def table_fields(conn: pymysql.Connection, database: str, table: str) -> TableFields | None:
    """The table's fields now, as a tablet describes them; None when it does not exist."""
    result = _empty_result(conn, database, table)
    if result is None:
        return None
    with conn.cursor() as cur:
        cur.execute(
            "SELECT c.COLUMN_NAME, c.COLUMN_TYPE, l.ID FROM information_schema.COLUMNS c "
            "LEFT JOIN information_schema.COLLATIONS l ON l.COLLATION_NAME = c.COLLATION_NAME "
            "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s",
            (database, table),
        )
        extra = {
            _text(name): (_text(column_type), int(coll) if coll else 63) for name, column_type, coll in cur
        }
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (database, table),
        )
        key = tuple(_text(r[0]) for r in cur.fetchall())
    fields = []
    for column in result:
        field = _field(column, database)
        if field.name in extra:
            field.column_type, field.charset = extra[field.name]
        fields.append(field)
    return TableFields(table, tuple(fields), key)


def keyspace_fields(
    conn: pymysql.Connection, database: str, wanted: Callable[[str], bool]
) -> dict[str, TableFields]:
    """The fields of every table of `database` that `wanted` accepts."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (database,))
        names = [r[0] for r in cur.fetchall()]
    found = {}
    for name in filter(wanted, names):
        fields = table_fields(conn, database, name)
        if fields is not None:
            found[name] = fields
    return found


def internal_fields(conn: pymysql.Connection, table: str) -> TableFields:
    """A sidecar (`_vt`) table's fields: the result's definitions as they are."""
    result = _empty_result(conn, "_vt", table)
    if result is None:
        raise LookupError(f"_vt.{table} does not exist on the shard server")
    return TableFields(table, tuple(_field(c, "_vt") for c in result), ())


def _empty_result(conn: pymysql.Connection, database: str, table: str) -> list[Any] | None:
    with conn.cursor() as cur:
        try:
            cur.execute(f"SELECT * FROM {quote(database)}.{quote(table)} WHERE 1 != 1")
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == 1146:  # no such table
                return None
            raise
        return list(cur._result.fields)  # the column definitions, flags included


def _field(column: Any, database: str) -> Any:
    flags = column.flags | (NUM_FLAG if is_numeric(column.type_code) else 0)
    vtype = vitess_type(column.type_code, column.flags)
    decimals = column.scale
    if vtype in (q.FLOAT32, q.FLOAT64) and decimals in _NOT_FIXED_DEC:
        decimals = 31
    return q.Field(
        name=_text(column.name),
        type=vtype,
        table=_text(column.table_name),
        org_table=_text(column.org_table),
        database=database,
        org_name=_text(column.org_name),
        column_length=column.length,
        charset=column.charsetnr,
        decimals=decimals,
        flags=flags,
    )


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return value.decode()
    return "" if value is None else str(value)
