"""Canaries: the faults of stock mongo-java-server (1.47.0, `MongoTestServer --stock`) that
the project's change-stream layer (jvm/mongo/ChangeStreamBackend and the classes it uses)
exists for. Each test asserts one fault as the stock server shows it today and says what
MongoDB does instead; it fails once a release of mongo-java-server fixes that fault, and
then the layer's part for it can go. What neither the stock server nor the layer does as
MongoDB does (getMore does not wait for awaitData, resume tokens not in MongoDB's format)
is not pinned here.

Streams start just after the newest write (`start_at_operation_time` from a reply's
operationTime, else from the newest oplog entry, as the connector finds its start); a
stream opened with no start point fails (test_fault_watch_without_a_start_point_fails).
Each test has its own database: the stock server shows a collection's drop to every
stream of its database."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from bson import Binary, Int64, Timestamp
from pymongo.errors import ConfigurationError, OperationFailure

from tests.support.mongo.server import MongoTestServer

pytestmark = pytest.mark.integration

MARKER = "marker"  # the _id of the insert that ends the events a test looks at
COMMAND_NOT_FOUND = 59
EVENT_FIELDS = {"_id", "operationType", "fullDocument", "documentKey", "clusterTime"}


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MongoTestServer]:
    server = MongoTestServer(tmp_path_factory.mktemp("mongo-stock"), stock=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(stock: MongoTestServer) -> Iterator[Any]:
    client = stock.client()
    client.faults_setup.seed.insert_one({})  # the oplog is never empty: now() has an entry to go by
    yield client
    client.close()


@pytest.fixture
def db(client: Any) -> Iterator[Any]:
    name = f"faults_{uuid.uuid4().hex[:10]}"
    yield client[name]
    client.drop_database(name)


def now(client: Any) -> Timestamp:
    """Just after the newest write: a reply's operationTime, else the newest oplog entry's
    time (all the stock server offers)."""
    newest = client.admin.command("ping").get("operationTime")
    if newest is None:
        newest = client.local["oplog.rs"].find_one({}, {"ts": 1}, sort=[("ts", -1)])["ts"]
    return Timestamp(newest.time, newest.inc + 1)


def watch(target: Any, **options: Any) -> Any:
    return target.watch(start_at_operation_time=now(target.database.client), **options)


def events_until_marker(stream: Any, timeout: float = 5.0) -> list[dict]:
    """The stream's events before the insert of {_id: MARKER}."""
    seen: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = stream.try_next()
        if event is None:
            time.sleep(0.02)
        elif event["operationType"] == "insert" and event["documentKey"] == {"_id": MARKER}:
            return seen
        else:
            seen.append(event)
    raise AssertionError(f"no marker event within {timeout} s; events: {seen}")


def next_event(stream: Any, timeout: float = 0.3) -> dict | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = stream.try_next()
        if event is not None:
            return event
        time.sleep(0.02)
    return None


def command_not_found(run: Any) -> str:
    with pytest.raises(OperationFailure) as failure:
        run()
    assert failure.value.code == COMMAND_NOT_FOUND
    return str(failure.value.details["errmsg"])


# ---------------------------------------------------------------- not a fault


def test_stock_server_streams_inserts(db):
    """Sanity (no fault): inserts arrive with their document, key and cluster time, only on
    their collection's stream, and a stream resumed after an event goes on after it. Were
    this to fail, the fixture is broken and the fault tests below prove nothing."""
    stream = watch(db.c)
    db.c.insert_one({"_id": 1, "a": "x"})
    db.other.insert_one({"_id": 1})
    db.c.insert_one({"_id": 2})
    db.c.insert_one({"_id": MARKER})
    first, second = events_until_marker(stream)
    assert (first["operationType"], first["fullDocument"], first["documentKey"]) == (
        "insert",
        {"_id": 1, "a": "x"},
        {"_id": 1},
    )
    assert second["documentKey"] == {"_id": 2}
    assert isinstance(first["clusterTime"], Timestamp) and first["clusterTime"] < second["clusterTime"]
    resumed = db.c.watch(resume_after=first["_id"])
    assert [e["documentKey"] for e in events_until_marker(resumed)] == [{"_id": 2}]


# ---------------------------------------------------------------- events


def test_fault_events_have_no_ns_nor_wall_time(db):
    """Events carry only _id, operationType, fullDocument, documentKey and clusterTime; a
    delete's fullDocument is null. MongoDB 6.0 gives every event `ns` ({db, coll}) and
    `wallTime`, and a delete no fullDocument; without `ns` a database's or deployment's
    stream could not tell collections apart."""
    stream = watch(db.c)
    db.c.insert_one({"_id": 1})
    db.c.delete_one({"_id": 1})
    db.c.insert_one({"_id": MARKER})
    insert, delete = events_until_marker(stream)
    assert set(insert) == EVENT_FIELDS
    assert set(delete) == EVENT_FIELDS
    assert delete["operationType"] == "delete" and delete["fullDocument"] is None


def test_fault_update_document_key_is_the_update_spec(db):
    """An update's documentKey is the update's modifier document, not {_id}, so the changed
    document cannot be told (two documents changed by one update_many give two identical
    events). MongoDB: documentKey is {_id: ...} of the document changed."""
    db.c.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": 0}])
    stream = watch(db.c)
    db.c.update_one({"_id": 1}, {"$set": {"n": 1}})
    db.c.update_many({}, {"$inc": {"n": 1}})
    db.c.insert_one({"_id": MARKER})
    events = events_until_marker(stream)
    assert [e["operationType"] for e in events] == ["update"] * 3
    assert [e["documentKey"] for e in events] == [{"$set": {"n": 1}}, {"$inc": {"n": 1}}, {"$inc": {"n": 1}}]


def test_fault_update_has_no_update_description_but_its_modifier_fields(db):
    """An update has no updateDescription; its fullDocument (asked for or not) is the
    update's $set and $unset fields merged, an $unset field with the $unset's value.
    MongoDB: updateDescription {updatedFields: {a: 2}, removedFields: ['gone'],
    truncatedArrays: []} and no fullDocument unless asked for."""
    db.c.insert_one({"_id": 1, "a": 1, "gone": 1, "keep": "k"})
    stream = watch(db.c)
    db.c.update_one({"_id": 1}, {"$set": {"a": 2}, "$unset": {"gone": ""}})
    db.c.insert_one({"_id": MARKER})
    (update,) = events_until_marker(stream)
    assert update["operationType"] == "update"
    assert "updateDescription" not in update
    assert update["fullDocument"] == {"a": 2, "gone": ""}


def test_fault_update_lookup_of_a_deleted_document_gives_the_modifier_fields(db):
    """fullDocument: 'updateLookup' looks the document up (right while it exists), but of a
    document deleted since it gives the update's $set fields. MongoDB: fullDocument null."""
    db.c.insert_one({"_id": 1, "a": 1, "keep": "k"})
    db.c.insert_one({"_id": 2, "a": 1, "keep": "k"})
    stream = watch(db.c, full_document="updateLookup")
    db.c.update_one({"_id": 1}, {"$set": {"a": 2}})
    db.c.update_one({"_id": 2}, {"$set": {"a": 2}})
    db.c.delete_one({"_id": 1})
    db.c.insert_one({"_id": MARKER})
    gone, kept, _ = events_until_marker(stream)
    assert kept["fullDocument"] == {"_id": 2, "a": 2, "keep": "k"}  # not a fault
    assert gone["fullDocument"] == {"a": 2}


def test_fault_replace_arrives_as_an_update_keyed_by_the_whole_document(db):
    """A replace arrives as operationType 'update', its documentKey the whole new document
    and its fullDocument empty. MongoDB: operationType 'replace', documentKey {_id},
    fullDocument the new document."""
    db.c.insert_one({"_id": 1, "a": 1})
    stream = watch(db.c)
    db.c.replace_one({"_id": 1}, {"b": 2})
    db.c.insert_one({"_id": MARKER})
    (replace,) = events_until_marker(stream)
    assert replace["operationType"] == "update"
    assert replace["documentKey"] == {"_id": 1, "b": 2}
    assert replace["fullDocument"] == {}


def test_fault_find_and_modify_writes_no_events(db):
    """findAndModify (find_one_and_update/_replace/_delete) changes the documents but no
    change stream sees it. MongoDB: update, replace and delete events as for any write."""
    db.c.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 1}, {"_id": 3, "a": 1}])
    stream = watch(db.c)
    db.c.find_one_and_update({"_id": 1}, {"$set": {"a": 2}})
    db.c.find_one_and_replace({"_id": 2}, {"b": 2})
    db.c.find_one_and_delete({"_id": 3})
    db.c.insert_one({"_id": MARKER})
    assert events_until_marker(stream) == []
    assert list(db.c.find({"_id": {"$in": [1, 2, 3]}}, sort=[("_id", 1)])) == [
        {"_id": 1, "a": 2},
        {"_id": 2, "b": 2},
    ]


def test_fault_drop_reaches_every_stream_of_the_database_and_invalidates_none(db):
    """A collection's drop is an event {_id, operationType: 'drop', clusterTime} (no ns) on
    the stream of every collection of its database, and the dropped collection's stream
    goes on. MongoDB: only the dropped collection's stream sees the drop (with ns), then an
    'invalidate' event that ends it."""
    kept_stream, dropped_stream = watch(db.kept), watch(db.dropped)
    db.kept.insert_one({"_id": 1})
    db.dropped.insert_one({"_id": 1})
    db.dropped.drop()
    db.kept.insert_one({"_id": MARKER})
    db.dropped.insert_one({"_id": MARKER})
    _, drop = events_until_marker(kept_stream)
    assert set(drop) == {"_id", "operationType", "clusterTime"} and drop["operationType"] == "drop"
    assert [e["operationType"] for e in events_until_marker(dropped_stream)] == ["insert", "drop"]
    assert dropped_stream.alive


def test_fault_rename_writes_no_event(db):
    """renameCollection moves the collection but its stream sees nothing. MongoDB: a
    'rename' event (ns, to), then 'invalidate'."""
    db.before.insert_one({"_id": 1})
    stream = watch(db.before)
    db.before.rename("after")
    db.before.insert_one({"_id": MARKER})
    assert events_until_marker(stream) == []
    assert db.after.find_one() == {"_id": 1}


# ---------------------------------------------------------------- streams


def test_fault_watch_without_a_start_point_fails(db):
    """A stream opened with no start point (pymongo's plain watch()) fails: the aggregate's
    reply to an empty first batch carries neither cursor.postBatchResumeToken nor
    operationTime, one of which pymongo needs. MongoDB's reply carries both."""
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure, match="Expected field 'operationTime' missing"):
        db.c.watch()


def test_fault_replies_carry_no_operation_time(db, client):
    """No reply carries operationTime, so a client cannot learn the cluster time to start
    a stream at (the connector falls back on local.oplog.rs). A MongoDB replica set puts
    operationTime in every reply."""
    assert "operationTime" not in client.admin.command("ping")
    assert "operationTime" not in db.command("insert", "c", documents=[{"_id": 1}])


def test_fault_batches_carry_no_post_batch_resume_token(db):
    """Change-stream batches carry no postBatchResumeToken, so an idle stream's resume token
    does not move on. MongoDB: every aggregate and getMore reply of a change stream has
    cursor.postBatchResumeToken."""
    db.c.insert_one({"_id": 1})
    start = now(db.client)
    reply = db.command(
        "aggregate", "c", pipeline=[{"$changeStream": {"startAtOperationTime": start}}], cursor={}
    )
    assert reply["cursor"]["firstBatch"] == [] and "postBatchResumeToken" not in reply["cursor"]
    db.c.insert_one({"_id": 2})
    more = db.command("getMore", reply["cursor"]["id"], collection="c")
    assert [e["documentKey"] for e in more["cursor"]["nextBatch"]] == [{"_id": 2}]
    assert "postBatchResumeToken" not in more["cursor"]


def test_fault_resume_from_before_the_history_is_not_refused(db):
    """A stream resumed from a point older than anything the server holds (here the resume
    token of time 1 s, in the server's own format) replays what it has instead of failing.
    MongoDB refuses it with ChangeStreamHistoryLost (code 286), the connector's cue that
    its position is lost."""
    db.c.insert_one({"_id": 1})
    db.c.insert_one({"_id": MARKER})
    stream = db.c.watch(resume_after={"_data": "0000000100000001"})
    assert [e["documentKey"] for e in events_until_marker(stream)] == [{"_id": 1}]


def test_fault_database_stream_delivers_nothing(db):
    """A database's stream (aggregate: 1) opens, but no event ever reaches it. MongoDB: the
    events of every collection of the database."""
    start = now(db.client)
    whole, one = db.watch(start_at_operation_time=start), db.c.watch(start_at_operation_time=start)
    db.c.insert_one({"_id": 1})
    db.c.insert_one({"_id": MARKER})
    assert [e["documentKey"] for e in events_until_marker(one)] == [{"_id": 1}]
    assert next_event(whole) is None


def test_fault_deployment_stream_is_an_unknown_command(client):
    """A deployment's stream (aggregate: 1 on admin, allChangesForCluster) fails: the admin
    database knows no 'aggregate'. MongoDB: the events of every database."""
    message = command_not_found(lambda: client.watch(start_at_operation_time=now(client)))
    assert message == "no such command: 'aggregate'"


def test_fault_coll_mod_is_an_unknown_command(db):
    """collMod is unknown, so changeStreamPreAndPostImages cannot be turned on (pre-images
    for fullDocumentBeforeChange, post-images for fullDocument: 'required'). MongoDB 6.0
    turns them on per collection."""
    db.c.insert_one({"_id": 1})
    message = command_not_found(
        lambda: db.command("collMod", "c", changeStreamPreAndPostImages={"enabled": True})
    )
    assert message == "no such command: 'collMod'"


# ---------------------------------------------------------------- deployment


def test_fault_no_sessions(db, client):
    """No sessions: isMaster has no logicalSessionTimeoutMinutes, so pymongo refuses an
    explicit session, and startSession is unknown. MongoDB 6.0 has sessions."""
    assert "logicalSessionTimeoutMinutes" not in client.admin.command("isMaster")
    refused = pytest.raises(ConfigurationError, match="Sessions are not supported by this MongoDB deployment")
    with refused, client.start_session() as session:
        db.c.insert_one({"_id": 1}, session=session)
    assert (
        command_not_found(lambda: client.admin.command("startSession")) == "no such command: 'startSession'"
    )


def test_fault_no_transactions(db, client):
    """No multi-document transactions: a write sent in one (lsid, txnNumber,
    startTransaction, autocommit: false) applies at once and its event has no lsid nor
    txnNumber; commitTransaction and abortTransaction are unknown, so an abort keeps it.
    MongoDB: the writes show (in the oplog and to change streams, with lsid and txnNumber)
    only at commit, and an abort discards them."""
    stream = watch(db.c)
    transaction = {"lsid": {"id": Binary.from_uuid(uuid.uuid4())}, "txnNumber": Int64(1), "autocommit": False}
    db.command("insert", "c", documents=[{"_id": 1}], startTransaction=True, **transaction)
    assert db.c.find_one({"_id": 1}) == {"_id": 1}
    for command in ("commitTransaction", "abortTransaction"):
        message = command_not_found(lambda c=command: client.admin.command(c, **transaction))
        assert message == f"no such command: '{command}'"
    assert db.c.find_one({"_id": 1}) == {"_id": 1}
    db.c.insert_one({"_id": MARKER})
    (insert,) = events_until_marker(stream)
    assert set(insert) == EVENT_FIELDS


def test_fault_not_a_replica_set_member(client):
    """The server answers isMaster as a standalone (no setName, hosts nor primary), so a
    client must connect with directConnection=true, not replicaSet=. MongoDB's change
    streams need a replica set (or sharded cluster), whose members say so."""
    reply = client.admin.command("isMaster")
    assert reply["ismaster"] is True
    assert not {"setName", "hosts", "primary", "me"} & set(reply)


def test_fault_hello_is_an_unknown_command(client):
    """'hello' (which drivers use in place of isMaster since MongoDB 5.0) is unknown.
    MongoDB 6.0 answers it as isMaster."""
    assert command_not_found(lambda: client.admin.command("hello")) == "no such command: 'hello'"
