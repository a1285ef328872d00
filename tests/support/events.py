"""Change events built by hand, in the exact JSON form the streamer writes (Connect
schema included, compact JSON), for merge tests that need late, duplicate or shuffled
delivery."""

from __future__ import annotations

import base64
import json
from typing import Any

from cdc_core.events.connect_schema import envelope_schema, field, key_schema, row_schema, struct

TOPIC = "tm.shop.accounts"
FIELDS = [
    field("int32", "id", optional=False),
    field("string", "name"),
    field(
        "bytes",
        "balance",
        logical="org.apache.kafka.connect.data.Decimal",
        parameters={"scale": "2", "connect.decimal.precision": "12"},
    ),
    field("int32", "opened", logical="io.debezium.time.Date"),
    field("int64", "seen", logical="io.debezium.time.MicroTimestamp"),
    field("bytes", "tag"),
]
SOURCE = struct(
    "source", [field("int64", "ts_ms"), field("string", "db"), field("string", "table")], field_name="source"
)


def dumps(value: Any) -> str:
    """JSON as the streamer writes it: compact, keys in the order given."""
    return json.dumps(value, separators=(",", ":"))


def decimal_bytes(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(8, "big", signed=True).lstrip(b"\x00") or b"\x00").decode()


def row(id_: int, name: str, cents: int = 0, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": id_, "name": name, "balance": decimal_bytes(cents), "opened": 19782,
            "seen": 1709251199123456, "tag": base64.b64encode(b"\xca\xfe").decode(), **(extra or {})}  # fmt: skip


def event(
    op: str,
    order: tuple[int, int, int],
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    fields: list[dict[str, Any]] | None = None,
    standalone: bool = False,
    key: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """One record (`topic, key, value` as text) at order key (epoch, rank, total_order);
    `standalone`: a change in no transaction (its block's id null, no BEGIN/END); `key`:
    the key's fields (default: the first field)."""
    fields = fields or FIELDS
    image = after if after is not None else before
    assert image is not None
    epoch, rank, total = order
    value = {
        "schema": envelope_schema(TOPIC, row_schema(TOPIC, fields), SOURCE),
        "payload": {
            "before": before,
            "after": after,
            "source": {"ts_ms": 1_700_000_000_000 + rank, "db": "shop", "table": "accounts"},
            "transaction": {
                "id": None if standalone else f"0-1-{rank}",
                "total_order": total,
                "data_collection_order": total,
                "transaction_epoch": epoch,
                "transaction_rank": rank,
            },
            "op": op,
            "ts_ms": 1_700_000_000_000 + rank,
        },
    }
    named = [f for f in fields if f["field"] in key] if key else [fields[0]]
    record_key = {
        "schema": key_schema(TOPIC, named),
        "payload": {f["field"]: image[f["field"]] for f in named},
    }
    return {"topic": TOPIC, "key": dumps(record_key), "value": dumps(value)}


def tombstone(id_: int) -> dict[str, Any]:
    key = {"schema": key_schema(TOPIC, [FIELDS[0]]), "payload": {"id": id_}}
    return {"topic": TOPIC, "key": dumps(key), "value": None}


def transaction(status: str, rank: int, counts: dict[str, int] | None = None) -> dict[str, Any]:
    """A BEGIN or END record on the transaction topic for the transaction at `rank`."""
    value = {"status": status, "id": f"0-1-{rank}", "event_count": sum((counts or {}).values()) or None,
             "data_collections": [{"data_collection": d, "event_count": n} for d, n in (counts or {}).items()]
             if status == "END" else None, "ts_ms": 1}  # fmt: skip
    return {"topic": "tm.transaction", "key": dumps({"id": f"0-1-{rank}"}), "value": dumps(value)}


def truncate(order: tuple[int, int, int], standalone: bool = True) -> dict[str, Any]:
    """A TRUNCATE of the table at order key `order`: no key, no row (Debezium's `op` `t`)."""
    record = event("c", order, after=row(0, ""), standalone=standalone)
    value = json.loads(record["value"])
    value["payload"].update({"op": "t", "after": None})
    return {"topic": TOPIC, "key": None, "value": dumps(value)}
