"""MongoDB into Delta beyond whole documents, through one connector in
`capture.mode: change_streams` with `lakehouse.promoted.fields`, over two merges:

- updates that carry their change alone (`updateDescription`) land as whole documents,
  rebuilt from the stored row or the batch's last whole document (nested sets, unsets,
  array elements past the end, `$push`, `$pull`, a replace then an update, an insert then
  an update in one batch, an update of every document);
- promoted fields are typed columns equal to their field in the landed (rebuilt)
  document, Extended JSON unwrapped, null where absent or not convertible; a deleted
  document's tombstone keeps its columns as it keeps its document; a field promoted later
  is filled for the rows already stored, and a column widened when its promotion widens.

Against the MongoDB test server, or TIDEMARK_MONGODB_URI's deployment."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import yaml
from bson import Decimal128, Int64, ObjectId

from tests.support.mongo.capture import connector, delta_documents, signal, source_documents, synced
from tests.support.snapshots import finished
from tests.support.streamer import payloads, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

PLACED = dt.datetime(2025, 6, 30, 23, 59, 59, 250000, tzinfo=dt.UTC)
COLUMNS = ["status", "total", "placed", "ref", "n"]


def order(i: int) -> dict:
    doc = {
        "_id": i,
        "status": ["new", "paid", "sent"][i % 3],
        "total": [Decimal128(Decimal(f"{i}.25")), i, Int64(10 * i), "n/a"][i % 4],
        "placed": PLACED + dt.timedelta(hours=i),
        "ref": ObjectId(f"{i:024x}"),
        "n": i,
        "qty": Int64(i * 1000),
        "tags": ["a", "b", "c"],
        "dims": {"w": i, "h": 1},
    }
    if i % 5 == 0:
        del doc["status"]  # absent: null in its column
    return doc


def utc(moment: dt.datetime) -> dt.datetime:
    """A time pymongo read (naive in UTC, unless its client is zone-aware) as aware UTC."""
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def expected_columns(doc: dict) -> dict:
    total = doc.get("total")
    if isinstance(total, Decimal128):
        total = total.to_decimal()
    return {
        "status": doc.get("status"),
        "total": None if total in (None, "n/a") else Decimal(str(total)).quantize(Decimal("0.01")),
        "placed": utc(doc["placed"]) if "placed" in doc else None,
        "ref": str(doc["ref"]) if "ref" in doc else None,
        "n": doc.get("n"),
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


def test_change_only_updates_land_whole_and_promoted_fields_follow_them(mongodb, mongo_db, tmp_path, spark):
    from pyspark.sql import types as T

    from spark_jobs.delta_merge import run_local

    db, orders = mongo_db, mongo_db["orders"]
    orders.insert_many([order(i) for i in range(12)])  # read by the snapshot
    fields = [f"{db.name}.orders.{f}" for f in ("status:string", "total:decimal(12,2)", "placed:timestamp")]
    fields += [f"{db.name}.orders.ref:string", f"{db.name}.orders.n:int"]
    c = connector(mongodb, tmp_path / "connector", db.name, {
        "capture.mode": "change_streams",
        "incremental.snapshot.chunk.size": 5,
        "lakehouse.promoted.fields": fields,
    })  # fmt: skip
    root, checkpoint = tmp_path / "delta", str(tmp_path / "checkpoint")
    path = str(root / f"{db.name}.orders")

    def captured(work) -> None:
        """`work` captured by the streamer, merged, and Delta equal to the collection."""
        proc = start_process(c)
        try:
            wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
            work()
            synced(db, c)
            assert stop_process(proc) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        run_local(spark, c.config(), str(root), checkpoint)
        assert delta_documents(spark, str(root), f"{db.name}.orders") == source_documents(orders)

    def first() -> None:
        signal(c, "land-1", {"data-collections": [f"{db.name}.orders"]})
        wait_for(lambda: finished(c, "land-1") is not None, 120, interval=0.3, message="the snapshot")
        orders.insert_many([order(i) for i in range(12, 16)])
        orders.update_one({"_id": 1}, {"$set": {"status": "refunded", "dims.h": 5}, "$inc": {"n": 10}})
        orders.update_one({"_id": 1}, {"$unset": {"dims.w": ""}, "$push": {"tags": "d"}})
        orders.insert_one({"_id": 100, "n": 0, "tags": []})  # whole in this batch, then changed
        orders.update_one({"_id": 100}, {"$set": {"tags.2": "x"}})
        orders.replace_one({"_id": 6}, {"only": "this"})
        orders.update_one({"_id": 6}, {"$set": {"more": True}})

    captured(first)
    # (a replace is an update whose event carries the whole document)
    alone = [e for e in payloads(c, f"{c.prefix}.{db.name}.orders") if e["op"] == "u" and e["after"] is None]
    assert len(alone) == 4 and all(e["updateDescription"]["updatedFields"] for e in alone)
    types = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    assert [types[n] for n in COLUMNS] == [
        T.StringType(), T.DecimalType(12, 2), T.TimestampType(), T.StringType(), T.IntegerType()
    ]  # fmt: skip
    landed = columns_of(spark, path, COLUMNS)
    assert landed == {d["_id"]: expected_columns(d) for d in orders.find()}
    assert landed[1]["status"] == "refunded" and landed[1]["n"] == 11
    assert landed[10]["status"] is None and landed[3]["total"] is None and landed[6]["ref"] is None

    # A field promoted later fills the stored rows; `n` widened from int to bigint.
    settings = yaml.safe_load(c.path.read_text())
    settings["lakehouse.promoted.fields"] = [
        *fields[:-1],
        f"{db.name}.orders.n:bigint",
        f"{db.name}.orders.qty:bigint",
    ]
    c.path.write_text(yaml.safe_dump(settings, sort_keys=False))

    def second() -> None:  # changes alone: each document rebuilt from the stored one
        orders.delete_one({"_id": 2})
        orders.update_one({"_id": 4}, {"$set": {"n": 2**40}})
        orders.update_one({"_id": 1}, {"$set": {"dims.h": 6}, "$pull": {"tags": "a"}})
        orders.update_one({"_id": 5}, {"$set": {"nested": {"deep": [1, 2]}}})
        orders.update_one({"_id": 5}, {"$set": {"nested.deep.1": 3, "tags.5": "f"}})
        orders.update_many({"_id": {"$ne": 7}}, {"$inc": {"n": 1}})

    captured(second)
    types = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    assert (types["n"], types["qty"]) == (T.LongType(), T.LongType())
    landed = columns_of(spark, path, [*COLUMNS, "qty"])
    assert landed == {d["_id"]: {**expected_columns(d), "qty": d.get("qty")} for d in orders.find()}
    assert landed[4]["n"] == 2**40 + 1 and landed[7]["qty"] == 7000  # 7: stored before qty was promoted
    # The delete carried no document: its tombstone keeps the stored document and columns.
    assert columns_of(spark, path, COLUMNS, deleted=True) == {2: expected_columns(order(2))}
