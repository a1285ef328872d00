"""What every part of one shard's tablet stream shares: the shard, the tablet's own
connection to its server, the request's rules, and the stream's stop signal."""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import dataclass
from typing import Any

import pymysql

from tests.support.vtgate.positions import Position
from tests.support.vtgate.rules import Rules

_SYSTEM = {"", "_vt", "mysql", "information_schema", "performance_schema", "sys"}
# Replica server ids of this process's binlog readers: MariaDB drops an older replica
# connection when a new one comes with the same id, so each reader has its own.
_server_ids = itertools.count(random.randrange(1_000_000, 2_000_000_000))


def next_server_id() -> int:
    return next(_server_ids)


@dataclass
class ShardContext:
    """What every part of one shard's tablet stream shares."""

    keyspace: str
    shard: str
    params: dict[str, Any]  # host, port, user, password: the tablet's own connection
    rules: Rules
    stop: threading.Event
    packet_size: int = 250_000
    copy_rows: int = 10_000

    def connect(self, **extra: Any) -> pymysql.Connection:
        return pymysql.connect(**self.params, autocommit=True, connect_timeout=10, **extra)

    def current_position(self) -> Position:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_binlog_pos")
            return Position.from_server(cur.fetchone()[0])

    def foreign(self, database: str) -> bool:
        """Whether `database` is another tenant's: a real shard's MySQL holds only its
        keyspace's database, the `_vt` sidecar and the system schemas, so the double's
        stream acts as if every other database (another keyspace's, another test
        session's) lived on a server of its own."""
        return database not in _SYSTEM and database != self.keyspace
