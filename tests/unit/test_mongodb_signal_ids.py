"""A MongoDB signal whose `_id` is not a string (an ObjectId, as `insertOne` without an
`_id` gives) is named by one text everywhere: a string `_id` is itself, any other its
canonical Extended JSON. The streamer names it so, the Spark job finds it by that text (or
any Extended JSON of the value), and the job's staging folder for it is a plain name."""

from __future__ import annotations

import datetime as dt

import pytest
from bson import Code, Int64, ObjectId
from bson.son import SON

from cdc_core.connectors.mongodb.events import EventAssembler
from cdc_core.connectors.mongodb.signal_ids import find_signal, id_candidates, signal_ref
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.source import RowChange
from spark_jobs.snapshot_plan import plan_uri, signal_folder

OID = ObjectId("66a1b2c3d4e5f60718293a4b")
SIGNALS = TableId("shop", "debezium_signal")
SIGNAL_SCHEMA = TableSchema(
    SIGNALS, (Column("id", "VARCHAR"), Column("type", "VARCHAR"), Column("data", "VARCHAR")), ("id",)
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("adhoc-1", "adhoc-1"),  # as state files have always held it
        ('{"$oid": "66a1b2c3d4e5f60718293a4b"}', '{"$oid": "66a1b2c3d4e5f60718293a4b"}'),  # a string stays
        (OID, '{"$oid": "66a1b2c3d4e5f60718293a4b"}'),
        (7, '{"$numberInt": "7"}'),
        (Int64(7), '{"$numberLong": "7"}'),
        (2.5, '{"$numberDouble": "2.5"}'),
        (SON([("k", 1), ("a", "x")]), '{"k": {"$numberInt": "1"}, "a": "x"}'),
        (dt.datetime(2025, 3, 1, tzinfo=dt.UTC), '{"$date": {"$numberLong": "1740787200000"}}'),
        (Code("f()"), '{"$code": "f()"}'),  # (a Code is a str, but not a string `_id`)
    ],
)
def test_a_signal_id_is_one_text_and_reads_back_as_its_value(value, text):
    assert signal_ref(value) == text
    candidates = id_candidates(text)
    assert candidates[0] == text  # a string `_id` is looked up first
    if not isinstance(value, str) or isinstance(value, Code):
        assert candidates[1:] == [value]
        assert isinstance(candidates[1], dict) or type(candidates[1]) is type(value)  # Int64 stays Int64


def test_other_extended_json_forms_of_the_value_find_it_too():
    assert id_candidates('{"$oid":"66a1b2c3d4e5f60718293a4b"}')[1] == OID  # relaxed, compact
    assert id_candidates("7")[1] == 7
    assert id_candidates("adhoc-1") == ["adhoc-1"]  # not JSON: a string id only
    assert id_candidates('"quoted"') == ['"quoted"']  # JSON text of a string: still a string only


class Collection:
    def __init__(self, docs):
        self.docs = docs
        self.asked = []

    def find_one(self, spec):
        self.asked.append(spec["_id"])
        return next(
            (d for d in self.docs if d["_id"] == spec["_id"] and type(d["_id"]) is type(spec["_id"])), None
        )


def test_the_string_is_found_first_then_the_value_its_text_names():
    text = signal_ref(OID)
    both = Collection([{"_id": OID, "n": 1}, {"_id": text, "n": 2}])
    assert find_signal(both, text)["n"] == 2
    only = Collection([{"_id": OID, "n": 1}])
    assert find_signal(only, text)["n"] == 1 and only.asked == [text, OID]
    assert find_signal(only, "nothing") is None


@pytest.mark.parametrize("value", [OID, 7, "sig-1", SON([("k", 1)])])
def test_the_streamer_names_a_signal_by_its_text(value):
    feed = EventAssembler("tm", None, SIGNALS, SIGNAL_SCHEMA)
    event = {
        "_id": {"_data": "8263A1B2C30000000A2B"},
        "operationType": "insert",
        "clusterTime": None,
        "ns": {"db": "shop", "coll": "debezium_signal"},
        "documentKey": {"_id": value},
        "fullDocument": {"_id": value, "type": "execute-snapshot", "data": {"data-collections": ["shop.t"]}},
    }
    (row,) = [i for i in feed.feed(event) if isinstance(i, RowChange)]
    assert row.after[0] == signal_ref(value)
    assert row.after[1] == "execute-snapshot"


def test_a_signals_staging_folder_is_a_plain_name():
    assert signal_folder("/s", "af-0123abc") == "/s/af-0123abc"  # every id so far keeps its folder
    assert plan_uri("s3a://b/p/", "spark-1") == "s3a://b/p/spark-1/plan.json"
    folder = signal_folder("s3a://b/p", signal_ref(OID))
    assert folder.startswith("s3a://b/p/signal-oid_66a1b2c3d4e5f60718293a4b-")
    assert folder.rsplit("/", 1)[1].replace("-", "").replace("_", "").isalnum()
    # one folder per id: texts that differ only in their unsafe characters do not share one
    assert signal_folder("/s", '{"a": 1}') != signal_folder("/s", '{"a":1}')
    assert signal_folder("/s", "..") != "/s/.."
