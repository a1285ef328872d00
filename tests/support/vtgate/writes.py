"""Row changes routed as VTGate routes them: each row to the shard its keyspace id
(`vindex.py`: the first primary-key column) falls in. A change that moves a row to
another shard (its first key column changes) is a delete on the old shard and an insert
on the new one, as Vitess does it. The statements come out per shard, in the order the
shards were first touched, for one transaction per shard."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from tests.support.vtgate.fields import quote


@dataclass(frozen=True)
class Insert:
    row: dict[str, Any]


@dataclass(frozen=True)
class Update:
    key: dict[str, Any]  # the primary key of the row to change
    values: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    key: dict[str, Any]


Change = Insert | Update | Delete
Statements = dict[str, list[tuple[str, Sequence[Any]]]]


def primary_key(conn: pymysql.Connection, database: str, table: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX",
            (database, table),
        )
        key = [r[0] for r in cur.fetchall()]
        if not key:
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                "ORDER BY ORDINAL_POSITION LIMIT 1",
                (database, table),
            )
            key = [r[0] for r in cur.fetchall()]
    if not key:
        raise LookupError(f"table {database}.{table} does not exist")
    return key


def route(
    table: str,
    key: list[str],
    changes: Sequence[Change],
    shard_of: Callable[[Any], str],
    read_row: Callable[[str, dict[str, Any]], dict[str, Any]],
) -> Statements:
    """Statements per shard for `changes` to `table` (`read_row(shard, key)`: a row's
    current values, needed when an update moves it)."""
    target = quote(table)
    todo: Statements = {}
    vindex = key[0]

    def add(shard: str, sql: str, params: Sequence[Any]) -> None:
        todo.setdefault(shard, []).append((sql, list(params)))

    def where(row_key: dict[str, Any]) -> str:
        return " AND ".join(f"{quote(c)} = %s" for c in row_key)

    for change in changes:
        if isinstance(change, Insert):
            names = ", ".join(quote(c) for c in change.row)
            marks = ", ".join(["%s"] * len(change.row))
            add(
                shard_of(change.row[vindex]),
                f"INSERT INTO {target} ({names}) VALUES ({marks})",
                change.row.values(),
            )
        elif isinstance(change, Update):
            old = shard_of(change.key[vindex])
            new = shard_of(change.values.get(vindex, change.key[vindex]))
            if old == new:
                sets = ", ".join(f"{quote(c)} = %s" for c in change.values)
                add(
                    old,
                    f"UPDATE {target} SET {sets} WHERE {where(change.key)}",
                    [*change.values.values(), *change.key.values()],
                )
                continue
            row = {**read_row(old, change.key), **change.values}
            add(old, f"DELETE FROM {target} WHERE {where(change.key)}", change.key.values())
            names = ", ".join(quote(c) for c in row)
            add(new, f"INSERT INTO {target} ({names}) VALUES ({', '.join(['%s'] * len(row))})", row.values())
        elif isinstance(change, Delete):
            add(
                shard_of(change.key[vindex]),
                f"DELETE FROM {target} WHERE {where(change.key)}",
                change.key.values(),
            )
        else:
            raise TypeError(f"not a change: {change!r} (use Insert, Update or Delete)")
    return todo
