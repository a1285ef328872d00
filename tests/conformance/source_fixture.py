"""What the conformance suite needs from a source: its per-connector fixture.

A fixture drives the source through its own client (for MySQL/MariaDB, pymysql against
the real server) in the few generic terms the suite speaks: namespaces (a database, a
keyspace), tables of integer and text columns with a key, transactions of inserts,
updates and deletes, an added column, the rows as they are now, and a connector file that
captures a namespace. Everything else (streaming, signals, snapshots, the Delta merge)
goes through Tidemark's generic paths, so a source that passes the suite behaves like
every other one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.support.streamer import Connector

# Column kinds every source can hold; a fixture maps them to its own types.
KINDS = ("int", "text")


@dataclass(frozen=True)
class Insert:
    table: str
    row: dict[str, Any]


@dataclass(frozen=True)
class Update:
    table: str
    key: dict[str, Any]
    values: dict[str, Any]  # may change the key


@dataclass(frozen=True)
class Delete:
    table: str
    key: dict[str, Any]


Change = Insert | Update | Delete


class SourceFixture(Protocol):
    name: str  # the registry name, e.g. "mysql"
    # Whether a key change's events carry Debezium's __debezium.newkey/oldkey headers (a
    # relational update of the key does; a document's _id cannot change, so a key change
    # there is a delete and an insert in one transaction, without headers).
    key_change_headers: bool
    # Whether tables have columns to add (documents have none: a new field is simply in
    # the documents that have it).
    schema_changes: bool
    # Whether a lone change, outside an explicit transaction, is in no transaction (a
    # MongoDB single-document write: no BEGIN/END, its block's id null) rather than in
    # one of its own (a relational autocommit statement).
    standalone_changes: bool
    # Whether a drop's schema change carries its place among the transactions, so the
    # Delta merge ends the dropped table's rows (Vitess's DDL comes once per shard, each
    # in its shard's own order: it does not).
    drops_ordered: bool

    def row(self, image: Any) -> dict[str, Any] | None:
        """An event's `before`/`after` (or a Delta row) as the suite's row: column → value."""
        ...

    def key(self, key: Any) -> dict[str, Any]:
        """A record's key as the suite's key: key column → value."""
        ...

    def connector_name(self) -> str:
        """The `source.connector` value its events carry (e.g. "mariadb" on MariaDB)."""
        ...

    def namespace(self) -> AbstractContextManager[str]:
        """A fresh, empty namespace for one test, removed afterwards."""
        ...

    def create_table(self, ns: str, table: str, columns: dict[str, str], key: Sequence[str]) -> None: ...

    def apply(self, ns: str, changes: Sequence[Change]) -> None:
        """The changes as one source transaction, committed."""
        ...

    def add_column(self, ns: str, table: str, name: str, kind: str) -> None: ...

    def drop_table(self, ns: str, table: str) -> None: ...

    def rows(self, ns: str, table: str) -> list[dict[str, Any]]:
        """Every row now, as its events' `after` values, in key order."""
        ...

    def connector(self, directory: Path, ns: str, extra: dict[str, Any] | None = None) -> Connector:
        """A connector file capturing `ns`, with the signal collection set, state under `directory`."""
        ...

    def collection(self, ns: str, table: str) -> str:
        """The table's name in signals' data-collections."""
        ...

    def topic(self, connector: Connector, ns: str, table: str) -> str: ...

    def watermarks(self, ns: str, snapshots: Sequence[str]) -> int:
        """How many watermark rows of the snapshots `snapshots` (their ids or their
        signals' ids) the signal table of `ns`'s connector holds."""
        ...

    def close(self) -> None: ...


class TableRows:
    """What a source of tables with columns shares: images and keys are the suite's rows
    as they are, key changes carry headers, columns can be added."""

    key_change_headers = True
    schema_changes = True
    standalone_changes = False
    drops_ordered = True

    def row(self, image: Any) -> dict[str, Any] | None:
        return image

    def key(self, key: Any) -> dict[str, Any]:
        return key


WATERMARK_TYPES = ("snapshot-window-open", "snapshot-window-close")


def of_snapshots(rows: Sequence[tuple[Any, Any]], snapshots: Sequence[str]) -> int:
    """How many of the (type, data) signal rows are watermarks of `snapshots`."""
    import orjson

    def named(data: Any) -> Any:
        try:
            return orjson.loads(data).get("snapshot")
        except (orjson.JSONDecodeError, TypeError, AttributeError):
            return None

    return sum(1 for kind, data in rows if kind in WATERMARK_TYPES and named(data) in set(snapshots))


def insert_rows(table: str, rows: Iterator[dict[str, Any]] | Sequence[dict[str, Any]]) -> list[Change]:
    return [Insert(table, r) for r in rows]
