"""Spark's JDBC reader on MySQL/MariaDB: the URL, exact type choices and inline literals.

The Spark chunk job reads a batch of windows with one `read.jdbc(predicates=...)`, one
partition per window, so rows are decoded by the JVM driver rather than by Python. Spark
takes each partition's WHERE clause as text, without bound parameters, so key bounds and
filter values are rendered here as literals in forms no value can break out of: strings
as hex with a charset introducer (coercible, so the column's own collation still decides
every comparison), bytes as hex, numbers as digits, dates and times from Python's own
formatting.

A table is read this way only when Spark gives back, for every column, a value the
connector's type mapping turns into the same event value as the binlog's (see
`tests/support/types_table.py`); other tables keep the Python reader.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from cdc_core.connectors.mysql.chunk_reader import select_list, table_name, where_clause
from cdc_core.connectors.mysql.server import quote
from cdc_core.connectors.mysql.types import BINARY_TYPES, CHAR_TYPES, INT_TYPES
from cdc_core.schema.model import TableSchema
from cdc_core.snapshot.chunks import ChunkPlan, Key

DRIVER = "org.mariadb.jdbc.Driver"
# Spark's decimals hold at most 38 digits.
MAX_DECIMAL_PRECISION = 38
# Spark types forced through `customSchema`: TIME spans ±838 hours, which no Spark type
# holds, so it is read as MySQL's text; BIT(n) is a number, not the bytes Spark makes of it;
# DATETIME as an instant (of the UTC session), which the chunk job makes the wall-clock
# TIMESTAMP_NTZ again: Spark reads a TIMESTAMP_NTZ without moving java.sql.Timestamp's
# calendar to its own, so a DATETIME before 1582 moved by days (1000-01-01 became
# 1000-01-06). (Its text is no way round: the driver gives '...00.001' of a DATETIME(3) as
# '...00.1000'.)
_READ_AS = {"TIME": "STRING", "BIT": "BIGINT", "DATETIME": "TIMESTAMP"}
_EXACT = (
    set(INT_TYPES)
    | CHAR_TYPES
    | BINARY_TYPES
    | set(_READ_AS)
    | {"FLOAT", "DOUBLE", "DECIMAL", "NUMERIC", "DATE", "DATETIME", "TIMESTAMP", "YEAR", "ENUM", "SET", "JSON"}
)  # fmt: skip
# Session settings the reads need: CHAR columns (and ENUM and SET, which the driver reports
# as CHAR) as stored, not space-padded to their length as Spark's CHAR type would have
# them; instants staged as Parquet INT64 microseconds rather than legacy INT96.
SPARK_SQL_CONF = {
    "spark.sql.readSideCharPadding": "false",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


def jdbc_url(params: dict[str, Any]) -> str:
    """`jdbc:mysql:` so Spark picks its MySQL dialect (backtick quoting, BIT and unsigned
    types); the MariaDB driver accepts it with permitMysqlScheme. TINYINT(1) and YEAR stay
    numbers, as the binlog gives them."""
    options = "permitMysqlScheme&tinyInt1isBit=false&yearIsDateType=false&transformedBitIsBoolean=false"
    return f"jdbc:mysql://{params['host']}:{int(params['port'])}/?{options}"


def jdbc_options(params: dict[str, Any]) -> dict[str, str]:
    """Reader options. DATETIME comes back as a wall-clock value without a zone
    (TimestampNTZ) and TIMESTAMP as an instant, both from a UTC session. The password
    goes only into the driver's connection properties, which Spark redacts."""
    return {
        "driver": DRIVER,
        "user": str(params["user"]),
        "password": str(params.get("password") or ""),
        "preferTimestampNTZ": "true",
        "sessionInitStatement": "SET time_zone = '+00:00'",
        "fetchsize": "10000",
    }


def unreadable_columns(schema: TableSchema) -> list[str]:
    """Columns Spark's JDBC reader cannot give back exactly; empty when the table can use it."""
    bad = []
    for column in schema.columns:
        kind = column.type_name.upper()
        if kind not in _EXACT:
            bad.append(f"{column.name} ({column.type_name})")
        elif kind in ("DECIMAL", "NUMERIC") and (column.length or 10) > MAX_DECIMAL_PRECISION:
            bad.append(f"{column.name} ({column.type_name}({column.length}))")
    return bad


def source_table(schema: TableSchema) -> str:
    """What Spark reads the table from: the table itself, or, when it has FLOAT columns,
    a derived table of the chunk reader's columns (FLOAT as the exact DOUBLE; the text
    protocol would give six significant digits). MySQL merges the derived table into the
    window's query, so the key predicates still use the index."""
    table = table_name(schema.id)
    if not any(c.type_name.upper() == "FLOAT" for c in schema.columns):
        return table
    return f"(SELECT {select_list(schema)} FROM {table}) AS {quote(schema.id.table)}"


def custom_schema(schema: TableSchema) -> str | None:
    """Spark's `customSchema` for the columns whose Spark type is forced."""
    forced = [
        f"{quote(c.name)} {_READ_AS[c.type_name.upper()]}"
        for c in schema.columns
        if c.type_name.upper() in _READ_AS
    ]
    return ", ".join(forced) or None


def literal(value: Any) -> str:
    """SQL text for one value that cannot end a string or a statement."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"cannot compare with {value}")
        return format(value, "f")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"cannot compare with {value}")
        return repr(value)
    if isinstance(value, str):
        return "_utf8mb4 X'" + value.encode("utf-8", errors="surrogateescape").hex() + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "X'" + bytes(value).hex() + "'"
    if isinstance(value, dt.datetime):
        return "'" + value.replace(tzinfo=None).isoformat(sep=" ") + "'"
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, dt.timedelta):
        return "'" + _time_text(value) + "'"
    raise TypeError(f"no SQL literal for a {type(value).__name__} value")


def _time_text(value: dt.timedelta) -> str:
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{fraction:06d}"


def predicate(plan: ChunkPlan, lo: Key | None, hi: Key | None) -> str:
    """The WHERE text of window `(lo, hi]` with the plan's filter, literals inline."""
    return where_clause(plan, lo, hi, literal) or "1 = 1"
