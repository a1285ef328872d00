"""Transaction metadata: BEGIN/END events and each change's ordered `transaction` block.

Debezium's transaction metadata plus Vitess's ordered fields, for every source: the
connector says when a transaction starts (its id, epoch and rank); this context numbers
the events (`total_order` across the transaction, `data_collection_order` per table) and
counts them for the END event. Numbering counts only emitted events, so a restart that
re-reads a transaction and suppresses what was already delivered numbers them the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cdc_core.events.ordering import OrderKey


@dataclass
class OpenTransaction:
    id: str | None  # None: a standalone change (`TransactionBegin.standalone`)
    epoch: int
    rank: int
    ts_ms: int
    total: int = 0
    per_table: dict[str, int] = field(default_factory=dict)

    def next_block(self, data_collection: str) -> dict[str, Any]:
        self.total += 1
        n = self.per_table.get(data_collection, 0) + 1
        self.per_table[data_collection] = n
        return {
            "id": self.id,
            "total_order": self.total,
            "data_collection_order": n,
            "transaction_epoch": self.epoch,
            "transaction_rank": self.rank,
        }

    def order_key(self) -> OrderKey:
        return OrderKey(self.epoch, self.rank, self.total)


# As Debezium's SchemaFactory builds them (versions, the item struct's name), in Kafka's
# JsonConverter key order.
TRANSACTION_KEY_SCHEMA = {
    "type": "struct",
    "fields": [{"type": "string", "optional": False, "field": "id"}],
    "optional": False,
    "name": "io.debezium.connector.common.TransactionMetadataKey",
    "version": 1,
}

TRANSACTION_VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "status"},
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "field": "event_count"},
        {
            "type": "array",
            "items": {
                "type": "struct",
                "fields": [
                    {"type": "string", "optional": False, "field": "data_collection"},
                    {"type": "int64", "optional": False, "field": "event_count"},
                ],
                "optional": True,
                "name": "event.collection",
                "version": 1,
            },
            "optional": True,
            "field": "data_collections",
        },
        {"type": "int64", "optional": False, "field": "ts_ms"},
    ],
    "optional": False,
    "name": "io.debezium.connector.common.TransactionMetadataValue",
    "version": 1,
}


def begin_payload(txn: OpenTransaction) -> dict[str, Any]:
    return {
        "status": "BEGIN",
        "id": txn.id,
        "event_count": None,
        "data_collections": None,
        "ts_ms": txn.ts_ms,
    }


def end_payload(txn: OpenTransaction, ts_ms: int) -> dict[str, Any]:
    return {
        "status": "END",
        "id": txn.id,
        "event_count": txn.total,
        "data_collections": [
            {"data_collection": name, "event_count": n} for name, n in txn.per_table.items()
        ],
        "ts_ms": ts_ms,
    }
