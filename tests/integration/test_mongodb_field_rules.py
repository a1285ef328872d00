"""`field.exclude.list` and `field.renames` through `tidemark stream` against the MongoDB
test server, with both renderers: inserts, updates (`updateDescription` by dotted names,
removed fields) and an incremental snapshot's reads, the same rules on each, a renamed
member at the end of its document as Debezium writes it."""

from __future__ import annotations

import pytest

from cdc_core.connectors.mongodb import rendering
from tests.support.mongo.capture import connector, signal, synced
from tests.support.snapshots import finished
from tests.support.streamer import payloads, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

RENDERINGS = [
    "python",
    pytest.param("compiled", marks=pytest.mark.skipif(not rendering.available(), reason="not built")),
]


@pytest.mark.parametrize("mode", RENDERINGS)
def test_fields_are_excluded_and_renamed_in_events_and_snapshot_reads(mongodb, mongo_db, tmp_path, mode):
    db = mongo_db
    db["people"].insert_many(
        [{"_id": i, "name": f"n{i}", "card": "4111", "address": {"number": i, "city": "x"}} for i in range(3)]
    )
    rules = {
        "mongodb.rendering": mode,
        "field.exclude.list": f"{db.name}.people.card,*.people.address.city",
        "field.renames": f"{db.name}.people.name:full_name,*.people.address.number:no",
    }
    c = connector(mongodb, tmp_path, db.name, rules)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        signal(c, "snap-rules", {"data-collections": [f"{db.name}.people"]})
        wait_for(lambda: finished(c, "snap-rules") is not None, 60, interval=0.3, message="the snapshot")
        db["people"].insert_one(
            {"_id": 10, "name": "new", "card": "5500", "address": {"number": 7, "city": "y"}}
        )
        db["people"].update_one(
            {"_id": 10}, {"$set": {"address.number": 8, "name": "renamed"}, "$unset": {"card": ""}}
        )
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

    events = payloads(c, f"{c.prefix}.{db.name}.people")
    reads = sorted(e["after"] for e in events if e["op"] == "r")
    assert reads == [f'{{"_id": {i},"address": {{"no": {i}}},"full_name": "n{i}"}}' for i in range(3)]
    (insert,) = [e for e in events if e["op"] == "c"]
    assert insert["after"] == '{"_id": 10,"address": {"no": 7},"full_name": "new"}'
    (update,) = [e for e in events if e["op"] == "u"]
    assert update["after"] == '{"_id": 10,"address": {"no": 8},"full_name": "renamed"}'
    described = update["updateDescription"]
    assert described["removedFields"] is None  # `card` is excluded
    # each rename moves its member to the end: `name`, then `address.number`
    assert described["updatedFields"] == '{"full_name": "renamed", "address.no": 8}'
