"""The Vitess tests against a real VTGate, when `TIDEMARK_VITESS_VTGATE` names one
(host:port of its gRPC service; `docker compose up vitess` runs vttestserver with it on
127.0.0.1:33575): the same API as the double's `VitessCluster`, over VTGate's MySQL
protocol (`TIDEMARK_VITESS_MYSQL`, default the same host on 33577).

A real cluster's keyspaces are fixed: tests get `TIDEMARK_VITESS_KEYSPACE` (two shards,
default `commerce`) or `TIDEMARK_VITESS_UNSHARDED_KEYSPACE` (one shard, default
`lookup`), emptied of the tables a test made. Writes target shards (``USE
`keyspace:shard` ``), placed by the double's vindex, which a shard target allows.
Killing VTGate and resharding are the double's alone: those tests are skipped here."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pymysql
import pytest

from tests.support.vtgate.vindex import shard_for


@dataclass(frozen=True)
class _Shard:
    name: str


class RealVitess:
    real = True

    def __init__(self) -> None:
        host, _, port = os.environ["TIDEMARK_VITESS_VTGATE"].rpartition(":")
        mysql = os.environ.get("TIDEMARK_VITESS_MYSQL", f"{host}:33577")
        self.host, self.grpc_port = host, int(port)
        self.mysql_port = int(mysql.rpartition(":")[2])
        self.grpc_address = f"{host}:{port}"
        self.sharded = os.environ.get("TIDEMARK_VITESS_KEYSPACE", "commerce")
        self.unsharded = os.environ.get("TIDEMARK_VITESS_UNSHARDED_KEYSPACE", "lookup")
        self.process = None

    def _connect(self, target: str) -> pymysql.Connection:
        conn = pymysql.connect(
            host=self.host,
            port=self.mysql_port,
            user=os.environ.get("TIDEMARK_DB_USER", "tidemark"),
            password=os.environ.get("TIDEMARK_DB_PASSWORD", ""),
            autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )
        with conn.cursor() as cur:
            cur.execute(f"USE `{target}`")
        return conn

    # ------------------------------------------------------------------ the double's API

    def create_keyspace(self, name: str, shards: dict[str, int] | None = None) -> str:
        keyspace = self.unsharded if shards is not None and len(shards) == 1 else self.sharded
        self.drop_keyspace(keyspace)
        self.execute(
            keyspace,
            "CREATE TABLE IF NOT EXISTS debezium_signal (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
            "data VARCHAR(2048) NULL)",
        )
        return keyspace

    def drop_keyspace(self, name: str) -> None:
        for shard in self.shards(name):
            with self.on_shard(name, shard.name) as conn, conn.cursor() as cur:
                cur.execute("SHOW TABLES")
                for (table,) in cur.fetchall():
                    if table != "debezium_signal":
                        cur.execute(f"DROP TABLE IF EXISTS `{table}`")

    def shards(self, keyspace: str) -> list[_Shard]:
        with self._connect(keyspace) as conn, conn.cursor() as cur:
            cur.execute("SHOW VITESS_SHARDS LIKE %s", (f"{keyspace}/%",))
            return [_Shard(row[0].split("/", 1)[1]) for row in cur.fetchall()]

    @contextmanager
    def on_shard(self, keyspace: str, shard: str) -> Iterator[pymysql.Connection]:
        conn = self._connect(f"{keyspace}:{shard}")
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, keyspace: str, sql: str, params: Sequence[Any] | None = None) -> None:
        for shard in self.shards(keyspace):
            with self.on_shard(keyspace, shard.name) as conn, conn.cursor() as cur:
                cur.execute(sql, params)

    def shard_of(self, keyspace: str, value: Any) -> str:
        return shard_for(value, [s.name for s in self.shards(keyspace)])

    def write(self, keyspace: str, statements: dict[str, list[tuple[str, Sequence[Any]]]]) -> None:
        for shard, todo in statements.items():
            with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
                cur.execute("BEGIN")
                for sql, params in todo:
                    cur.execute(sql, params)
                cur.execute("COMMIT")

    def rows(self, keyspace: str, table: str, columns: str = "*") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for shard in self.shards(keyspace):
            with self.on_shard(keyspace, shard.name) as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(f"SELECT {columns} FROM `{table}`")
                found += cur.fetchall()
        return found

    def position(self, keyspace: str, shard: str) -> str:
        with self.on_shard(keyspace, shard) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@global.gtid_executed")
            return "MySQL56/" + cur.fetchone()[0].replace("\n", "")

    def _double_only(self, *_: Any, **__: Any) -> None:
        pytest.skip("needs the VTGate double (kills VTGate, writes shard servers directly or reshards)")

    kill = restart = start = stop = split_shard = server = _double_only
