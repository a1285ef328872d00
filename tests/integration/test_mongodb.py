"""MongoDB beyond the conformance suite (documents of every type into Delta:
test_mongodb_documents.py): `_id`s of mixed types chunked in BSON order; the Spark
chunk job in both release modes; a `$where` filter refused with nothing run; a resume token the deployment no
longer has stops the streamer with the way back. Against the MongoDB test server, or a
real deployment when TIDEMARK_MONGODB_URI is set."""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from decimal import Decimal

import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Timestamp, json_util
from bson.dbref import DBRef

from tests.support.mongo.capture import (
    AS_CLIENT,
    connector,
    delta_documents,
    signal,
    source_documents,
    synced,
)
from tests.support.snapshots import finished, run_chunk_job_remotely, status
from tests.support.streamer import payloads, start_process, stop_process, wait_for, wait_process

pytestmark = pytest.mark.integration


@pytest.fixture
def db(mongo_db):
    return mongo_db


def finish(db, c, proc, signal_id: str) -> None:
    """Wait for the snapshot and everything streamed until now, then stop the streamer."""
    wait_for(lambda: finished(c, signal_id) is not None, 120, interval=0.3, message="the snapshot")
    synced(db, c)
    assert stop_process(proc) == 0


def typed_document(i: int) -> dict:
    """Every BSON type the connector maps, nested in documents and arrays."""
    return {
        "_id": i,
        "oid": ObjectId(f"{i:024x}"),
        "long": Int64(2**53 + i),
        "int": i,
        "double": i + 0.25,
        "decimal": Decimal128(Decimal(f"{i}.10")),
        "when": dt.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=dt.UTC),
        "bytes": Binary(bytes([i % 256, 0, 255]), 0),
        "uuid": Binary.from_uuid(uuid.UUID(int=i)),
        "flag": i % 2 == 0,
        "none": None,
        "nested": {"list": [1, "two", {"three": Int64(3)}], "empty": {}},
    }


@pytest.mark.parametrize("chunk", [2, 3])
def test_mixed_id_types_are_chunked_in_bson_order_each_document_once(mongodb, db, tmp_path, chunk):
    """Every `_id` type the test server can hold (it cannot sort JavaScript code, whose
    bracket `tests/unit/test_mongodb_id_order.py` checks), each window a bracket's range or
    the brackets beyond its bound; with windows of 2, an `_id` of null is a window's bound."""
    ids = [None, -5, 2.5, 7, Int64(10), "a", "b", "zz", {"k": 1}, {"k": 2}, Binary(b"\x01", 0), ObjectId()]
    ids += [False, True, dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2021, 1, 1, tzinfo=dt.UTC)]
    ids += [MinKey(), MaxKey(), Timestamp(5, 1), Timestamp(5, 2), Decimal128("7.5"), DBRef("c", 1)]
    ids += [Binary(b"\x00\x02", 0), dt.datetime(1960, 1, 1, tzinfo=dt.UTC), Int64(2**62), "", {}]
    db["mixed"].insert_many([{"_id": v, "n": i} for i, v in enumerate(ids)])
    c = connector(mongodb, tmp_path, db.name, {"incremental.snapshot.chunk.size": chunk})
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        signal(c, "snap-mixed", {"data-collections": [f"{db.name}.mixed"]})
        wait_for(lambda: finished(c, "snap-mixed") is not None, 60, interval=0.3, message="the snapshot")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    reads = [e for e in payloads(c, f"{c.prefix}.{db.name}.mixed") if e["op"] == "r"]
    got = [json_util.loads(e["after"], json_options=AS_CLIENT)["_id"] for e in reads]
    in_server_order = [d["_id"] for d in db["mixed"].find().sort("_id", 1)]
    assert got == in_server_order  # every document once, in the order MongoDB sorts `_id`s
    assert sorted(map(json_util.dumps, got)) == sorted(map(json_util.dumps, ids))
    assert finished(c, "snap-mixed")["tables"][0]["windows_done"] >= len(ids) // chunk


def test_id_ranges_are_answered_as_the_matcher_answers_them(db):
    """The `_id` index answers ranges (jvm/mongo/IdRangeIndex.java on the test server; a
    real server's B-tree): the same documents, in the same order, as the query the server
    can only answer by matching every document."""
    ids = [None, -5, 2.5, 7, Int64(10), "a", "b", "zz", {"k": 1}, ObjectId(), True, dt.datetime(2020, 1, 1)]
    db["ranged"].insert_many([{"_id": v, "n": i} for i, v in enumerate(ids)])
    db["ranged"].delete_one({"_id": "b"})
    db["ranged"].insert_one({"_id": "c", "n": 99})
    ranges = [
        {"$gt": -5, "$lte": Int64(10)}, {"$gte": 2.5, "$lt": 7}, {"$gt": "a"}, {"$lte": "c"}, {"$gt": 7},
        {"$lt": 0}, {"$gt": "a", "$lte": "zz"}, {"$gt": 100}, {"$gte": {"k": 0}},
    ]  # fmt: skip
    for bounds in ranges:
        indexed = list(db["ranged"].find({"_id": bounds}).sort("_id", 1))
        matched = list(
            db["ranged"].find({"$and": [{"_id": bounds}, {"n": {"$exists": True}}]}).sort("_id", 1)
        )
        assert indexed == matched, bounds
    assert [d["_id"] for d in db["ranged"].find({"_id": {"$gt": "a"}})] == ["c", "zz"]
    # A window to the end of the key space: its range, or any key of a later type bracket.
    later = [
        "string",
        "object",
        "array",
        "binData",
        "objectId",
        "bool",
        "date",
        "timestamp",
        "regex",
        "maxKey",
    ]
    for low in (2.5, "a", {"k": 0}):
        window = {"$or": [{"_id": {"$gt": low}}, {"_id": {"$type": later}}]}
        indexed = [d["_id"] for d in db["ranged"].find(window).sort("_id", 1)]
        matched = [
            d["_id"] for d in db["ranged"].find({"$and": [window, {"n": {"$exists": True}}]}).sort("_id", 1)
        ]
        assert indexed == matched, low
    everything_after = {"$or": [{"_id": {"$gt": 2.5}}, {"_id": {"$type": later}}]}
    assert [d["_id"] for d in db["ranged"].find(everything_after).sort("_id", 1)] == [
        7, Int64(10), "a", "c", "zz", {"k": 1}, ids[9], True, dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    ]  # fmt: skip
    # A window from the start of the key space: its range, or any key of an earlier bracket.
    up_to_seven = {"$or": [{"_id": {"$lte": 7}}, {"_id": {"$type": ["minKey", "null"]}}]}
    numbers = ["double", "int", "long", "decimal"]
    up_to_c = {"$or": [{"_id": {"$lte": "c"}}, {"_id": {"$type": ["minKey", "null", *numbers]}}]}
    assert [d["_id"] for d in db["ranged"].find(up_to_seven).sort("_id", 1)] == [None, -5, 2.5, 7]
    assert [d["_id"] for d in db["ranged"].find(up_to_c).sort("_id", 1)] == [
        None,
        -5,
        2.5,
        7,
        Int64(10),
        "a",
        "c",
    ]
    # Sorted by `_id`, the index's order is the answer's: no sort, and a skip and limit stop
    # the walk (IdOrderedCollection), with the same documents as matching every one.
    windows = (
        everything_after,
        up_to_seven,
        up_to_c,
        {"_id": {"$gt": -5}},
        {"_id": {"$gt": "a", "$lte": "zz"}},
    )
    for window in (*windows, {}):
        matched = [
            d["_id"] for d in db["ranged"].find({"$and": [window, {"n": {"$exists": True}}]}).sort("_id", 1)
        ]
        for skip in range(len(matched) + 1):
            walked = [
                d["_id"] for d in db["ranged"].find(window, {"_id": 1}).sort("_id", 1).skip(skip).limit(2)
            ]
            assert walked == matched[skip : skip + 2], (window, skip)


def varied(i: int) -> dict:
    """A document whose fields and types depend on `i`."""
    if i % 3 == 0:
        return {"_id": i, "v": i % 7, "ref": ObjectId(f"{i:024x}"), "amount": Decimal128(f"{i}.5")}
    if i % 3 == 1:
        return {
            "_id": i,
            "label": f"row {i}",
            "v": Int64(i),
            "nested": {"at": dt.datetime(2025, 1, 1, tzinfo=dt.UTC)},
        }
    return {"_id": i, "v": float(i), "tags": ["a", i], "empty": {}}


@pytest.mark.parametrize(
    ("release", "where"), [("stream", "own-spark"), ("lakehouse", "own-spark"), ("lakehouse", "connect")]
)
def test_the_spark_chunk_job_reads_id_ranges_on_its_executors(
    mongodb, db, tmp_path, spark, release, where, request, caplog
):
    """In a Spark of the job's own or attached to a Spark Connect server: the same windows,
    read by `--parallelism` executor tasks, each a contiguous part of the plan."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job

    # Documents of several shapes and types: a window staged for a stream release once
    # took the union of its documents' fields (nulls where one had none) and lost types.
    db["items"].insert_many([varied(i) for i in range(1200)])
    # no change while captured: its table is created from the released windows alone
    db["quiet"].insert_many([{"_id": f"q{i}", "at": dt.datetime(2025, 1, i + 1)} for i in range(20)])
    c = connector(mongodb, tmp_path / "connector", db.name)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        data = {
            "data-collections": [f"{db.name}.items", f"{db.name}.quiet"],
            "tidemark.reader": "spark",
            "tidemark.chunk-size": 150,
            "tidemark.release": release,
        }
        signal(c, "spark-1", data)
        db["items"].update_one({"_id": 3}, {"$set": {"v": 100}})  # while the job reads
        db["items"].delete_one({"_id": 4})
        args = ["--config", str(c.path), "--staging", str(tmp_path / "staging"), "--parallelism", "2"]
        if where == "connect":
            url = request.getfixturevalue("spark_connect")
            run_chunk_job_remotely(url, [*args, "--signal", "spark-1"], through_env=True)
        else:
            with caplog.at_level(logging.INFO, logger="spark_jobs"):
                assert chunk_job([*args, "--signal", "spark-1"]) == 0
            tasks = [
                r.getMessage().split(" in ")[0]
                for r in caplog.records
                if "task from window" in r.getMessage()
            ]
            # items' windows 0-7 and quiet's window 0, in plan order, dealt to two tasks
            assert sorted(tasks) == ["task from window 0: 4 windows", "task from window 4: 5 windows"]
        finish(db, c, proc, "spark-1")
    finally:
        if proc.poll() is None:
            proc.kill()
    windows = {t["table"]: (t["windows_done"], t["windows_total"]) for t in finished(c, "spark-1")["tables"]}
    assert windows == {f"{db.name}.items": (8, 8), f"{db.name}.quiet": (1, 1)}
    root = str(tmp_path / "delta")
    run_local(spark, c.config(), root, str(tmp_path / "checkpoint"))
    for name in ("items", "quiet"):
        merged = delta_documents(spark, root, f"{db.name}.{name}")
        assert merged == source_documents(db[name]), name


def test_a_chunk_job_whose_plan_fails_ends_its_waiting_tasks_and_reports_the_plans_error(
    mongodb, db, tmp_path, spark
):
    """The Python reader's tasks start while the driver plans (`spark_jobs/python_reader.py`):
    a plan refused (here a `$where` filter) ends them with nothing read and no watermark
    written, and the error is the plan's."""
    from cdc_core.errors import TidemarkError
    from spark_jobs.incremental_snapshot import main as chunk_job

    db["t"].insert_many([{"_id": i, "v": i} for i in range(10)])
    c = connector(mongodb, tmp_path / "connector", db.name)
    filters = [{"data-collection": f"{db.name}.t", "filter": '{"$where": "sleep(1000) || true"}'}]
    data = {
        "data-collections": [f"{db.name}.t"],
        "tidemark.reader": "spark",
        "additional-conditions": filters,
    }
    signal(c, "spark-bad", data)
    staging = tmp_path / "staging"
    args = ["--config", str(c.path), "--staging", str(staging), "--parallelism", "2", "--signal", "spark-bad"]
    with pytest.raises(
        TidemarkError, match=r"\$where is not allowed in a filter: it runs JavaScript on the server"
    ):
        chunk_job(args)
    assert sorted(p.name for p in staging.rglob("*") if p.is_file()) == []
    assert [d["type"] for d in db["debezium_signal"].find({})] == ["execute-snapshot"]


def test_a_where_filter_is_refused_and_nothing_runs(mongodb, db, tmp_path):
    db["t"].insert_many([{"_id": i, "v": i} for i in range(10)])
    c = connector(mongodb, tmp_path, db.name)
    proc = start_process(c)
    hostile = [
        '{"$where": "sleep(1000) || true"}',
        "$where = 'function() { return true }'",
        "v > 0 OR sleep(1000) = 0",  # (`this.v = 1` is a field path now, and no code)
        "v = 1; db.t.drop()",
    ]
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        for n, text in enumerate(hostile):
            filters = [{"data-collection": f"{db.name}.t", "filter": text}]
            signal(c, f"bad-{n}", {"data-collections": [f"{db.name}.t"], "additional-conditions": filters})
        wait_for(
            lambda: len((status(c).get("snapshots") or {}).get("failed_signals", [])) >= len(hostile),
            60,
            message="every hostile signal refused",
        )
        reasons = {f["id"]: f["reason"] for f in status(c)["snapshots"]["failed_signals"]}
        assert reasons["bad-0"] == "$where is not allowed in a filter: it runs JavaScript on the server"
        assert reasons["bad-1"].startswith("unexpected character '$' at offset 0")
        assert reasons["bad-2"].startswith("expected a comparison after column 'sleep'")
        assert "unexpected character ';'" in reasons["bad-3"]
        db["t"].update_one({"_id": 1}, {"$set": {"v": 50}})  # streaming goes on
        wait_for(lambda: any(e["op"] == "u" for e in payloads(c, f"{c.prefix}.{db.name}.t")), 60)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert db["t"].count_documents({}) == 10
    assert not [e for e in payloads(c, f"{c.prefix}.{db.name}.t") if e["op"] == "r"]


def test_a_first_start_begins_after_the_last_write_before_it(mongodb, db, tmp_path):
    """A first start streams from the deployment's operation time, which is the time of its
    newest operation, and `startAtOperationTime` includes that operation: the last write
    before the start was emitted as if it came after (found by a probe)."""
    db["t"].insert_many([{"_id": 1}, {"_id": 2}])
    db["t"].update_one({"_id": 2}, {"$set": {"v": 1}})  # the newest operation at the start
    c = connector(mongodb, tmp_path, db.name)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        db["t"].insert_one({"_id": 3})
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    events = [(e["op"], json_util.loads(e["after"])["_id"]) for e in payloads(c, f"{c.prefix}.{db.name}.t")]
    assert events == [("c", 3)]


def test_writes_while_a_streamer_that_saw_no_event_is_down_are_captured_after_its_restart(
    mongodb, db, tmp_path
):
    c = connector(mongodb, tmp_path, db.name)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "offsets.json").exists(), 30, message="a first offset")
        assert stop_process(proc) == 0
        db["quiet"].insert_many([{"_id": i} for i in range(3)])  # nothing runs
        proc = start_process(c)
        topic = f"{c.prefix}.{db.name}.quiet"

        def inserts() -> list[int]:  # (the new collection's snapshot may also read them: `r` events)
            return sorted(
                json_util.loads(e["after"], json_options=AS_CLIENT)["_id"]
                for e in payloads(c, topic)
                if e["op"] == "c"
            )

        wait_for(lambda: inserts() == [0, 1, 2], 30, message="the writes made while it was down")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_resume_token_the_deployment_no_longer_has_stops_with_the_way_back(mongo_test_server, tmp_path):
    """The test server keeps its history in memory: restarted, it no longer has the
    connector's token (as a real oplog that rolled over), and says so (code 286). On the
    test server even when the session runs against a real deployment, which the test
    cannot restart empty."""
    mongodb = mongo_test_server
    client = mongodb.client()
    name = f"mg_{uuid.uuid4().hex[:10]}"
    client[name]["t"].insert_one({"_id": 0})
    c = connector(mongodb, tmp_path, name)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        client[name]["t"].insert_one({"_id": 1})
        wait_for(lambda: len(payloads(c, f"{c.prefix}.{name}.t")) >= 1, 60, message="the event")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        client.close()
    mongodb.kill()
    mongodb.start()  # an empty deployment on the same address
    try:
        proc = start_process(c)
        assert wait_process(proc, 90, c.path.with_suffix(".log")) != 0
        text = c.path.with_suffix(".log").read_text()
        assert "resume token" in text and "snapshot" in text, text[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_history_the_test_server_forgets_is_lost_to_the_streams_before_it(mongo_test_server):
    """The test server's stand-in for an oplog that rolled over (`forget_history`: the
    MongoDB benchmark frees the history of its load so): a stream still reading before the
    forgotten point, one resumed from a token before it and one started at a time before
    it each fail with ChangeStreamHistoryLost (286), the connector's cue that its position
    is gone; a stream started where the history now starts reads what came after. On the
    test server even when the session runs against a real deployment (a real oplog rolls
    over by its size, on no command)."""
    from pymongo.errors import OperationFailure

    mongodb = mongo_test_server
    client = mongodb.client()
    db = client[f"mg_{uuid.uuid4().hex[:10]}"]
    start = client.admin.command("ping")["operationTime"]
    db["t"].insert_many([{"_id": i} for i in range(3)])
    opened = {"start_at_operation_time": start, "batch_size": 1, "max_await_time_ms": 100}
    behind = db["t"].watch(**opened)
    assert behind.try_next()["documentKey"] == {"_id": 0}
    token = behind.resume_token
    reply = mongodb.forget_history()
    assert reply["forgotten"] >= 3
    db["t"].insert_one({"_id": 3})
    lost = [
        behind.try_next,
        lambda: db["t"].watch(resume_after=token, max_await_time_ms=100).try_next(),
        lambda: db["t"].watch(**opened).try_next(),
    ]
    for read in lost:
        with pytest.raises(OperationFailure) as failed:
            read()
        assert failed.value.code == 286, failed.value
    behind.close()
    since = db["t"].watch(start_at_operation_time=reply["historyStart"], max_await_time_ms=100)
    assert since.try_next()["documentKey"] == {"_id": 3}
    since.close()
    client.drop_database(db.name)
    client.close()


def test_changes_taken_a_batch_at_a_time_move_the_resume_token_as_try_next_does(db, mongodb):
    """`take_batch` leaves pymongo's resume token (what its own resume after a network
    error uses) where reading the same changes one by one leaves it."""
    from bson.raw_bson import RawBSONDocument

    from cdc_core.connectors.mongodb.source import take_batch

    raw = mongodb.client(document_class=RawBSONDocument)
    start = db.client.admin.command("ping").get("operationTime")
    try:
        db["t"].insert_many([{"_id": i} for i in range(10)])
        opened = {"start_at_operation_time": start, "max_await_time_ms": 200, "batch_size": 10}
        one_by_one = raw[db.name]["t"].watch(**opened)
        tokens = []
        for _ in range(10):
            event = one_by_one.try_next()
            assert event is not None
            tokens.append(one_by_one.resume_token)
        in_batches = raw[db.name]["t"].watch(**opened)
        first = take_batch(in_batches, 4)
        assert [e["documentKey"]["_id"] for e in first] == [0, 1, 2, 3]
        assert in_batches.resume_token == tokens[3]
        rest = take_batch(in_batches, 100)
        assert [e["documentKey"]["_id"] for e in rest] == list(range(4, 10))
        assert in_batches.resume_token == one_by_one.resume_token == tokens[9]
        assert all(isinstance(e, RawBSONDocument) for e in first + rest)
    finally:
        raw.close()


def test_window_boundaries_are_every_chunk_size_th_id_in_server_order(mongodb, db, tmp_path):
    """The Spark chunk job plans its windows by a chain of `_id` index walks, one per
    window, across the type brackets of mixed `_id`s, and with a condition."""
    from cdc_core.connectors.mongodb.session import MongoSession
    from cdc_core.connectors.mongodb.shape import ID, collection_schema
    from cdc_core.schema.model import TableId
    from cdc_core.signals.conditions import condition_fields, parse_condition
    from cdc_core.snapshot.chunks import ChunkPlan

    ids = [-5, 2.5, Int64(10), *range(20, 60), "a", "b", *(f"s{i:02d}" for i in range(30)), {"k": 1}]
    ids += [ObjectId() for _ in range(25)] + [True, dt.datetime(2020, 1, 1, tzinfo=dt.UTC)]
    db["bounded"].insert_many([{"_id": v, "n": i} for i, v in enumerate(ids)])
    in_server_order = [d["_id"] for d in db["bounded"].find().sort("_id", 1)]
    session = MongoSession(connector(mongodb, tmp_path, db.name).config())
    try:
        schema = collection_schema(TableId(db.name, "bounded"))
        for size in (1, 7, 41, len(ids), len(ids) + 1):
            got = session.boundaries(ChunkPlan(schema, (ID,), None, None), size)
            assert [b[0] for b in got] == in_server_order[size - 1 :: size], size
        condition = parse_condition("n >= 10", condition_fields(schema))
        odd = [d["_id"] for d in db["bounded"].find({"n": {"$gte": 10}}).sort("_id", 1)]
        got = session.boundaries(ChunkPlan(schema, (ID,), condition, None), 9)
        assert [b[0] for b in got] == odd[8::9]
    finally:
        session.close()


def test_windows_read_as_raw_bson_give_what_the_python_reader_gives(mongodb, db, tmp_path):
    """`read_chunk_events` (raw `find` batches rendered by the transcoder, what the Spark
    chunk job's executors stage in lakehouse mode) equals `read_chunk` through the
    collection's type mapping: every type, mixed `_id`s, and documents the transcoder
    leaves to Python (Decimal128, JavaScript code) in their places."""
    from cdc_core.connectors.mongodb.session import MongoSession
    from cdc_core.connectors.mongodb.shape import DOCUMENT, ID, MongoTypeMapper, collection_schema
    from cdc_core.schema.model import TableId
    from cdc_core.snapshot.chunks import ChunkPlan

    documents = [typed_document(i) for i in range(300)]
    documents += [{"_id": v, "n": i} for i, v in enumerate(["a", 2.5, Int64(2**40), ObjectId(), {"k": 1}])]
    documents.append({"_id": "code", "f": Code("return 1")})
    db["typed"].insert_many(documents)
    session = MongoSession(connector(mongodb, tmp_path, db.name).config())
    try:
        schema = collection_schema(TableId(db.name, "typed"))
        plan = ChunkPlan(schema, (ID,), None, None)
        mapper = MongoTypeMapper()
        key, body = (mapper.map_column(c).convert for c in schema.columns)
        want = [(key(i), body(d)) for i, d in session.read_chunk(plan, None, None)]
        got = session.read_chunk_events(plan, None, None)
        assert got is not None
        assert list(zip(got[ID], got[DOCUMENT], strict=True)) == want
        assert len(want) == len(documents)
        lo, hi = (150,), (200,)  # a window inside the integers
        window = session.read_chunk_events(plan, lo, hi)
        assert (
            window[ID]
            == [key(i) for i, _ in session.read_chunk(plan, lo, hi)]
            == [str(i) for i in range(151, 201)]
        )
    finally:
        session.close()


def test_a_windows_replies_read_whole_follow_the_cursor_and_an_error_kills_it(mongodb, db, monkeypatch):
    """`raw_find.find_documents` sends `find` and `getMore` itself and hands each reply to
    the transcoder whole: small batches give the same documents in `_id` order, and a
    reply that fails to render kills the cursor on the server."""
    from bson import Int64

    from cdc_core.connectors.mongodb import raw_find, rendering
    from tests.support.mongo.commands import CommandLog

    db["r"].insert_many([{"_id": i, "v": f"value {i}"} for i in range(250)])
    ids, texts = raw_find.find_documents(db["r"], {"_id": {"$gt": 9}}, batch_size=7)
    assert ids == [str(i) for i in range(10, 250)]
    assert [json.loads(t)["v"] for t in texts] == [f"value {i}" for i in range(10, 250)]
    assert raw_find.find_documents(db["r"], {"_id": {"$gt": 1000}}) == ([], [])

    cursors: list[int] = []
    render = rendering.reply_documents

    def fails_on_the_second_reply(reply, *args):
        out = render(reply, *args)
        cursors.append(out[2])
        if len(cursors) == 2:
            raise ValueError("a reply the transcoder refused")
        return out

    log = CommandLog()
    monkeypatch.setattr(rendering, "reply_documents", fails_on_the_second_reply)
    with mongodb.client(event_listeners=[log]) as client, pytest.raises(ValueError, match="refused"):
        raw_find.find_documents(client[db.name]["r"], {}, batch_size=50)
    assert cursors[1] != 0
    kills = [(k.command["cursors"], k.reply.get("cursorsKilled")) for k in log.named("killCursors")]
    assert kills == [([Int64(cursors[1])], [cursors[1]])]  # the server killed the cursor left open
