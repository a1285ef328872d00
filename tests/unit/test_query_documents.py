"""`additional-conditions` in Debezium's MongoDB form (a JSON query document, as text or
as an object) and the grammar's ObjectId and date literals: checked against an
allow-list, values read from Extended JSON, rendered as a filter document of BSON values;
JavaScript and anything outside the list refused with the reason."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal

import bson
import pytest
from bson import Binary, Code, Decimal128, MaxKey, MinKey, ObjectId, Regex, Timestamp

from cdc_core.connectors.mongodb.filters import chunk_filter, render
from cdc_core.signals.conditions import (
    ANY_FIELD,
    MAX_LENGTH,
    ConditionError,
    QueryDocument,
    columns_of,
    parse_condition,
)

OID = "596e275826f08b2730779e1f"
UTC = dt.UTC


def mongo(text: str) -> dict:
    rendered = render(parse_condition(text, ANY_FIELD))
    bson.encode(rendered)  # every accepted filter is a BSON document the driver sends as is
    return rendered


def test_debeziums_example_and_extended_json_values_become_a_bson_filter_document():
    assert mongo('{"color": "blue"}') == {"color": "blue"}
    text = (
        '{"_id": {"$gt": {"$oid": "OID"}}, "at": {"$gte": {"$date": "2025-03-01T00:00:00Z"}, '
        '"$lt": {"$date": {"$numberLong": "1740873600000"}}}, "n": {"$numberLong": "5"}, '
        '"i": {"$numberInt": "-3"}, "d": {"$numberDouble": "-Infinity"}, "price": {"$numberDecimal": "9.99"}, '
        '"blob": {"$binary": {"base64": "AQI=", "subType": "80"}}, "old": {"$binary": "AQI=", "$type": "00"}, '
        '"u": {"$uuid": "a58305c6-3930-4ec3-b8fb-42eae9ce642e"}, "re": {"$regularExpression": '
        '{"pattern": "^a", "options": "mi"}}, "ts": {"$timestamp": {"t": 5, "i": 1}}, "lo": {"$minKey": 1}, '
        '"hi": {"$maxKey": 1}, "address": {"city": "Oslo", "zip": {"$numberInt": "150"}}, "tags": ["a", 2.5]}'
    ).replace("OID", OID)
    assert mongo(text) == {
        "_id": {"$gt": ObjectId(OID)},
        "at": {"$gte": dt.datetime(2025, 3, 1, tzinfo=UTC), "$lt": dt.datetime(2025, 3, 2, tzinfo=UTC)},
        "n": 5,
        "i": -3,
        "d": float("-inf"),
        "price": Decimal128("9.99"),
        "blob": Binary(b"\x01\x02", 0x80),
        "old": Binary(b"\x01\x02", 0),
        "u": Binary(uuid.UUID("a58305c6-3930-4ec3-b8fb-42eae9ce642e").bytes, 4),
        "re": Regex("^a", "im"),
        "ts": Timestamp(5, 1),
        "lo": MinKey(),
        "hi": MaxKey(),
        "address": {"city": "Oslo", "zip": 150},
        "tags": ["a", 2.5],
    }


def test_every_allowed_operator_renders_as_written():
    text = (
        '{"$or": [{"qty": {"$in": [1, 2]}}, {"qty": {"$nin": [3]}, "sku": {"$ne": null}}], '
        '"$nor": [{"gone": {"$exists": true}}], "$and": [{"kind": {"$type": ["string", 16]}}], '
        '"tags": {"$all": ["a"], "$size": 2}, "items": {"$elemMatch": {"sku": "x", "qty": {"$gte": 2}}}, '
        '"scores": {"$elemMatch": {"$gte": 80, "$lt": 85}}, "name": {"$regex": "^ab", "$options": "i"}, '
        '"label": {"$not": {"$regex": "^z"}}, "n": {"$mod": [4, 0], "$eq": 8}, "flags": {"$bitsAllSet": [1, 5], '
        '"$bitsAnyClear": 6}, "f": {"$lte": 1.5}}'
    )
    assert mongo(text) == {
        "$or": [{"qty": {"$in": [1, 2]}}, {"qty": {"$nin": [3]}, "sku": {"$ne": None}}],
        "$nor": [{"gone": {"$exists": True}}],
        "$and": [{"kind": {"$type": ["string", 16]}}],
        "tags": {"$all": ["a"], "$size": 2},
        "items": {"$elemMatch": {"sku": "x", "qty": {"$gte": 2}}},
        "scores": {"$elemMatch": {"$gte": 80, "$lt": 85}},
        "name": {"$regex": "^ab", "$options": "i"},
        "label": {"$not": {"$regex": "^z"}},
        "n": {"$mod": [4, 0], "$eq": 8},
        "flags": {"$bitsAllSet": [1, 5], "$bitsAnyClear": 6},
        "f": {"$lte": 1.5},
    }
    condition = parse_condition(text, ANY_FIELD)
    assert isinstance(condition, QueryDocument)
    assert columns_of(condition) == {
        "qty",
        "sku",
        "gone",
        "kind",
        "tags",
        "items",
        "scores",
        "name",
        "label",
        "n",
    } | {
        "flags",
        "f",
    }


def test_a_query_document_is_anded_with_the_windows_id_range():
    rendered = chunk_filter((5,), (9,), parse_condition('{"color": "blue"}', ANY_FIELD))
    assert rendered == {"$and": [{"_id": {"$gt": 5, "$lte": 9}}, {"color": "blue"}]}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            '{"$where": "sleep(1000) || true"}',
            "$where is not allowed in a filter: it runs JavaScript on the server",
        ),
        ('{"a": {"$where": "1"}}', "$where is not allowed in a filter: it runs JavaScript"),
        (
            '{"items": {"$elemMatch": {"$where": "1"}}}',
            "$where is not allowed in a filter: it runs JavaScript",
        ),
        (
            '{"$expr": {"$function": {"body": "f", "args": [], "lang": "js"}}}',
            "$expr is not allowed in a filter",
        ),
        ('{"a": {"$expr": {"$gt": ["$a", 1]}}}', "which can run JavaScript ($function, $accumulator)"),
        ('{"$or": [{"$function": {}}]}', "$function is not allowed in a filter: it runs JavaScript"),
        ('{"a": {"$accumulator": {}}}', "$accumulator is not allowed in a filter: it runs JavaScript"),
        ('{"a": {"$code": "while(1){}"}}', "JavaScript code is never part of a filter"),
        ('{"a": {"$eq": {"$code": "f", "$scope": {}}}}', "JavaScript code is never part of a filter"),
        ('{"$text": {"$search": "x"}}', "$text is not an allowed operator in a query (allowed: $and, $or,"),
        ('{"a": {"$near": [0, 0]}}', "$near is not an allowed operator on a field"),
        ('{"$gt": 5}', "$gt is a field's operator: write it under a field"),
        ('{"a..b": 1}', "field 'a..b': a field path has no empty part and no part starting with '$'"),
        ('{"a.$gt": 1}', "field 'a.$gt'"),
        ('{"": 1}', "field ''"),
        ('{"a": {"b": {"$ne": 1}}}', "an embedded document's field '$ne'"),
        ('{"a": {"$gt": 1, "b": 2}}', "an object mixes operators and field names"),
        ('{"a": 1, "a": 2}', "'a' appears twice in one object"),
        ('{"a": NaN}', 'NaN is not JSON; write {"$numberDouble": "NaN"}'),
        ('{"a": 1e999}', "is out of range: at most 65 digits"),
        ('{"a": {"$oid": "xyz"}}', "an ObjectId is 24 hexadecimal digits"),
        ('{"a": {"$date": "yesterday"}}', "is not an Extended JSON value"),
        ('{"a": {"$date": {"$numberLong": "99999999999999999"}}}', "within years 1 to 9999"),
        ('{"a": {"$numberInt": "3000000000"}}', "out of int32's range"),
        ('{"a": {"$undefined": true}}', "the deprecated undefined type"),
        ('{"a": {"$regex": "x", "$options": "g"}}', "$options takes regex options from i, m, x, s, u"),
        ('{"a": {"$options": "i"}}', "$options goes with $regex"),
        ('{"a": {"$type": "text"}}', "$type takes BSON type aliases or codes"),
        ('{"a": {"$size": -1}}', "$size takes a non-negative integer"),
        ('{"a": {"$mod": [0, 1]}}', "$mod takes [divisor, remainder]"),
        ('{"a": {"$in": 5}}', "$in takes an array"),
        ('{"$or": []}', "$or takes a non-empty array of query documents"),
        ('{"a": {"$not": "x"}}', "$not takes operators"),
        ("{'a': 1}", "not a JSON query document: Expecting property name enclosed in double quotes"),
        ('{"a": {"$in": [' + ", ".join(["1"] * 1001) + "]}}", "$in is limited to 1000 values"),
        ('{"a": ' * 40 + "1" + "}" * 40, "nested more than 32 deep"),
        ('{"a": "' + "x" * MAX_LENGTH + '"}', f"a filter is limited to {MAX_LENGTH} characters"),
    ],
)
def test_anything_outside_the_allow_list_is_refused_with_the_reason(text, reason):
    with pytest.raises(ConditionError, match=re.escape(reason)):
        parse_condition(text, ANY_FIELD)


def test_a_value_that_only_looks_like_an_operator_stays_a_value():
    assert mongo('{"name": "$where", "note": {"$eq": "{\\"$where\\": 1}"}}') == {
        "name": "$where",
        "note": {"$eq": '{"$where": 1}'},
    }


def test_the_grammars_objectid_and_date_literals_are_bson_values():
    assert mongo(f"_id = ObjectId('{OID}')") == {"_id": {"$eq": ObjectId(OID)}}
    assert mongo(f"_id IN (ObjectId('{OID}'), 5)") == {"_id": {"$in": [ObjectId(OID), 5]}}
    at = dt.datetime(2025, 3, 1, tzinfo=UTC)
    # a date literal matches BSON dates only (a quoted date text matches either type)
    assert mongo("placed >= ISODate('2025-03-01') AND placed < DATE '2025-03-02'") == {
        "$and": [{"placed": {"$gte": at}}, {"placed": {"$lt": at + dt.timedelta(days=1)}}]
    }
    assert mongo("placed = ISODate('2025-03-01T02:00:00+02:00')") == {"placed": {"$eq": at}}
    assert mongo("placed BETWEEN TIMESTAMP '2025-03-01 00:00:00' AND DATE '2025-03-02'") == {
        "$and": [{"placed": {"$gte": at}}, {"placed": {"$lte": at + dt.timedelta(days=1)}}]
    }
    # dates have milliseconds: a finer bound rounds so the comparison keeps its meaning
    ms = dt.timedelta(milliseconds=1)
    assert mongo("placed >= TIMESTAMP '2025-03-01 00:00:00.0005'") == {"placed": {"$gte": at + ms}}
    assert mongo("placed < TIMESTAMP '2025-03-01 00:00:00.0005'") == {"placed": {"$lt": at + ms}}
    assert mongo("placed <= TIMESTAMP '2025-03-01 00:00:00.0005'") == {"placed": {"$lte": at}}
    assert mongo("placed = TIMESTAMP '2025-03-01 00:00:00.0005'") == {"placed": {"$in": []}}
    assert mongo("placed IN (DATE '2025-03-01', 'x')") == {"placed": {"$in": ["x", at]}}
    assert mongo("address.city = 'Oslo'") == {"address.city": {"$eq": "Oslo"}}


def test_an_object_filter_in_the_signal_is_kept_as_its_json_text():
    from cdc_core.signals.actions import RawSignal, parse_signal

    data = {
        "data-collections": ["shop.orders"],
        "additional-conditions": [{"data-collection": "shop.orders", "filter": {"qty": {"$gt": 5}}}],
    }
    action = parse_signal(RawSignal("s", "execute-snapshot", data, "source"))
    text = action.conditions[0].filter
    assert mongo(text) == {"qty": {"$gt": 5}}
    assert isinstance(parse_condition(text, ANY_FIELD), QueryDocument)


def test_numbers_are_as_json_gives_them_and_decimals_exact():
    assert mongo(
        '{"a": 9.99, "b": 9223372036854775807, "c": 9223372036854775808, "d": {"$numberDecimal": "NaN"}}'
    ) == {
        "a": 9.99,
        "b": 9223372036854775807,
        "c": 9.223372036854776e18,  # beyond 64 bits: a double, as Extended JSON reads it
        "d": Decimal128(Decimal("NaN")),
    }
    assert not isinstance(mongo('{"a": "x"}')["a"], Code)
