"""Change stream events → the pipeline's `LogItem`s, in stream order.

The events of a multi-document transaction (`lsid` + `txnNumber`, contiguous in the
stream) are one transaction with Debezium's id `<lsid>:<txnNumber>` and its BEGIN/END. Any
other event is, as Debezium's MongoDB connector has it, in no transaction: no BEGIN or
END, a `transaction` block whose `id` is null but which still carries the ordered
metadata (`TransactionBegin.standalone`); the Delta merge takes it as complete by itself.
A multi-document transaction ends where the next event belongs to another one, or when
the stream is idle (`close`): a change stream shows a transaction whole, or not yet.

Order (seed 002's rule, generalised): `transaction_rank` is the cluster time as MongoDB
orders it, `seconds << 32 | increment`, one value for all of a transaction's events;
`transaction_epoch` is 0 and grows when the cluster time goes back (a restored
deployment), kept in the offsets. Positions are `{resume_token, sec, ord, epoch}`.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from typing import Any

from cdc_core.connectors.mongodb.ext_json import millis_of, relaxed, strict
from cdc_core.connectors.mongodb.shape import collection_schema
from cdc_core.connectors.mongodb.signal_ids import signal_ref
from cdc_core.connectors.mysql.source_info import TIDEMARK_VERSION
from cdc_core.errors import TidemarkError
from cdc_core.events.connect_schema import Schema, field, struct
from cdc_core.events.envelope import OP_CREATE, OP_DELETE, OP_UPDATE
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.source import LogItem, RowChange, SchemaChange, TransactionBegin, TransactionCommit

CONNECTOR = "mongodb"
_OPS = {"insert": OP_CREATE, "update": OP_UPDATE, "replace": OP_UPDATE, "delete": OP_DELETE}
_DROPS = {"drop", "rename", "dropDatabase"}


def source_schema() -> Schema:
    return struct(
        "io.debezium.connector.mongo.Source",
        [
            field("string", "version", optional=False),
            field("string", "connector", optional=False),
            field("string", "name", optional=False),
            field("int64", "ts_ms", optional=False),
            field(
                "string",
                "snapshot",
                logical="io.debezium.data.Enum",
                version=1,
                parameters={
                    "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
                },
                default="false",
            ),
            field("string", "db", optional=False),
            field("string", "sequence"),
            field("int64", "ts_us"),
            field("int64", "ts_ns"),
            field("string", "collection", optional=False),
            field("int32", "ord", optional=False),
            field("string", "lsid"),
            field("int64", "txnNumber"),
            field("int64", "wallTime"),
        ],
        field_name="source",
        version=1,
    )


def cluster_rank(sec: int, inc: int) -> int:
    return (sec << 32) | inc


def stored_token(token: Mapping[str, Any]) -> dict[str, Any]:
    """A resume token as the offsets keep it, in JSON. A server adds `_typeBits` (binary)
    for an `_id` whose key form loses its type (a NumberLong, a double, a Decimal128)."""
    return {
        k: {"$binary": base64.b64encode(v).decode()} if isinstance(v, bytes) else v for k, v in token.items()
    }


def resume_token(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The token a change stream resumes from (`stored_token` reversed)."""
    return {
        k: base64.b64decode(v["$binary"]) if isinstance(v, dict) and set(v) == {"$binary"} else v
        for k, v in stored.items()
    }


def token_time(token: Mapping[str, Any]) -> tuple[int, int] | None:
    """The cluster time a resume token stands at: its `_data` is a key string whose first
    value is that timestamp (type byte 130, then seconds and increment, big-endian)."""
    data = token.get("_data")
    try:
        raw = bytes.fromhex(data) if isinstance(data, str) else b""
    except ValueError:
        return None
    if len(raw) < 9 or raw[0] != 130:
        return None
    return int.from_bytes(raw[1:5], "big"), int.from_bytes(raw[5:9], "big")


class EventAssembler:
    """The stream's state (position, epoch, the open transaction); `feed` turns a change
    event document into items."""

    def __init__(
        self,
        name: str,
        position: dict[str, Any] | None,
        signal: TableId | None,
        signal_schema: TableSchema,
        schemas: dict[TableId, TableSchema] | None = None,
    ) -> None:
        self.name = name
        self.position = dict(position or {})
        self.signal, self.signal_schema = signal, signal_schema
        self._txn: str | None = None  # id of the open multi-document transaction
        self._restart: dict[str, Any] = dict(self.position)
        self._last_rank = cluster_rank(int(self.position.get("sec", 0)), int(self.position.get("ord", 0)))
        self._schemas: dict[TableId, TableSchema] = {} if schemas is None else schemas
        self.schema_seq = 0

    @property
    def epoch(self) -> int:
        return int(self.position.get("epoch", 0))

    @property
    def last_rank(self) -> int:
        return self._last_rank

    @property
    def known_schemas(self) -> dict[TableId, TableSchema]:
        return self._schemas

    @property
    def in_transaction(self) -> bool:
        return self._txn is not None

    def moved_to(self, position: dict[str, Any]) -> None:
        """Past events rendered elsewhere (`rendering.py`), each outside any transaction."""
        self.position = position
        self._last_rank = cluster_rank(int(position["sec"]), int(position["ord"]))

    def idle_at(self, token: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The position of the token an idle stream moved to (its postBatchResumeToken),
        when it is past the position and no transaction is open; else None. Committed, it
        keeps a quiet collection's position within the oplog of a busy deployment."""
        if token is None or self._txn is not None:
            return None
        stored = stored_token(token)
        moment = token_time(stored)
        if moment is None or stored == self.position.get("resume_token"):
            return None
        rank = cluster_rank(*moment)
        if rank < self._last_rank:
            return None
        self.position = {"resume_token": stored, "sec": moment[0], "ord": moment[1], "epoch": self.epoch}
        self._last_rank = rank
        return dict(self.position)

    def schema(self, table: TableId) -> TableSchema:
        found = self._schemas.get(table)
        if found is None:
            found = self._schemas[table] = collection_schema(table)
        return found

    # ------------------------------------------------------------------ events

    def feed(self, event: dict[str, Any], watched: TableId | None = None) -> list[LogItem]:
        kind = event.get("operationType")
        cluster = event.get("clusterTime")
        sec, inc = (cluster.time, cluster.inc) if cluster is not None else (0, 0)
        token = (
            stored_token(event["_id"])
            if isinstance(event.get("_id"), Mapping)
            else {"_data": str(event.get("_id"))}
        )
        rank = cluster_rank(sec, inc)
        epoch = self.epoch + 1 if rank < self._last_rank else self.epoch
        self._last_rank = rank
        after_position = {"resume_token": token, "sec": sec, "ord": inc, "epoch": epoch}
        table = _table(event, watched)
        if kind in _DROPS:
            items = self.close()
            self.position = after_position
            return [*items, self._dropped(table, sec, (epoch, rank))]
        if kind not in _OPS:
            items = self.close()  # invalidate and anything new: the position moves on
            self.position = after_position
            return items
        if table is None:
            raise TidemarkError(f"a {kind} change event without its namespace (ns): {event.get('_id')}")
        lsid, txn_number = event.get("lsid"), event.get("txnNumber")
        txn_id = f"{strict(lsid)}:{int(txn_number)}" if lsid is not None and txn_number is not None else None
        items: list[LogItem] = []
        if self._txn is not None and txn_id != self._txn:
            items += self.close()
        ts_ms = _millis(event.get("wallTime")) or sec * 1000 or int(time.time() * 1000)
        if self._txn is None:
            self._restart = dict(self.position)
            begin_id = txn_id or token.get("_data") or f"{sec}.{inc}"
            items.append(
                TransactionBegin(str(begin_id), epoch, rank, ts_ms, self._restart, standalone=txn_id is None)
            )
            self._txn = txn_id or ""
        items.append(self._row(event, kind, table, sec, inc, ts_ms, lsid, txn_number))
        self.position = after_position
        if txn_id is None:
            items += self.close()
        return items

    def close(self) -> list[LogItem]:
        """End the open transaction (the stream moved on, or is idle)."""
        if self._txn is None:
            return []
        self._txn = None
        return [TransactionCommit(dict(self.position), int(time.time() * 1000))]

    def _row(
        self,
        event: dict[str, Any],
        kind: str,
        table: TableId,
        sec: int,
        inc: int,
        ts_ms: int,
        lsid: Any,
        txn: Any,
    ) -> RowChange:
        full, pre = event.get("fullDocument"), event.get("fullDocumentBeforeChange")
        key = (event.get("documentKey") or {}).get("_id")
        if key is None and isinstance(full, dict):
            key = full.get("_id")
        if key is None:
            raise TidemarkError(
                f"a {kind} change event of {table} without the document's _id: {event.get('_id')}"
            )
        source = {
            "version": TIDEMARK_VERSION,
            "connector": CONNECTOR,
            "name": self.name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": table.database,
            "sequence": None,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "collection": table.table,
            "ord": inc,
            "lsid": None if lsid is None else strict(lsid),
            "txnNumber": None if txn is None else int(txn),
            "wallTime": _millis(event.get("wallTime")),
        }
        if table == self.signal and kind == "insert" and isinstance(full, dict):
            data = full.get("data")
            values = (
                signal_ref(full.get("_id")),
                full.get("type"),
                data if isinstance(data, str) or data is None else relaxed(data),
            )
            return RowChange(self.signal_schema, OP_CREATE, None, values, source, ts_ms)
        schema = self.schema(table)
        op = _OPS[kind]
        before = (key, pre) if op != OP_CREATE else None
        after = None if op == OP_DELETE else (key, full if isinstance(full, dict) else None)
        extra = None
        described = event.get("updateDescription")
        if kind == "update" and described is not None:
            extra = {
                "updateDescription": {
                    "removedFields": list(described.get("removedFields") or []) or None,
                    "updatedFields": relaxed(described.get("updatedFields") or {}, ", "),
                    "truncatedArrays": [
                        {"field": t["field"], "size": int(t["newSize"])}
                        for t in described.get("truncatedArrays") or []
                    ]
                    or None,
                }
            }
        return RowChange(schema, op, before, after, source, ts_ms, extra=extra)

    def _dropped(self, table: TableId | None, sec: int, order: tuple[int, int]) -> SchemaChange:
        affected = (table,) if table is not None else ()
        self.schema_seq += 1
        return SchemaChange(
            None,
            table.database if table is not None else None,
            "drop_table",
            affected,
            (),
            {"db": table.database if table else "", "collection": table.table if table else ""},
            dict(self.position),
            self.schema_seq,
            sec * 1000 or int(time.time() * 1000),
            order,
            affected,
        )


def _table(event: dict[str, Any], watched: TableId | None) -> TableId | None:
    ns = event.get("ns")
    if isinstance(ns, dict) and ns.get("db") and ns.get("coll"):
        return TableId(ns["db"], ns["coll"])
    return watched  # a collection-scoped stream of a server that leaves ns out


def _millis(value: Any) -> int | None:
    return None if value is None else millis_of(value)
