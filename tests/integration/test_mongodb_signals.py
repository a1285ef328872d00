"""MongoDB signals as users write them: a signal document with an `_id` of any type (an
ObjectId, what `insertOne` without one gives; an int; a string) runs its snapshot on
every reader (in process, the Spark chunk job) in both release modes, named everywhere by
one text; and `additional-conditions` in Debezium's MongoDB form (a JSON query document)
or with the grammar's ObjectId, date and dotted-path forms read the documents they name.
Against the MongoDB test server, or a real deployment when TIDEMARK_MONGODB_URI is set."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from bson import ObjectId, json_util

from tests.support.mongo.capture import (
    AS_CLIENT,
    SIGNALS,
    connector,
    delta_documents,
    signal,
    source_documents,
    synced,
)
from tests.support.snapshots import finished
from tests.support.streamer import payloads, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def db(mongo_db):
    return mongo_db


def insert_signal(db, kind: str, n: int, data: dict) -> str:
    """A signal inserted as a user does, with an `_id` of `kind`; the text it is named by,
    written out here rather than computed by the code under test."""
    signals = db[SIGNALS]
    if kind == "objectid":  # no `_id`: MongoDB gives an ObjectId; `data` as a document
        oid = signals.insert_one({"type": "execute-snapshot", "data": data}).inserted_id
        assert isinstance(oid, ObjectId)
        return f'{{"$oid": "{oid}"}}'
    if kind == "int":
        signals.insert_one({"_id": 100 + n, "type": "execute-snapshot", "data": json.dumps(data)})
        return f'{{"$numberInt": "{100 + n}"}}'
    signals.insert_one({"_id": f"sig-{n}", "type": "execute-snapshot", "data": json.dumps(data)})
    return f"sig-{n}"


def read_ids(c, db, collection: str) -> list:
    topic = f"{c.prefix}.{db.name}.{collection}"
    return [
        json_util.loads(e["after"], json_options=AS_CLIENT)["_id"]
        for e in payloads(c, topic)
        if e["op"] == "r"
    ]


@pytest.mark.parametrize("kind", ["objectid", "int", "string"])
def test_a_signal_with_an_id_of_any_type_runs_its_snapshot_in_process(mongodb, db, tmp_path, kind):
    """Both release modes (the in-process reader releases a lakehouse request as events);
    status names the snapshot by the signal's text."""
    db["t"].insert_many([{"_id": i, "v": i} for i in range(12)])
    c = connector(mongodb, tmp_path, db.name, {"incremental.snapshot.chunk.size": 5})
    proc = start_process(c)
    refs = []
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        for n, release in enumerate(("stream", "lakehouse")):
            data = {"data-collections": [f"{db.name}.t"], "tidemark.release": release}
            refs.append(insert_signal(db, kind, n, data))
            wait_for(
                lambda: finished(c, refs[-1]) is not None, 60, interval=0.3, message=f"snapshot {refs[-1]}"
            )
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(read_ids(c, db, "t")) == sorted([*range(12)] * 2)
    for ref in refs:
        done = finished(c, ref)
        assert done["signal_id"] == ref and done["tables"][0]["windows_done"] >= 3


@pytest.mark.parametrize("release", ["stream", "lakehouse"])
def test_the_spark_chunk_job_finds_a_signal_with_an_id_of_any_type(mongodb, db, tmp_path, spark, release):
    """One streamer, three signals in turn (an ObjectId `_id` given to `--signal` in
    compact relaxed Extended JSON, an int given as a bare number, a string), each read by
    the job; then the merge lands every collection equal to its source (a lakehouse
    release's staged files live in a folder named for the signal, which for an ObjectId
    must be a path Spark reads)."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job

    kinds = {"objectid": "by_oid", "int": "by_int", "string": "by_str"}
    for name in kinds.values():
        db[name].insert_many([{"_id": i, "v": f"{name} {i}"} for i in range(40)])
    c = connector(mongodb, tmp_path / "connector", db.name)
    staging = str(tmp_path / "staging")
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        for n, (kind, name) in enumerate(kinds.items()):
            data = {
                "data-collections": [f"{db.name}.{name}"],
                "tidemark.reader": "spark",
                "tidemark.release": release,
                "tidemark.chunk-size": 15,
            }
            ref = insert_signal(db, kind, n, data)
            given = {"objectid": ref.replace(" ", ""), "int": str(100 + n), "string": ref}[kind]
            args = ["--config", str(c.path), "--staging", staging, "--parallelism", "2", "--signal", given]
            assert chunk_job(args) == 0
            wait_for(
                lambda ref=ref: finished(c, ref) is not None, 120, interval=0.3, message=f"snapshot {ref}"
            )
            (table,) = finished(c, ref)["tables"]
            assert (table["windows_done"], table["windows_total"]) == (3, 3)
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    root = str(tmp_path / "delta")
    run_local(spark, c.config(), root, str(tmp_path / "checkpoint"))
    for name in kinds.values():
        assert delta_documents(spark, root, f"{db.name}.{name}") == source_documents(db[name]), name


def test_debezium_form_and_typed_literal_filters_read_the_documents_they_name(mongodb, db, tmp_path):
    oids = sorted(ObjectId() for _ in range(10))
    docs = [
        {
            "_id": oid,
            "n": i,
            "color": "blue" if i % 2 else "red",
            "address": {"city": "Oslo" if i < 5 else "Bergen"},
            "placed": dt.datetime(2025, 3, 1 + i, 12, tzinfo=dt.UTC),
        }
        for i, oid in enumerate(oids)
    ]
    for name in ("as_object", "as_text", "by_grammar"):
        db[name].insert_many(docs)
    filters = {
        # Debezium's form, as an object in the signal's data and as text, Extended JSON values
        "as_object": {"color": "blue", "placed": {"$gte": {"$date": "2025-03-04T00:00:00Z"}}},
        "as_text": json.dumps(
            {"_id": {"$in": [{"$oid": str(oids[1])}, {"$oid": str(oids[7])}]}, "address.city": "Oslo"}
        ),
        # the grammar: an ObjectId, a date and a nested field without backquotes
        "by_grammar": f"_id > ObjectId('{oids[2]}') AND address.city = 'Oslo' AND placed < ISODate('2025-03-05')",
    }
    c = connector(mongodb, tmp_path, db.name, {"incremental.snapshot.chunk.size": 3})
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        for name, query in filters.items():
            condition = [{"data-collection": f"{db.name}.{name}", "filter": query}]
            signal(
                c,
                f"filter-{name}",
                {"data-collections": [f"{db.name}.{name}"], "additional-conditions": condition},
            )
            wait_for(lambda name=name: finished(c, f"filter-{name}") is not None, 60, message=name)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    by_n = {oid: i for i, oid in enumerate(oids)}
    read = {name: sorted(by_n[i] for i in read_ids(c, db, name)) for name in filters}
    assert read == {"as_object": [3, 5, 7, 9], "as_text": [1], "by_grammar": [3]}
