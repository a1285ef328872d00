"""No poison document: a document holding a date past year 9999, and one holding each
value the MongoDB test server stores (`tests/unit/data/mongodb_java_texts.json`, written
into the server as raw BSON), stream through `tidemark stream` with both renderers and
with `datetime_conversion=DATETIME_AUTO` in the connection string, each written as the
MongoDB Java driver writes it; a snapshot reads them the same way. The year-10000 date
stopped the streamer for good (`InvalidBSON: year 10000 is out of range` on every
restart); with DATETIME_AUTO the compiled renderer failed instead on a change of 4 KiB or
more (`'memoryview' object cannot be cast as 'bytes'`).

Values the test server refuses or changes on insert (binary subtypes other than 0, 3 and
4, 0x80 stored as 0; DBPointer, Code with scope, Symbol, Undefined stored as null, a
repeated name, text that is not UTF-8) are left out here, and tested as hand-built raw
BSON in the unit tests; against a real MongoDB (TIDEMARK_MONGODB_URI) they run here too."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from bson.codec_options import CodecOptions
from bson.datetime_ms import DatetimeMS
from bson.raw_bson import RawBSONDocument

from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.bson_text import elements
from tests.support.mongo.bson_bytes import binary, date, doc_of, int32, text
from tests.support.mongo.capture import connector, synced
from tests.support.streamer import payloads, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

CASES = json.loads((Path(__file__).parents[1] / "unit" / "data" / "mongodb_java_texts.json").read_text())[
    "cases"
]
YEAR_10000 = date(253402300800000)
UUID_BYTES = bytes(range(16))
EXTRA = [
    (
        f"binary subtype {t}, 16 bytes",
        binary(t, UUID_BYTES),
        f'{{"$binary": "{base64.b64encode(UUID_BYTES).decode()}","$type": "0{t}"}}',
    )
    for t in (3, 4)
]


def case_values() -> list[tuple[str, tuple[int, bytes], str]]:
    out = []
    for case in CASES:
        ((_, found),) = elements(bytes.fromhex(case["bson"]))
        out.append((case["name"], (found.kind, found.data), case["strict"]))
    return out + EXTRA


def store(collection, values) -> list[tuple[int, str, str]]:
    """Each value in a document of its own, `{"_id": i, "v": value}`, written as raw BSON
    into `collection`, those the server refuses or changes left out (found in a
    collection beside it first). Returns (i, name, strict text) of those written."""
    import pymongo.errors

    probe = collection.database[f"{collection.name}_probe"]
    raw = probe.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    kept, documents = [], []
    for i, (name, value, strict) in enumerate(values):
        document = doc_of(("_id", int32(i)), ("v", value))
        try:
            probe.insert_one(RawBSONDocument(document))
        except pymongo.errors.PyMongoError:
            continue
        if bytes(raw.find_one({"_id": i}).raw) == document:
            kept.append((i, name, strict))
            documents.append(RawBSONDocument(document))
    probe.drop()
    collection.insert_many(documents)
    return kept


RENDERINGS = [
    "python",
    pytest.param("compiled", marks=pytest.mark.skipif(not rendering.available(), reason="not built")),
]


@pytest.mark.parametrize(
    "option", ["", "&datetime_conversion=DATETIME_AUTO"], ids=["default", "DATETIME_AUTO"]
)
@pytest.mark.parametrize("mode", RENDERINGS)
def test_every_value_the_server_stores_streams_as_the_java_driver_writes_it(
    mongodb, mongo_db, tmp_path, mode, option
):
    db = mongo_db
    uri = mongodb.uri + (("&" if "?" in mongodb.uri else "?") + option.lstrip("&") if option else "")
    c = connector(mongodb, tmp_path, db.name, {"mongodb.rendering": mode, "mongodb.connection.string": uri})
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "offsets.json").exists(), 30, message="a first offset")
        kept = store(db["v"], case_values())
        names = {name for _, name, _ in kept}
        assert {"date year 10000", "date before year 1", "decimal NaN", "decimal -0", "regex options sorted",
                "dbref document in stored order", "code", "minkey", "timestamp past 2^31"} <= names  # fmt: skip
        # an update setting a year-10000 date, a change of more than 4 KiB, a delete
        db["v"].update_one({"_id": 0}, {"$set": {"late": DatetimeMS(253402300800000)}})
        db["big"].insert_one(
            RawBSONDocument(doc_of(("_id", int32(1)), ("pad", text("x" * 6000)), ("d", YEAR_10000)))
        )
        db["v"].delete_one({"_id": kept[-1][0]})
        synced(db, c)
        assert proc.poll() is None  # still streaming
        assert stop_process(proc) == 0
        proc = start_process(c)  # and a restart goes on from there
        db["v"].insert_one(RawBSONDocument(doc_of(("_id", int32(999)), ("d", YEAR_10000))))
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

    events = payloads(c, f"{c.prefix}.{db.name}.v")
    inserts = {e["after"]: e for e in events if e["op"] == "c"}
    for i, name, strict in kept:
        assert f'{{"_id": {i},"v": {strict}}}' in inserts, name
    (update,) = [e for e in events if e["op"] == "u"]
    assert (
        update["updateDescription"]["updatedFields"]
        == '{"late": {"$date": {"$numberLong": "253402300800000"}}}'
    )
    assert update["after"].endswith(',"late": {"$date": 253402300800000}}')
    assert [e["op"] for e in events].count("d") == 1
    assert '{"_id": 999,"d": {"$date": 253402300800000}}' in inserts
    (big,) = [e for e in payloads(c, f"{c.prefix}.{db.name}.big") if e["op"] == "c"]
    assert big["after"].endswith('"d": {"$date": 253402300800000}}')


def test_a_snapshot_reads_every_value_the_server_stores_as_the_stream_writes_it(mongodb, mongo_db, tmp_path):
    """In-process windows (`read_chunk`, pymongo never decoding a document) and raw `find`
    replies (`read_chunk_events`, the Spark chunk job's) give the stream's texts."""
    from cdc_core.connectors.mongodb.session import MongoSession
    from cdc_core.connectors.mongodb.shape import MongoTypeMapper, collection_schema
    from cdc_core.schema.model import TableId
    from cdc_core.snapshot.chunks import ChunkPlan

    db = mongo_db
    kept = store(db["v"], case_values())
    auto = mongodb.uri + ("&" if "?" in mongodb.uri else "?") + "datetime_conversion=DATETIME_AUTO"
    c = connector(mongodb, tmp_path, db.name, {"mongodb.connection.string": auto})
    session = MongoSession(c.config())
    try:
        plan = ChunkPlan(collection_schema(TableId(db.name, "v")), ("_id",), None)
        mapper = MongoTypeMapper()
        schema = collection_schema(TableId(db.name, "v"))
        key, body = (mapper.map_column(col).convert for col in schema.columns)
        rows = session.read_chunk(plan, None, None)
        texts = [body(document) for _, document in rows]
        assert texts == [f'{{"_id": {i},"v": {strict}}}' for i, _, strict in kept]
        assert [key(k) for k, _ in rows] == [str(i) for i, _, _ in kept]
        if rendering.available():
            assert session.read_chunk_events(plan, None, None)["document"] == texts
    finally:
        session.close()
