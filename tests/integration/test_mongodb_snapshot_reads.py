"""`mongodb.snapshot.read.preference`: a snapshot's boundary and chunk reads go to the
members it names, each after its window's low watermark (`majority`, `afterClusterTime`
at least the watermark insert's operation time, in the session the watermark was
written in), the watermarks to the primary, a cursor's `getMore`s to the member that
opened it; snapshots so read are exact under a writer, in process and on the Spark chunk
job's executors. Against the MongoDB test server (a one-member replica set: the
preference is sent, the primary answers) or a real replica set (TIDEMARK_MONGODB_URI),
where the reads land on secondaries."""

from __future__ import annotations

import random
import threading

import pytest

from cdc_core.connectors.mongodb import raw_find
from cdc_core.connectors.mongodb.session import MongoSession
from cdc_core.connectors.mongodb.shape import ID, collection_schema
from cdc_core.schema.model import TableId
from cdc_core.signals.actions import WINDOW_OPEN
from cdc_core.snapshot.chunks import ChunkPlan
from tests.support.mongo.capture import connector, delta_documents, signal, source_documents, synced
from tests.support.mongo.commands import record_clients
from tests.support.snapshots import finished
from tests.support.streamer import start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

TAGS = '[{"tidemark-test": "no member has this"}, {}]'
SECONDARY_PREFERRED = {"mode": "secondaryPreferred", "tags": [{"tidemark-test": "no member has this"}, {}]}


@pytest.fixture
def db(mongo_db):
    return mongo_db


def windows(log):
    """The `find`s of boundaries and chunks (sorted by `_id`; the probes of which `$type`
    aliases the server knows are not)."""
    return [s for s in log.named("find") if "sort" in s.command]


def with_option(uri: str, option: str) -> str:
    return f"{uri}{'&' if '?' in uri else '?'}{option}"


def test_a_windows_reads_go_where_the_preference_says_after_its_low_watermark(
    mongodb, db, tmp_path, monkeypatch
):
    db["w"].insert_many([{"_id": i, "v": f"value {i}"} for i in range(300)])
    log = record_clients(monkeypatch)
    extra = {
        "mongodb.snapshot.read.preference": "secondaryPreferred",
        "mongodb.snapshot.read.preference.tags": TAGS,
    }
    session = MongoSession(connector(mongodb, tmp_path, db.name, extra).config())
    try:
        plan = ChunkPlan(collection_schema(TableId(db.name, "w")), (ID,), None, None)
        hi = session.next_boundary(plan, None, 250)  # planned before any watermark
        session.write_watermark(WINDOW_OPEN, "window-1-open", {"window": "window-1"})
        rows = session.read_chunk(plan, None, hi)
        events = session.read_chunk_events(plan, None, hi)
        ids, _ = raw_find.find_documents(
            session.reads.collection(db.name, "w"), {}, batch_size=40, session=session.reads.session
        )
        primary, secondaries = session.client.primary, session.client.secondaries
    finally:
        session.close()
    assert hi == (249,) and [r[0].integer() for r in rows] == list(range(250))
    assert events is not None and events[ID] == [str(i) for i in range(250)]
    assert ids == [str(i) for i in range(300)]

    [boundary, *finds] = windows(log)
    [watermark] = [s for s in log.named("insert") if s.command.get("insert") == "debezium_signal"]
    lsid = watermark.command["lsid"]
    assert "$readPreference" not in watermark.command and watermark.address == primary
    lw_time = watermark.reply["operationTime"]
    assert boundary.command["$readPreference"] == SECONDARY_PREFERRED
    assert boundary.command["readConcern"] == {"level": "majority"}  # nothing to wait for yet
    assert boundary.command["lsid"] == lsid
    assert len(finds) == 3
    for find in finds:  # read_chunk, read_chunk_events, and the raw find of many batches
        assert find.command["$readPreference"] == SECONDARY_PREFERRED
        assert find.command["readConcern"]["level"] == "majority"
        assert find.command["readConcern"]["afterClusterTime"] >= lw_time
        assert find.command["lsid"] == lsid
        if secondaries:  # a real replica set: the member that answers has applied the watermark
            assert find.address in secondaries
    more = log.named("getMore")
    assert len(more) >= 300 // 40  # the raw find's batches
    assert {m.address for m in more} == {finds[-1].address}  # where its cursor is


def test_the_connection_strings_read_preference_does_not_send_a_snapshot_to_a_secondary(
    mongodb, db, tmp_path, monkeypatch
):
    """Snapshot reads follow `mongodb.snapshot.read.preference` alone (default `primary`):
    a connection string asking for secondaries (for the change stream, say) once sent a
    window's `find` to a secondary, with no read concern to wait for its watermark."""
    db["w"].insert_many([{"_id": i} for i in range(10)])
    log = record_clients(monkeypatch)
    c = connector(
        mongodb,
        tmp_path,
        db.name,
        {"mongodb.connection.string": with_option(mongodb.uri, "readPreference=secondaryPreferred")},
    )
    session = MongoSession(c.config())
    try:
        plan = ChunkPlan(collection_schema(TableId(db.name, "w")), (ID,), None, None)
        session.write_watermark(WINDOW_OPEN, "window-1-open", {"window": "window-1"})
        assert [r[0].integer() for r in session.read_chunk(plan, (4,), None)] == [5, 6, 7, 8, 9]
        session.read_chunk_events(plan, (4,), None)
        primary = session.client.primary
    finally:
        session.close()
    [watermark] = [s for s in log.named("insert") if s.command.get("insert") == "debezium_signal"]
    finds = windows(log)
    assert len(finds) == 2
    for find in finds:
        assert find.command.get("$readPreference", {"mode": "primary"}) == {"mode": "primary"}
        assert find.address == primary
        assert find.command["readConcern"] == {
            "level": "majority",
            "afterClusterTime": find.command["readConcern"]["afterClusterTime"],
        }
        assert find.command["readConcern"]["afterClusterTime"] >= watermark.reply["operationTime"]


@pytest.mark.parametrize("reader", ["inprocess", "spark"])
def test_a_snapshot_read_from_secondaries_under_a_writer_is_exact(mongodb, db, tmp_path, spark, reader):
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job

    items = db["items"]
    items.insert_many([{"_id": i, "v": 0, "label": f"row {i}"} for i in range(600)])
    extra = {
        "incremental.snapshot.chunk.size": 50,
        "mongodb.snapshot.read.preference": "secondaryPreferred",
        "mongodb.snapshot.read.preference.tags": TAGS,
    }
    c = connector(mongodb, tmp_path / "connector", db.name, extra)
    stop = threading.Event()

    def write() -> None:  # updates, deletes and inserts all through the snapshot
        rng, n = random.Random(7), 1000
        while not stop.wait(0.002):
            key = rng.randrange(650)
            kind = rng.random()
            if kind < 0.7:
                items.update_one({"_id": key}, {"$inc": {"v": 1}})
            elif kind < 0.85:
                items.delete_one({"_id": key})
            else:
                n += 1
                items.insert_one({"_id": n, "v": 0, "label": f"row {n}"})

    writer = threading.Thread(target=write, daemon=True)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        writer.start()
        data = {"data-collections": [f"{db.name}.items"]}
        if reader == "spark":
            data |= {"tidemark.reader": "spark", "tidemark.chunk-size": 50}
        signal(c, "snap-secondary", data)
        if reader == "spark":
            args = ["--config", str(c.path), "--staging", str(tmp_path / "staging"), "--parallelism", "2"]
            assert chunk_job([*args, "--signal", "snap-secondary"]) == 0
        wait_for(lambda: finished(c, "snap-secondary") is not None, 180, interval=0.3, message="the snapshot")
        stop.set()
        writer.join(30)
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    root = str(tmp_path / "delta")
    run_local(spark, c.config(), root, str(tmp_path / "checkpoint"))
    assert delta_documents(spark, root, f"{db.name}.items") == source_documents(items)
