"""`cursor.pipeline` on a running streamer, with either renderer: a `$match` picks the
changes captured and a `$project` takes a field out of their documents, on the server;
the signal collection's changes (a snapshot's signal and watermarks) and a collection's
drop pass whatever the `$match` says, so a snapshot still runs and finishes. Against the
MongoDB test server (whose change streams run the stages after `$changeStream` with
mongo-java-server's aggregation) or a real deployment (TIDEMARK_MONGODB_URI)."""

from __future__ import annotations

import json

import pytest
from bson import json_util

from tests.support.mongo.capture import AS_CLIENT, connector, signal
from tests.support.snapshots import finished
from tests.support.streamer import payloads, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

PIPELINE = [
    {"$match": {"operationType": {"$in": ["insert", "replace"]}, "fullDocument.keep": True}},
    {"$project": {"fullDocument": {"secret": 0}}},
]


@pytest.mark.parametrize("rendering", ["compiled", "python"])
def test_a_match_picks_the_changes_and_a_project_drops_a_field_while_signals_pass(
    mongodb, mongo_db, tmp_path, rendering
):
    db = mongo_db
    db["p"].insert_many([{"_id": i, "keep": True, "secret": "s", "n": i} for i in range(5)])  # the snapshot's
    db["gone"].insert_one({"_id": 1})
    extra = {"cursor.pipeline": json.dumps(PIPELINE), "mongodb.rendering": rendering}
    c = connector(mongodb, tmp_path, db.name, extra)

    def events() -> list[dict]:
        return payloads(c, f"{c.prefix}.{db.name}.p")

    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        db["p"].insert_many(
            [{"_id": 10, "keep": True, "secret": "s"}, {"_id": 11, "keep": False, "secret": "s"}]
        )
        db["p"].update_one({"_id": 10}, {"$set": {"n": 1}})  # an update: not picked
        db["p"].replace_one({"_id": 11}, {"keep": True, "secret": "s", "replaced": 1})  # picked now
        db["p"].delete_one({"_id": 0})  # not picked
        db["gone"].drop()  # passes: the Delta merge lands a collection's end
        signal(c, "snap-piped", {"data-collections": [f"{db.name}.p"]})  # its signal and watermarks pass
        wait_for(lambda: finished(c, "snap-piped") is not None, 90, interval=0.3, message="the snapshot")
        db["p"].insert_one({"_id": 12, "keep": True, "secret": "s"})  # the last: all before it is in the log
        wait_for(
            lambda: any(e["op"] == "c" and '"_id": 12' in e["after"] for e in events()), 60, message="sync"
        )
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    streamed = [
        (e["op"], json_util.loads(e["after"], json_options=AS_CLIENT)) for e in events() if e["op"] != "r"
    ]
    assert streamed == [
        ("c", {"_id": 10, "keep": True}),
        ("u", {"_id": 11, "keep": True, "replaced": 1}),
        ("c", {"_id": 12, "keep": True}),
    ]
    snapshot = {json_util.loads(e["after"])["_id"]: e for e in events() if e["op"] == "r"}
    assert sorted(snapshot) == [1, 2, 3, 4, 10, 11]  # a snapshot reads the collection as it is
    assert "gone" in json.dumps(payloads(c, c.prefix))  # the drop of `gone`
