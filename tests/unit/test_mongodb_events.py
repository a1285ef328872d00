"""MongoDB change events → log items and Debezium's MongoDB envelope, on change events in
the shapes MongoDB documents (tests/unit/data/mongodb_change_events.json, kept as data):
insert, update with its description (updated, removed and truncated fields), replace with
a pre-image, delete, a multi-document transaction, drop and invalidate, the cluster time
going back, and the signal collection. No server: the test server's events are checked by
the conformance suite; these are the documented shapes, whatever a server sends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from bson import json_util

from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.shape import DocumentShaper
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import PositionAdvance, RowChange, SchemaChange, TransactionBegin, TransactionCommit

CASES = json.loads((Path(__file__).parent / "data" / "mongodb_change_events.json").read_text())["cases"]
SIGNALS = TableId("shop", "debezium_signal")
SIGNAL_SCHEMA = TableSchema(
    SIGNALS, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)


def assembler() -> EventAssembler:
    return EventAssembler("tm", None, SIGNALS, SIGNAL_SCHEMA)


def described(item: Any) -> dict[str, Any]:
    """A log item in the terms of the data file."""
    if isinstance(item, TransactionBegin):
        return {"begin": item.id, "rank": item.rank, "standalone": item.standalone, "epoch": item.epoch}
    if isinstance(item, TransactionCommit):
        return {"commit": {k: item.position[k] for k in ("sec", "ord", "epoch")}}
    if isinstance(item, SchemaChange):
        return {"schema": item.kind, "affected": [str(t) for t in item.affected]}
    if isinstance(item, RowChange) and item.table.id == SIGNALS:
        return {"signal": list(item.after)}
    assert isinstance(item, RowChange), item
    shaper = DocumentShaper(item.table, f"tm.{item.table.id}")
    return {
        "row": item.op,
        "key": shaper.key(item.after or item.before),
        "before": shaper.row(item.before),
        "after": shaper.row(item.after),
        "updateDescription": (item.extra or {}).get("updateDescription"),
        "source": item.source,
    }


def matches(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """`got` has every field `want` names, equal (a `source` compared on the fields named)."""
    for name, value in want.items():
        if name == "source":
            if any(got["source"].get(k) != v for k, v in value.items()):
                return False
        elif got.get(name) != value:
            return False
    return True


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_documented_change_events_become_debeziums_records(case):
    feed = assembler()
    items = []
    for event in case["events"]:
        items += feed.feed(json_util.loads(json.dumps(event)))
    items += feed.close()
    got = [described(i) for i in items if not isinstance(i, PositionAdvance)]
    assert len(got) == len(case["items"]), got
    for have, want in zip(got, case["items"], strict=True):
        assert matches(have, want), (have, want)
    if "position" in case:
        assert json_util.loads(json.dumps(feed.position)) == json_util.loads(json.dumps(case["position"]))


def test_a_change_event_without_its_namespace_is_refused_by_name():
    event = json_util.loads(
        json.dumps(
            {
                "_id": {"_data": "82AB"},
                "operationType": "insert",
                "clusterTime": {"$timestamp": {"t": 1700000000, "i": 1}},
                "documentKey": {"_id": 1},
                "fullDocument": {"_id": 1},
            }
        )
    )
    with pytest.raises(TidemarkError, match="without its namespace"):
        assembler().feed(event)


def test_a_restart_inside_a_transaction_resumes_from_before_it():
    """Every event of a transaction carries the position before the transaction as its
    restart point: reading again from there gives the whole transaction again."""
    case = next(c for c in CASES if c["name"].startswith("a multi-document transaction"))
    feed = assembler()
    first = feed.feed(json_util.loads(json.dumps(case["events"][0])))
    begin = next(i for i in first if isinstance(i, TransactionBegin))
    assert begin.restart == {}  # nothing before it: the stream's start
    feed.feed(json_util.loads(json.dumps(case["events"][1])))
    later = feed.feed(json_util.loads(json.dumps(case["events"][2])))
    second = next(i for i in later if isinstance(i, TransactionBegin))
    assert second.restart["resume_token"] == {"_data": "8263A1B2C3000000052B02"}
