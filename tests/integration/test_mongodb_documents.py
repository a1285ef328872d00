"""MongoDB documents in Delta, exactly: one collection holding every BSON type the
server stores (numbers of each width, -0.0, NaN and infinities, Decimal128 specials,
dates before 1970 and after year 9999, binary subtypes, regexes, code, timestamps,
MinKey/MaxKey, members out of alphabetical order, nested documents and arrays) and `_id`s
of several types, landed by a snapshot and by streamed inserts, updates, a replace and
a delete, then merged. Every live document is read back from Delta and compared with
the source's own BSON bytes: values, types and member order. The landed `_id` reads as
the `_id` in its document, and the README's Spark SQL recipe (filter, project a nested
field, look a row up by `_id`) answers on the landed table.

Against the MongoDB test server, or TIDEMARK_MONGODB_URI's deployment."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp, json_util
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.datetime_ms import DatetimeMS
from bson.raw_bson import RawBSONDocument

from tests.support.mongo.capture import connector, signal, synced
from tests.support.snapshots import finished
from tests.support.streamer import start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

# Dates out of Python's range read as BSON keeps them, not as an error.
READ_BACK = json_util.JSONOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO, tz_aware=True)
RAW = CodecOptions(document_class=RawBSONDocument, datetime_conversion=DatetimeConversion.DATETIME_AUTO)
OID = ObjectId("656f00000000000000000abc")
IDS = [OID, "text-id", 7, Int64(2**40), {"region": "eu", "n": 100004}, Binary.from_uuid(uuid.UUID(int=9))]
IDS += [dt.datetime(2024, 5, 1, 8, 30, tzinfo=dt.UTC), 2.5, Decimal128("12.50")]


# Binary subtypes the test server keeps (it closes the connection on 1, 5, 6, 7 and 8, and
# stores 0x80 as 0); a real deployment keeps them all.
TEST_SERVER_SUBTYPES = (0, 3, 4)
ALL_SUBTYPES = (0, 1, 3, 4, 5, 6, 7, 8, 0x80)


def every_type(i: int, subtypes: tuple[int, ...] = TEST_SERVER_SUBTYPES) -> dict:
    """A document of every type the server keeps as it was written (see the module's
    doc), in member orders a sorted map would not keep."""
    return {
        "zeta": i,
        "alpha": "first member after zeta",
        "int32": -(2**31) + i,
        "int64_small": Int64(5),
        "int64": Int64(2**62 + i),
        "double": 5.0,
        "negative_zero": -0.0,
        "nan": float("nan"),
        "infinity": float("inf"),
        "minus_infinity": float("-inf"),
        "tiny": 5e-324,
        "decimal": Decimal128(Decimal(f"{i}.10")),
        "decimal_specials": [
            Decimal128("NaN"),
            Decimal128("-Infinity"),
            Decimal128("-0"),
            Decimal128("1.0E+3"),
        ],
        "when": dt.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=dt.UTC),
        "before_1970": dt.datetime(1901, 12, 13, 20, 45, 52, tzinfo=dt.UTC),
        "year_10000": DatetimeMS(253402300800000 + 1234),
        "before_year_1": DatetimeMS(-62135596800000 - 86400000),
        "binaries": [Binary(uuid.UUID(int=i).bytes if s in (3, 4) else b"\x00\xff", s) for s in subtypes],
        "regex": Regex("^a.*b$", "im"),
        "code": Code("function () { return 1; }"),
        "timestamp": Timestamp(1_700_000_000, i + 1),
        "bounds": [MinKey(), MaxKey()],
        "flags": [True, False, None],
        "nested": {"z": {"y": [1, Int64(2), 3.0, "four", {"b": 1, "a": 2}]}, "empty": {}, "list": []},
        "oid": ObjectId(f"{i:024x}"),
    }


def test_every_live_document_reads_back_from_delta_as_the_sources_bson(landed):
    """Python's read-back (`json_util.loads(row.document)`) gives each document's BSON
    byte for byte: types, member order, -0.0 and NaN included."""
    source, delta = landed.source_raw(), landed.delta_rows()
    assert sorted(delta) == sorted(source)
    for key, raw in source.items():
        read_back = json_util.loads(delta[key]["document"], json_options=READ_BACK)
        assert bson.encode(read_back) == raw, key


def test_the_landed_id_is_the_id_its_document_holds(landed):
    """`_id` is written as `document` writes its `_id` member, so the two compare equal."""
    for row in landed.delta_rows().values():
        document, landed_id = row["document"], row["_id"]
        assert document.startswith('{"_id": ' + landed_id + ","), (landed_id, document[:80])


def test_the_readmes_spark_sql_recipe_filters_projects_and_looks_up_by_id(landed, spark):
    """The README's queries on the landed table: a view parsing the live documents once
    into a VARIANT, a filter and nested fields through it (wrapped types through their
    wrapper), and a row found by its `_id` text."""
    table = f"delta.`{landed.table}`"
    spark.sql(
        "CREATE OR REPLACE TEMP VIEW landed_docs AS "
        f"SELECT _id, from_json(document, 'variant') AS doc FROM {table} WHERE NOT _cdc_deleted"
    )
    found = spark.sql(
        "SELECT variant_get(doc, '$.nested.z.y[1][\"$numberLong\"]', 'bigint') AS two, "
        "timestamp_millis(variant_get(doc, '$.when[\"$date\"]', 'bigint')) AS at, "
        "variant_get(doc, '$.decimal[\"$numberDecimal\"]', 'decimal(12,2)') AS total "
        "FROM landed_docs WHERE variant_get(doc, '$.zeta', 'int') = 20"
    ).collect()
    assert [(r.two, r.at.astimezone(dt.UTC), r.total) for r in found] == [
        (2, dt.datetime(2024, 2, 29, 12, 0, 0, 123000, tzinfo=dt.UTC), Decimal("20.10"))
    ]
    by_id = spark.sql(f'SELECT document FROM {table} WHERE _id = \'{{"$oid": "{OID}"}}\'').collect()
    assert len(by_id) == 1 and json_util.loads(by_id[0].document, json_options=READ_BACK)["_id"] == OID
    text_id = spark.sql(f"SELECT count(*) AS n FROM {table} WHERE _id = '\"text-id\"'").collect()
    assert text_id[0].n == 1


def test_a_table_landed_with_variant_documents_is_refused_with_the_way_forward(landed, spark, tmp_path):
    """A table an earlier Tidemark landed (documents as VARIANT, `_id` as the key's text)
    would take this form's rows under other `_id`s: the merge refuses it, merging nothing."""
    from cdc_core.errors import TidemarkError
    from spark_jobs.delta_merge import run_local

    root = tmp_path / "delta"
    old = (
        spark.read.format("delta")
        .load(landed.table)
        .selectExpr("* EXCEPT (document)", "parse_json('{}') AS document")
    )
    old.write.format("delta").save(str(root / landed.table.rsplit("/", 1)[-1]))
    with pytest.raises(TidemarkError, match="holds its documents as VARIANT.*Land the collection again"):
        run_local(spark, landed.config, str(root), str(tmp_path / "checkpoint"))
    assert spark.read.format("delta").load(str(root / landed.table.rsplit("/", 1)[-1])).count() == old.count()


class Landed:
    def __init__(self, spark, collection, table: str, config) -> None:
        self.spark, self.collection, self.table, self.config = spark, collection, table, config

    def source_raw(self) -> dict[str, bytes]:
        raw = self.collection.with_options(codec_options=RAW)
        return {_key(doc["_id"]): doc.raw for doc in raw.find()}

    def delta_rows(self) -> dict[str, dict]:
        from spark_jobs.merge.delta_apply import live_rows

        rows = live_rows(self.spark, self.table).collect()
        return {_key(json_util.loads(r["_id"], json_options=READ_BACK)): r.asDict() for r in rows}


def _key(value) -> str:
    return json_util.dumps(value, json_options=json_util.CANONICAL_JSON_OPTIONS)


@pytest.fixture(scope="module")
def landed(mongodb, spark, tmp_path_factory):
    """The collection snapshotted and streamed into the event log, then merged (once for
    the module's tests)."""
    from spark_jobs.delta_merge import run_local
    from tests.support.mongo.capture import SIGNALS

    tmp = tmp_path_factory.mktemp("documents")
    client = mongodb.client()
    name = f"mg_docs_{uuid.uuid4().hex[:8]}"
    db = client[name]
    db.create_collection(SIGNALS)
    docs = db["docs"]
    subtypes = ALL_SUBTYPES if mongodb.real else TEST_SERVER_SUBTYPES
    docs.insert_many([{"_id": v, **every_type(i, subtypes)} for i, v in enumerate(IDS)])
    docs.insert_many([{"_id": 1000 + i, **every_type(i, subtypes)} for i in range(30)])
    c = connector(mongodb, tmp / "connector", name, {"incremental.snapshot.chunk.size": 7})
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30, message="the streamer to start")
        signal(c, "snap-docs", {"data-collections": [f"{name}.docs"]})
        docs.insert_one({"_id": ObjectId(), **every_type(50, subtypes)})
        docs.insert_one({"_id": "streamed", "shape": "another", "tags": ["a", "b"]})
        docs.update_one({"_id": 1003}, {"$set": {"nested.z.y.0": -0.0, "added": Int64(1)}})
        docs.replace_one({"_id": 1004}, {"only": "this", "negative_zero": -0.0})
        docs.delete_one({"_id": 1005})
        wait_for(lambda: finished(c, "snap-docs") is not None, 120, interval=0.3, message="the snapshot")
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    root = str(tmp / "delta")
    run_local(spark, c.config(), root, str(tmp / "checkpoint"))
    yield Landed(spark, docs, f"{root}/{name}.docs", c.config())
    client.drop_database(name)
    client.close()
