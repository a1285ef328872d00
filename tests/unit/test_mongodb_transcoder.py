"""The compiled MongoDB renderer (`mongodb.rendering: compiled`) writes the same records,
byte for byte, as the Python path: on the documented change events of
`data/mongodb_change_events.json` and on documents of every BSON type (built by hand:
the deprecated types, dates of any year, what pymongo cannot hold), under each converter
setting, and it renders every one of them itself. Events it leaves to Python
(transactions, drops, the signal collection, malformed BSON) come out the same too, in
the same order and under the same positions. A change that cannot be read follows
event.processing.failure.handling.mode on both paths."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from bson import (
    Binary,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    Timestamp,
    encode,
    json_util,
)
from bson.codec_options import CodecOptions

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.connector import PROPERTIES
from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.field_rules import FieldRules
from cdc_core.connectors.mongodb.source import MongoSource
from cdc_core.events.envelope import CONTEXT_HEADERS
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.schema.model import TableId
from cdc_core.source import PositionAdvance, RenderedChanges
from tests.support.mongo.bson_bytes import (
    NULL,
    binary,
    change_event,
    date,
    decimal128,
    doc_of,
    int32,
    random_document,
    sub,
    symbol,
    text,
)
from tests.unit.test_mongodb_java_texts import CASES as JAVA_CASES
from tests.unit.test_mongodb_java_texts import value_bytes

CASES = json.loads((Path(__file__).parent / "data" / "mongodb_change_events.json").read_text())["cases"]
CODEC = CodecOptions(tz_aware=True)
NOW_NS = 1_800_000_000_123_456_789
SETTINGS = {
    "with schemas": "",
    "schemas apart (Parquet log)": "sink.type: local\nsink.local.format: parquet\n",
    "schemaless, references": "key.converter.schemas.enable: false\nvalue.converter.schemas.enable: false\n",
    "no tombstones, no metadata": "tombstones.on.delete: false\nprovide.transaction.metadata: false\n",
    "updates skipped": "skipped.operations: u\n",
}


def source(tmp_path: Path, extra: str = "") -> MongoSource:
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: m\nconnector.class: mongodb\ntopic.prefix: tm\nmongodb.connection.string: mongodb://h:1\n"
        "signal.data.collection: shop.debezium_signal\n" + extra
    )
    return MongoSource(load_config(path, PROPERTIES, environ={}), None)


def assembler_of(src: MongoSource) -> EventAssembler:
    mode = src.config.get("event.processing.failure.handling.mode")
    rules = FieldRules.of(src.config)
    return EventAssembler("tm", None, src.signal, src.signal_schema, failure_mode=mode, field_rules=rules)


def through_python(src: MongoSource, raws: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    assembler = assembler_of(src)
    items = []
    for raw in raws:
        items += assembler.feed_raw(raw)
    items += assembler.close()
    return items, assembler.position


def through_renderer(src: MongoSource, raws: list[Any]) -> tuple[list[Any], dict[str, Any], int]:
    assembler = assembler_of(src)
    renderer = rendering.Renderer(assembler, CODEC, bool(src.config.get("provide.transaction.metadata")))
    items = renderer.items(raws, None) + assembler.close()
    return items, assembler.position, sum(len(i.rows) for i in items if isinstance(i, RenderedChanges))


def records(src: MongoSource, items: list[Any]) -> tuple[list[tuple[Any, ...]], Any]:
    tracker = AckTracker()
    dispatcher = Dispatcher(src.config, src, tracker)
    out = dispatcher.process(items)
    run_id = CONTEXT_HEADERS[3]  # this run's id: one per dispatcher
    got = [
        (r.topic, r.key, r.value, [h for h in r.headers if h[0] != run_id], r.key_schema, r.value_schema)
        for r, _ in out
    ]
    for _, entry in out:
        tracker.ack(entry)
    return got, tracker.take_committable()


def same_records(tmp_path: Path, raws: list[Any], extra: str = "") -> int:
    src = source(tmp_path, extra)
    python_items, python_position = through_python(src, raws)
    rendered_items, rendered_position, rendered = through_renderer(src, raws)
    want, want_last = records(src, python_items)
    got, got_last = records(src, rendered_items)
    assert len(got) == len(want)
    for have, expected in zip(got, want, strict=True):
        assert have == expected
    assert got_last == want_last
    assert rendered_position == python_position
    return rendered


@pytest.fixture(autouse=True)
def fixed_clock(monkeypatch):
    monkeypatch.setattr(time, "time_ns", lambda: NOW_NS)
    monkeypatch.setattr(time, "time", lambda: NOW_NS / 1e9)


def raw_events(case: dict[str, Any]) -> list[bytes]:
    return [encode(json_util.loads(json.dumps(e))) for e in case["events"]]


@pytest.mark.parametrize("setting", SETTINGS, ids=list(SETTINGS))
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_documented_events_give_the_python_paths_records(tmp_path, case, setting):
    same_records(tmp_path, raw_events(case), SETTINGS[setting])


def event(i: int, kind: str, document: dict[str, Any] | None, key: Any = None, **extra: Any) -> bytes:
    change: dict[str, Any] = {
        "_id": {"_data": f"82{i:030X}"},
        "operationType": kind,
        "clusterTime": Timestamp(1_800_000_000 + i // 3, i % 3 + 1),
        "wallTime": dt.datetime(2026, 11, 28, 12, 0, 0, (i % 1000) * 1000, tzinfo=dt.UTC),
        "ns": {"db": "shop", "coll": "orders" if i % 4 else "users"},
        "documentKey": {"_id": key if key is not None else (document or {}).get("_id", i)},
        **extra,
    }
    if document is not None:
        change["fullDocument"] = document
    return encode(change)


DOUBLES = [0.0, -0.0, 1.5, -2.25, 1e-3, 9.999e-4, 1e7, 9999999.5, 1e21, 1.7976931348623157e308, 5e-324,
           0.1, 1 / 3, 123456789.125, float("nan"), float("inf"), float("-inf"), 2.5e-5, 100.0]  # fmt: skip
STRINGS = [
    "",
    "plain",
    'quote " back \\ slash',
    "tab\tnew\nline\r\b\f",
    "\x00\x01\x1f\x7f",
    "é ü 🙂 \u2028 /",
]


def every_type(i: int) -> dict[str, Any]:
    return {
        "_id": i,
        "double": DOUBLES[i % len(DOUBLES)],
        "string": STRINGS[i % len(STRINGS)],
        "nested": {"a": [1, Int64(2), {"b": None}], "": {}, "e": []},
        "binary": Binary(bytes(range(i % 7)), [0, 4, 3, 128, 5][i % 5]),
        "uuid": Binary(uuid.UUID(int=i).bytes, 4),
        "oid": ObjectId(f"{i:024x}"),
        "flags": [True, False],
        "date": dt.datetime(
            1970 + i % 9000, 1 + i % 12, 1 + i % 28, i % 24, 0, 0, (i % 1000) * 1000, tzinfo=dt.UTC
        ),
        "old date": dt.datetime(1900 - i % 1899, 6, 1, tzinfo=dt.UTC),
        "int32": [2**31 - 1, -(2**31), 0],
        "int64": [Int64(2**63 - 1), Int64(-(2**63)), Int64(7)],
        "ts": Timestamp(1_700_000_000 + i, i),
        "keys": [MinKey(), MaxKey()],
        'name " with \\ quote\n': "value",
    }


def test_documents_of_every_type_give_the_python_paths_records(tmp_path):
    raws = []
    for i in range(120):
        doc = every_type(i)
        kind = ["insert", "update", "replace", "delete"][i % 4]
        extra: dict[str, Any] = {}
        if kind == "update":
            extra["updateDescription"] = {
                "updatedFields": {
                    "double": doc["double"],
                    "nested.a": doc["nested"]["a"],
                    "date": doc["date"],
                },
                "removedFields": ["gone"] if i % 8 == 1 else [],
                "truncatedArrays": [{"field": "flags", "newSize": 1}] if i % 8 == 5 else [],
            }
        if kind in ("update", "replace", "delete") and i % 3 == 0:
            extra["fullDocumentBeforeChange"] = every_type(i + 1000)
        raws.append(event(i, kind, None if kind == "delete" else doc, key=doc["_id"], **extra))
    for setting in SETTINGS.values():
        assert same_records(tmp_path, raws, setting) == len(raws)


KEYS = [ObjectId("65a1b2c3d4e5f60718293a4b"), "text-key", Int64(2**40), 3.5, {"a": 1, "b": [1, 2]},
        dt.datetime(2020, 1, 1, tzinfo=dt.UTC), Binary(b"\x01\x02", 0), True]  # fmt: skip


def test_keys_of_every_type_give_the_python_paths_keys(tmp_path):
    raws = [event(i, "insert", {"_id": key, "n": i}, key=key) for i, key in enumerate(KEYS)]
    assert same_records(tmp_path, raws) == len(raws)


def test_every_value_mongodb_stores_is_rendered_compiled_with_the_python_paths_bytes(tmp_path):
    """Decimal128, regular expressions, code (with scope), DBRef-shaped documents, the old
    binary subtype, repeated names, dates outside years 1-9999 and the deprecated types
    went the Python way, one event at a time, or stopped it (a date past 9999: pymongo
    raised `year 10000 is out of range` on every restart)."""
    values = [(case["name"], value_bytes(case)) for case in JAVA_CASES]
    raws = []
    for i, (_, value) in enumerate(values):
        full = doc_of(("_id", int32(i)), ("v", value), ("n", int32(i)))
        kind = ["insert", "update", "replace", "delete"][i % 4]
        raws.append(
            change_event(
                i,
                kind,
                None if kind == "delete" else full,
                int32(i),
                before=full if kind != "insert" and i % 3 == 0 else None,
                updated=doc_of(("v", value)) if kind == "update" else None,
            )
        )
    for setting in SETTINGS.values():
        assert same_records(tmp_path, raws, setting) == len(raws)


def test_keys_of_the_types_pymongo_cannot_hold_and_a_null_key_give_the_python_paths_keys(tmp_path):
    """A collection may hold one document whose `_id` is null: its change stopped the
    streamer ("without the document's _id")."""
    keys = [date(253402300800000), decimal128(0, 0xB040000000000000), symbol("s"), binary(2, b"ab"),
            sub(doc_of(("$id", int32(1)), ("$ref", text("c")))), binary(0x8A, b"x"), NULL]  # fmt: skip
    raws = [
        change_event(i, "insert", doc_of(("_id", key), ("n", int32(i))), key) for i, key in enumerate(keys)
    ]
    assert same_records(tmp_path, raws) == len(raws)


def test_random_documents_of_every_type_built_by_hand_give_the_python_paths_records(tmp_path):
    rng = random.Random(20261201)
    raws = []
    for i in range(240):
        full = random_document(rng, id_value=int32(i))
        kind = ["insert", "update", "replace", "delete"][i % 4]
        raws.append(
            change_event(
                i,
                kind,
                None if kind == "delete" else full,
                int32(i),
                before=random_document(rng, id_value=int32(i)) if kind != "insert" and i % 2 else None,
                updated=random_document(rng) if kind == "update" else None,
            )
        )
    assert same_records(tmp_path, raws) == len(raws)


def test_changes_given_as_memoryviews_are_rendered(tmp_path):
    """pymongo hands a change of 4 KiB or more as a memoryview of its reply: the compiled
    renderer refused it (`'memoryview' object cannot be cast as 'bytes'`)."""
    raws = [event(i, "insert", {"_id": i, "pad": "x" * (5000 if i % 2 else 10)}) for i in range(6)]
    assert same_records(tmp_path, [memoryview(r) for r in raws]) == len(raws)


def test_transactions_drops_and_signals_between_rendered_changes_keep_their_places(tmp_path):
    raws = []
    for case in CASES:
        raws += [event(900 + len(raws), "insert", {"_id": len(raws)})]
        raws += raw_events(case)
    rendered = same_records(tmp_path, raws)
    assert rendered >= len(CASES)


def test_random_documents_give_the_python_paths_records(tmp_path):
    rng = random.Random(20261128)

    def value(depth: int) -> Any:
        pick = rng.randrange(9 if depth < 3 else 6)
        if pick == 0:
            return rng.choice([rng.uniform(-1e12, 1e12), rng.random() * 10 ** rng.randint(-30, 30), math.pi])
        if pick == 1:
            return "".join(
                chr(rng.choice([rng.randrange(0, 128), rng.randrange(128, 0x2FFF)])) for _ in range(6)
            )
        if pick == 2:
            return rng.randrange(-(2**31), 2**31)
        if pick == 3:
            return Int64(rng.randrange(-(2**63), 2**63))
        if pick == 4:
            return dt.datetime.fromtimestamp(rng.randrange(-(2**35), 2**37) / 1000, tz=dt.UTC)
        if pick == 5:
            return rng.choice([None, True, False])
        if pick == 6:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {f"k{n}": value(depth + 1) for n in range(rng.randrange(4))}

    raws = [event(i, "insert", {"_id": i, **{f"f{n}": value(0) for n in range(8)}}) for i in range(300)]
    assert same_records(tmp_path, raws) == len(raws)


def test_nothing_rendered_without_a_renderer_installed_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(rendering, "render", None)
    with pytest.raises(RuntimeError, match="make install"):
        rendering.Renderer(
            EventAssembler("tm", None, TableId("a", "b"), source(tmp_path).signal_schema), CODEC, True
        )


def test_the_items_of_a_restart_inside_a_transaction_are_taken_one_by_one(tmp_path):
    """Resumed inside a transaction (rows to suppress), rendered changes are expanded."""
    src = source(tmp_path)
    raws = [event(i, "insert", {"_id": i}) for i in range(3)]
    rendered, _, count = through_renderer(src, raws)
    assert count == 3
    resume = {"source": {"sec": 1, "ord": 0, "epoch": 0}, "in_txn": True, "rows_done": 0, "schema_seq": 0}
    dispatcher = Dispatcher(src.config, src, AckTracker(), resume)
    out = dispatcher.process([i for i in rendered if not isinstance(i, PositionAdvance)])
    assert [r.topic for r, _ in out] == ["tm.shop.users", "tm.shop.orders", "tm.shop.orders"]


def test_doubles_of_every_magnitude_and_halfway_cases_are_written_as_java_writes_them(tmp_path):
    """Shortest digits; of two equally close, the even one (2073240344371163.25 is
    `2.0732403443711632E15`)."""
    import struct

    rng = random.Random(7)
    doubles = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20_000)]
    doubles += [2.0732403443711633e15, *(float(2**52 + k) + 0.25 for k in range(0, 4000, 3))]
    doubles += [float(k) * 10.0**e for k in (1, 5, 9999999) for e in range(-320, 309, 7)]
    finite = [d for d in doubles if math.isfinite(d)]
    raws = [
        event(i, "insert", {"_id": i, "d": finite[lo : lo + 500]})
        for i, lo in enumerate(range(0, len(finite), 500))
    ]
    assert same_records(tmp_path, raws) == len(raws)


def test_a_document_repeating_a_name_keeps_its_first_place_and_last_value_on_both_paths(tmp_path):
    """As the Java driver's `BsonDocument` does, short or long (past 16 members the
    renderer looks names up in a map)."""

    def with_repeat(i: int, width: int) -> bytes:
        members = [(f"f{n}", int32(n)) for n in range(width)] + [("f0", text("last"))]
        return change_event(i, "insert", doc_of(("_id", int32(i)), *members), int32(i))

    raws = [
        event(0, "insert", {"_id": 0}),
        with_repeat(1, 3),
        with_repeat(2, 40),
        event(3, "insert", {"_id": 3}),
    ]
    assert same_records(tmp_path, raws) == 4
    src = source(tmp_path)
    items, _, _ = through_renderer(src, raws[1:2])
    got, _ = records(src, items)
    assert orjson.loads(got[0][2])["after"] == '{"_id": 1,"f0": "last","f1": 1,"f2": 2}'
