"""Top-level document fields promoted to typed Delta columns (`lakehouse.promoted.fields`):
each column equals its field in the landed document, Extended JSON unwrapped, null where
absent or not convertible; a deleted document's tombstone keeps its columns as it keeps
its document; a field promoted later is filled for the rows already stored, and a
column's type widened when its promotion widens. Snapshot reads and streamed changes both
land through it. Against the MongoDB test server, or TIDEMARK_MONGODB_URI's deployment."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import yaml
from bson import Decimal128, Int64, ObjectId

from tests.support.mongo.capture import connector, signal, synced
from tests.support.snapshots import finished
from tests.support.streamer import start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

PLACED = dt.datetime(2025, 6, 30, 23, 59, 59, 250000, tzinfo=dt.UTC)


def order(i: int) -> dict:
    doc = {
        "_id": i,
        "status": ["new", "paid", "sent"][i % 3],
        "total": [Decimal128(Decimal(f"{i}.25")), i, Int64(10 * i), "n/a"][i % 4],
        "placed": PLACED + dt.timedelta(hours=i),
        "ref": ObjectId(f"{i:024x}"),
        "n": i,
        "qty": Int64(i * 1000),
    }
    if i % 5 == 0:
        del doc["status"]  # absent: null in its column
    return doc


def utc(moment: dt.datetime) -> dt.datetime:
    """A time pymongo read (naive in UTC, unless its client is zone-aware) as aware UTC."""
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def expected_columns(doc: dict) -> dict:
    total = doc["total"]
    if isinstance(total, Decimal128):
        total = total.to_decimal()
    return {
        "status": doc.get("status"),
        "total": None if total == "n/a" else Decimal(str(total)).quantize(Decimal("0.01")),
        "placed": utc(doc["placed"]),
        "ref": str(doc["ref"]),
        "n": doc["n"],
    }


def columns_of(spark, path: str, names: list[str], deleted: bool = False) -> dict:
    """`_id` → the named columns of the live rows (or the tombstones), times in UTC."""
    frame = spark.read.format("delta").load(path).where(f"_cdc_deleted = {str(deleted).lower()}")
    out = {}
    for row in frame.collect():
        values = {c: row[c] for c in names}
        for c, v in values.items():
            if isinstance(v, dt.datetime):  # Spark gives a naive time in the local zone
                values[c] = v.astimezone(dt.UTC)
        out[int(row["_id"])] = values
    return out


def run_streamer_until_synced(
    db, c, work=lambda: None, snapshot: str | None = None, after=lambda: None
) -> None:
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        if snapshot:
            signal(c, snapshot, {"data-collections": [f"{db.name}.orders"]})
        work()
        if snapshot:
            wait_for(lambda: finished(c, snapshot) is not None, 120, interval=0.3, message="the snapshot")
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_promoted_fields_land_as_typed_columns_filled_for_stored_rows_when_added(
    mongodb, mongo_db, tmp_path, spark
):
    from pyspark.sql import types as T

    from spark_jobs.delta_merge import run_local

    db = mongo_db
    db["orders"].insert_many([order(i) for i in range(12)])  # read by the snapshot
    fields = [
        f"{db.name}.orders.status:string",
        f"{db.name}.orders.total:decimal(12,2)",
        f"{db.name}.orders.placed:timestamp",
        f"{db.name}.orders.ref:string",
        f"{db.name}.orders.n:int",
    ]
    c = connector(
        mongodb,
        tmp_path,
        db.name,
        {"incremental.snapshot.chunk.size": 5, "lakehouse.promoted.fields": fields},
    )

    def changes() -> None:
        db["orders"].insert_many([order(i) for i in range(12, 16)])
        db["orders"].update_one({"_id": 1}, {"$set": {"status": "refunded", "n": 100}})

    run_streamer_until_synced(db, c, changes, snapshot="promote-1")
    root, checkpoint = tmp_path / "delta", str(tmp_path / "checkpoint")
    path = str(root / f"{db.name}.orders")
    run_local(spark, c.config(), str(root), checkpoint)

    names = ["status", "total", "placed", "ref", "n"]
    types = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    assert [types[n] for n in names] == [
        T.StringType(), T.DecimalType(12, 2), T.TimestampType(), T.StringType(), T.IntegerType()
    ]  # fmt: skip
    source = {d["_id"]: d for d in db["orders"].find()}
    landed = columns_of(spark, path, names)
    assert landed == {i: expected_columns(d) for i, d in source.items()}
    assert landed[1]["status"] == "refunded" and landed[10]["status"] is None and landed[3]["total"] is None

    # A field promoted later fills the stored rows; `n` widened from int to bigint.
    settings = yaml.safe_load(c.path.read_text())
    settings["lakehouse.promoted.fields"] = [
        *fields[:-1],
        f"{db.name}.orders.n:bigint",
        f"{db.name}.orders.qty:bigint",
    ]
    c.path.write_text(yaml.safe_dump(settings, sort_keys=False))

    def more() -> None:
        db["orders"].update_one({"_id": 4}, {"$set": {"n": 2**40}})
        db["orders"].delete_one({"_id": 2})

    run_streamer_until_synced(db, c, more)
    run_local(spark, c.config(), str(root), checkpoint)
    # The delete carried no document: its tombstone keeps the stored document and columns.
    assert columns_of(spark, path, names, deleted=True) == {2: expected_columns(order(2))}
    types = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    assert (types["n"], types["qty"]) == (T.LongType(), T.LongType())
    landed = columns_of(spark, path, ["n", "qty"])
    source = {d["_id"]: d for d in db["orders"].find()}
    assert landed == {i: {"n": d["n"], "qty": d["qty"]} for i, d in source.items()}
    assert landed[4]["n"] == 2**40 and landed[7]["qty"] == 7000  # 7: stored before qty was promoted
