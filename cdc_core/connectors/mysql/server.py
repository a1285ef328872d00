"""What the streamer asks the MySQL/MariaDB server directly (not through the binlog):
its CDC settings, the current log position, and table definitions.

Every check that can fail at start fails here, with a message that says which server
setting is wrong and what to set it to, before a single event is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc_core.errors import TidemarkError


class ServerConfigError(TidemarkError):
    """The server is not configured for row-based CDC."""


@dataclass(frozen=True)
class ServerInfo:
    version: str
    mariadb: bool
    gtid_mode: bool
    server_id: int


@dataclass(frozen=True)
class LogPosition:
    file: str
    pos: int
    gtids: str | None


REQUIRED = {
    "log_bin": ("ON", "1"),
    "binlog_format": ("ROW",),
    "binlog_row_image": ("FULL",),
    "binlog_row_metadata": ("FULL",),
}


def connection_params(config: Any) -> dict[str, Any]:
    """pymysql settings from a connector's configuration (the password from its secret)."""
    secret = config.secret("database.password")
    return {
        "host": config.get("database.hostname"),
        "port": config.get("database.port"),
        "user": config.get("database.user"),
        "password": secret.reveal() if secret else "",
    }


def connect(params: dict[str, Any], **extra: Any) -> pymysql.Connection:
    return pymysql.connect(**params, autocommit=True, connect_timeout=10, **extra)


def flavor(conn: pymysql.Connection) -> str:
    """`mariadb` or `mysql`: which server this is."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        return "mariadb" if "mariadb" in cur.fetchone()[0].lower() else "mysql"


def inspect_server(conn: pymysql.Connection) -> ServerInfo:
    """Check the binlog settings CDC needs; raise ServerConfigError naming each problem."""
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION(), @@server_id")
        version, server_id = cur.fetchone()
        mariadb = "mariadb" in version.lower()
        problems = []
        for name, allowed in REQUIRED.items():
            cur.execute("SHOW GLOBAL VARIABLES LIKE %s", (name,))
            row = cur.fetchone()
            value = None if row is None else str(row[1]).upper()
            if value not in allowed:
                problems.append(f"{name}={value or 'unsupported'} (need {allowed[0]})")
        if mariadb:
            gtid_mode = True
        else:
            cur.execute("SHOW GLOBAL VARIABLES LIKE 'gtid_mode'")
            row = cur.fetchone()
            gtid_mode = bool(row) and str(row[1]).upper() == "ON"
    if problems:
        raise ServerConfigError(
            "the server is not configured for row-based change data capture: "
            + "; ".join(problems)
            + ". Set these in the server configuration (binlog_row_metadata=FULL needs MySQL 8.0.1+ or "
            "MariaDB 10.5+) and restart it."
        )
    return ServerInfo(version=version, mariadb=mariadb, gtid_mode=gtid_mode, server_id=int(server_id))


def current_position(conn: pymysql.Connection, info: ServerInfo) -> LogPosition:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if row is None:
            raise ServerConfigError("SHOW MASTER STATUS returned nothing: binary logging is off")
        gtids = None
        if info.mariadb:
            cur.execute("SELECT @@gtid_binlog_pos")
            gtids = cur.fetchone()[0] or ""
        elif info.gtid_mode:
            gtids = row[4] if len(row) > 4 else None
    return LogPosition(file=row[0], pos=int(row[1]), gtids=gtids)


def binlog_files(conn: pymysql.Connection) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [r[0] for r in cur.fetchall()]


def list_tables(
    conn: pymysql.Connection, types: tuple[str, ...] = ("BASE TABLE", "SYSTEM VERSIONED")
) -> list[tuple[str, str]]:
    """Every table of `types` outside the system schemas (MariaDB's system-versioned tables
    are base tables of a type of their own)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE IN %s "
            "AND TABLE_SCHEMA NOT IN ('mysql', 'sys', 'performance_schema', 'information_schema') "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME",
            (types,),
        )
        return [(r[0], r[1]) for r in cur.fetchall()]


_RULES = re.compile(
    r"\bREFERENCES\b[^;]*?\)((?:\s+ON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT|RESTRICT|NO\s+ACTION))+)",
    re.IGNORECASE,
)


def cascades(statement: str) -> list[str]:
    """The ON DELETE/UPDATE rules of each foreign key a CREATE or ALTER TABLE statement
    gives that changes the table's rows (CASCADE, SET NULL, SET DEFAULT): InnoDB applies
    them below the binlog, which holds only the parent's change."""
    found = []
    for clause in re.split(r"\bFOREIGN\s+KEY\b", statement, flags=re.IGNORECASE)[1:]:
        match = _RULES.search(clause)
        rules = " ".join(match.group(1).split()).upper() if match else ""
        if any(word in rules for word in ("CASCADE", "SET NULL", "SET DEFAULT")):
            found.append(rules)
    return found


def cascade_warning(table: str, rules: list[str]) -> str:
    return (
        f"{table}: its foreign keys change its rows below the binlog ({'; '.join(rules)}), which holds only the "
        "parent's change, so those changes are not captured and its copies downstream, Delta included, keep "
        "the old rows; an incremental snapshot re-reads the rows it still has (rows deleted that way stay)"
    )


def partition_warning(tables: str, where: str) -> str:
    return (
        f"{tables}: {where} removes or moves rows with no row events (the binlog holds the statement alone), so "
        "their copies downstream, Delta included, keep rows the source no longer has there and miss rows it "
        "brought in; an incremental snapshot re-reads the rows the tables have (rows removed stay)"
    )


# MariaDB keeps a sequence's state in a one-row table of these columns and logs each
# NEXTVAL that reaches past its cache, each SETVAL and ALTER SEQUENCE, as row events of
# it. A sequence is not a table the history holds (its DDL is not a table's), and its
# rows are no one's data: they stopped the streamer, saying the history was incomplete.
SEQUENCE_COLUMNS = (
    "next_not_cached_value",
    "minimum_value",
    "maximum_value",
    "start_value",
    "increment",
    "cache_size",
    "cycle_option",
    "cycle_count",
)


def versioned_refusal(tables: list[str]) -> str:
    """Why system-versioned tables are not captured, and the way out."""
    return (
        f"{', '.join(tables)}: MariaDB system-versioned tables (WITH SYSTEM VERSIONING) are not captured: their "
        "binlog rows mix each row's history versions with its current one under the same key, which would land "
        "history in Delta as current rows. Leave them out with table.exclude.list, or capture the table once "
        "its system versioning is dropped"
    )


def show_create_table(conn: pymysql.Connection, database: str, table: str) -> str:
    with conn.cursor() as cur:
        cur.execute(f"SHOW CREATE TABLE {quote(database)}.{quote(table)}")
        return cur.fetchone()[1]


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def try_global_read_lock(conn: pymysql.Connection) -> bool:
    """FLUSH TABLES WITH READ LOCK, so the position and the schemas read under it agree.
    Returns False (and the caller reads without the lock) when the user lacks RELOAD."""
    try:
        with conn.cursor() as cur:
            cur.execute("FLUSH TABLES WITH READ LOCK")
        return True
    except pymysql.err.OperationalError:
        return False


def release_read_lock(conn: pymysql.Connection) -> None:
    with conn.cursor() as cur:
        cur.execute("UNLOCK TABLES")
