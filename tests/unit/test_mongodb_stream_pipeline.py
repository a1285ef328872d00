"""`cursor.pipeline`: stages that run code, or that would hide from the connector what it
resumes and orders the stream by, are refused when the connector file is loaded, with
the stage and the reason; the stages it accepts are sent as BSON, each `$match` letting
the signal collection's changes and collection drops through."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from bson import ObjectId
from bson.datetime_ms import DatetimeMS

from cdc_core.config.connector_config import load_config
from cdc_core.connectors.mongodb.source import MongoSource
from cdc_core.connectors.mongodb.stream_pipeline import change_stream_pipeline, parse_pipeline
from cdc_core.errors import ConfigError
from cdc_core.schema.history import SchemaHistory
from cdc_core.schema.model import TableId

CONNECTOR = """
name: shop
connector.class: mongodb
topic.prefix: shop
mongodb.connection.string: mongodb://127.0.0.1:27017
signal.data.collection: shop.signals
"""


def load(tmp_path, stages, extra: str = ""):
    path = tmp_path / "c.yaml"
    text = stages if isinstance(stages, str) else json.dumps(stages)
    path.write_text(CONNECTOR + f"cursor.pipeline: {json.dumps(text)}\n" + extra)
    return load_config(path, environ={})


REFUSED = [
    (
        [{"$match": {"$where": "sleep(100) || true"}}],
        r"stage 0 \(\$match\) uses \$where, which runs JavaScript",
    ),
    (
        [{"$match": {"$and": [{"a": 1}, {"$expr": {"$function": {"body": "f", "args": [], "lang": "js"}}}]}}],
        r"stage 0 \(\$match\) uses \$function",
    ),
    (
        [{"$match": {"a": 1}}, {"$match": {"$expr": {"$accumulator": {}}}}],
        r"stage 1 \(\$match\) uses \$accumulator",
    ),
    ([{"$match": {"f": {"$code": "function() { return 1 }"}}}], r"stage 0 \(\$match\) holds JavaScript code"),
    (
        [{"$addFields": {"fullDocument.x": 1}}],
        r"stage 0 \(\$addFields\) is refused: it sets fields.*makes up a document",
    ),
    ([{"$set": {"tag": "a"}}], r"stage 0 \(\$set\) is refused: it sets fields"),
    (
        [{"$replaceRoot": {"newRoot": "$fullDocument"}}],
        r"\(\$replaceRoot\) is refused: it replaces the change event",
    ),
    ([{"$replaceWith": "$fullDocument"}], r"\(\$replaceWith\) is refused: .*resume token"),
    ([{"$redact": "$$KEEP"}], r"\(\$redact\) is refused: it prunes"),
    (
        [{"$lookup": {"from": "x", "as": "y"}}],
        r"stage 0 \(\$lookup\) is not allowed in the change stream; allowed: \$match",
    ),
    ([{"$group": {"_id": 1}}], r"\(\$group\) is not allowed"),
    (
        [{"$project": {"fullDocument.name": 1}}],
        r"fullDocument.name: 1 includes or computes a field; only exclusions",
    ),
    ([{"$project": {"fullDocument.name": {"$toUpper": "$x"}}}], r"includes or computes a field"),
    ([{"$project": {"_id": 0}}], r"_id is not inside a document the change carries; .*resume"),
    ([{"$project": {"operationType": 0}}], r"operationType is not inside a document the change carries"),
    ([{"$unset": ["fullDocument.a", "ns"]}], r"stage 0 \(\$unset\): ns is not inside a document"),
    ([{"$unset": "documentKey._id"}], r"documentKey._id is not inside a document"),
    ([{"$unset": "clusterTime"}], r"clusterTime is not inside"),
    ([{"$unset": "lsid"}], r"lsid is not inside"),
    ([{"$unset": "fullDocument"}], r"fullDocument is not inside a document"),
    ([{"$unset": "updateDescription.removedFields"}], r"updateDescription.removedFields is not inside"),
    ([{"$project": {"fullDocument": {"_id": 0}}}], r"fullDocument._id is the document's _id, its key"),
    ([{"$unset": "fullDocument.$x"}], r"'fullDocument.\$x' is not a field path"),
    ([{"$unset": []}], r"takes a field path or a list of them"),
    ([{"$match": [1]}], r"takes a query document"),
    ([{"$match": {}, "$project": {}}], r"stage 0 is not a stage"),
    ([1], r"stage 0 is not a stage"),
    ({"$match": {}}, r"expected a JSON array of stages"),
    ('[{"$match": ', r"not Extended JSON"),
]


@pytest.mark.parametrize(("stages", "why"), REFUSED)
def test_a_pipeline_that_runs_code_or_hides_what_the_connector_reads_is_refused_at_load(
    tmp_path, stages, why
):
    with pytest.raises(ConfigError, match=why) as refused:
        load(tmp_path, stages)
    assert refused.value.property == "cursor.pipeline"


def test_accepted_stages_are_bson_values_read_from_extended_json():
    oid = "65f0a1b2c3d4e5f601234567"
    stages = parse_pipeline(
        json.dumps(
            [
                {
                    "$match": {
                        "fullDocument.owner": {"$oid": oid},
                        "wallTime": {"$gte": {"$date": "2025-01-01T00:00:00Z"}},
                    }
                },
                {"$match": {"$expr": {"$gt": ["$fullDocument.n", 1]}}},  # an $expr without code
                {"$project": {"fullDocument": {"secret": 0, "card.number": False}}},
                {"$unset": ["fullDocumentBeforeChange.secret", "updateDescription.updatedFields.secret"]},
            ]
        )
    )
    assert stages[0]["$match"]["fullDocument.owner"] == ObjectId(oid)
    assert stages[0]["$match"]["wallTime"]["$gte"] == dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    [far] = parse_pipeline(
        '[{"$match": {"fullDocument.at": {"$lt": {"$date": {"$numberLong": "253402300800000"}}}}}]'
    )
    assert far["$match"]["fullDocument.at"]["$lt"] == DatetimeMS(253402300800000)  # year 10000
    assert stages[2] == {"$project": {"fullDocument": {"secret": 0, "card.number": False}}}


def test_each_match_lets_the_signal_collections_changes_and_collection_drops_through():
    text = json.dumps([{"$match": {"operationType": "insert"}}, {"$unset": "fullDocument.secret"}])
    signal = TableId("shop", "signals")
    passed = [
        {"ns.db": "shop", "ns.coll": "signals"},
        {"operationType": {"$in": ["drop", "rename", "dropDatabase", "invalidate"]}},
    ]
    for order in ("internal_first", "user_first"):
        assert change_stream_pipeline(text, order, signal) == [
            {"$match": {"$or": [{"operationType": "insert"}, *passed]}},
            {"$unset": "fullDocument.secret"},
        ]
    assert change_stream_pipeline(text, "internal_first", None)[0] == {
        "$match": {"$or": [{"operationType": "insert"}, passed[1]]}
    }
    assert change_stream_pipeline(text, "user_only", signal) == json.loads(text)  # Debezium's: as written
    assert change_stream_pipeline(None, "internal_first", signal) == []


def test_excluding_a_field_the_signal_documents_carry_is_refused_when_there_is_a_signal_collection(tmp_path):
    config = load(tmp_path, [{"$project": {"fullDocument.data": 0}}])
    with pytest.raises(
        ConfigError, match=r"cursor.pipeline: stage 0 excludes fullDocument.data: the signal collection"
    ):
        MongoSource(config, SchemaHistory(tmp_path / "history"))
    for stages in ([{"$unset": "fullDocument.type"}], [{"$project": {"fullDocument": {"type": 0}}}]):
        with pytest.raises(ConfigError, match="signals and watermarks"):
            change_stream_pipeline(json.dumps(stages), "internal_first", TableId("shop", "signals"))
    dotted = [{"$project": {"fullDocument.type": 0}}]  # the form every server reads alike
    assert change_stream_pipeline(json.dumps(stages), "internal_first", None) == dotted
    assert change_stream_pipeline(json.dumps(stages), "user_only", TableId("shop", "signals")) == dotted


def test_the_pipeline_order_takes_debeziums_values(tmp_path):
    assert (
        load(tmp_path, [], "cursor.pipeline.order: user_first\n").get("cursor.pipeline.order") == "user_first"
    )
    with pytest.raises(
        ConfigError, match="cursor.pipeline.order: expected one of internal_first, user_first, user_only"
    ):
        load(tmp_path, [], "cursor.pipeline.order: last\n")
