"""The demo shop on a sharded Vitess keyspace, written as VTGate would route it.

The VTGate double (tests/support/vtgate) serves VStream and shard-targeted queries only,
so the Vitess demo routes its own statements with the double's vindex, following a
VSchema in which every table's primary vindex is its first column (the workload lists it
first in every INSERT, with explicit ids, as a Vitess sequence would give them):

- INSERT goes to the shard of its first value;
- SELECT is scattered and the shards' rows are concatenated (information_schema asks the
  first shard: every shard has the same tables);
- UPDATE, DELETE and DDL are scattered: each shard applies them to the rows it holds,
  and a statement that changes none of a shard's rows writes nothing to its binlog.

A transaction touching several shards commits them one after another, as Vitess does
without two-phase commit. One simplification: an update of a table's first column leaves
the row on its shard (Vitess would move it to the new value's shard); the events are the
same primary-key change either way, and a snapshot reads every shard.

Against a real VTGate (docker-compose's `vitess`), its MySQL port takes these statements
unchanged; this module is only the double's stand-in for VTGate's query routing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pymysql

_INSERT = re.compile(r"^\s*insert\b", re.I)
_SELECT = re.compile(r"^\s*select\b", re.I)
_CATALOG = re.compile(r"\binformation_schema\b", re.I)


class ShardedCursor:
    """A DB-API cursor over every shard's cursor, routing each statement (module doc)."""

    def __init__(self, owner: ShardedConnection) -> None:
        self.owner = owner
        self._rows: list[tuple[Any, ...]] = []
        self.description: Any = None
        self.rowcount = 0

    def __enter__(self) -> ShardedCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._rows = []

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> int:
        shards = self.owner.route(sql, params)
        self._rows, self.description, self.rowcount = [], None, 0
        for conn in shards:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                self.rowcount += max(cur.rowcount, 0)
                if cur.description is not None:
                    self.description = self.description or cur.description
                    self._rows += list(cur.fetchall())
        return self.rowcount

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None


class ShardedConnection:
    """The subset of `pymysql.Connection` the demo uses, over one connection per shard."""

    def __init__(self, shards: dict[str, pymysql.Connection]) -> None:
        from tests.support.vtgate.vindex import shard_for

        self.shards = shards  # shard name → its server, the keyspace's database selected
        self._shard_for = shard_for

    def route(self, sql: str, params: Sequence[Any] | None) -> list[pymysql.Connection]:
        if _INSERT.match(sql):
            if not params:
                raise ValueError(f"an INSERT is routed by its first value, and this one has none: {sql}")
            return [self.shards[self._shard_for(params[0], list(self.shards))]]
        if _SELECT.match(sql) and _CATALOG.search(sql):
            return [next(iter(self.shards.values()))]
        return list(self.shards.values())

    def cursor(self) -> ShardedCursor:
        return ShardedCursor(self)

    def autocommit(self, on: bool) -> None:
        for conn in self.shards.values():
            conn.autocommit(on)

    def commit(self) -> None:
        for conn in self.shards.values():
            conn.commit()

    def rollback(self) -> None:
        for conn in self.shards.values():
            conn.rollback()

    def close(self) -> None:
        for conn in self.shards.values():
            conn.close()
