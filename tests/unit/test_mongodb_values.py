"""BSON values as Debezium's MongoDB connector writes them (the Java driver's JSON modes),
and `additional-conditions` and `_id` chunks as MongoDB filter documents: literals only,
no operator from the text, ranges in BSON order across types."""

from __future__ import annotations

import datetime as dt
import uuid

import bson
import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp

from cdc_core.connectors.mongodb.ext_json import millis_of, relaxed, strict
from cdc_core.connectors.mongodb.filters import after, bracket_of, chunk_filter, render, up_to
from cdc_core.errors import TidemarkError
from cdc_core.signals.conditions import ANY_FIELD, parse_condition

OID = ObjectId("596e275826f08b2730779e1f")


def test_javascript_code_keeps_its_type_and_scope():
    """bson's Code is a str: it was written as a plain string, so Delta held text where
    the source holds code."""
    assert strict({"f": Code("function(){}"), "g": Code("x", {"y": Int64(1)})}) == (
        '{"f": {"$code": "function(){}"},"g": {"$code": "x","$scope": {"y": {"$numberLong": "1"}}}}'
    )
    assert strict({"nan": float("nan"), "inf": float("-inf")}) == '{"nan": NaN,"inf": -Infinity}'


@pytest.mark.parametrize(
    "moment, millis",
    [
        (dt.datetime(2026, 7, 3, 11, 35, 53, 473000), 1783078553473),  # naive: UTC, as pymongo decodes
        (
            dt.datetime(2026, 7, 3, 16, 35, 53, 473000, tzinfo=dt.timezone(dt.timedelta(hours=5))),
            1783078553473,
        ),
        (dt.datetime(1969, 12, 31, 23, 59, 59, 999000), -1),
        (dt.datetime(1, 1, 1, tzinfo=dt.UTC), -62135596800000),
        (dt.datetime(9999, 12, 31, 23, 59, 59, 999000), 253402300799999),
    ],
)
def test_a_date_is_its_milliseconds_since_the_epoch_in_utc(moment, millis):
    assert millis_of(moment) == millis
    assert strict({"d": moment}) == f'{{"d": {{"$date": {millis}}}}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1004, "1004"),
        (Int64(1004), "1004"),
        (12.34, "12.34"),
        (1.0, "1.0"),
        (float("nan"), '{"$numberDouble": "NaN"}'),
        ("1234", '"1234"'),
        (OID, '{"$oid": "596e275826f08b2730779e1f"}'),
        (Decimal128("3.25"), '{"$numberDecimal": "3.25"}'),
        (dt.datetime(2020, 1, 1, tzinfo=dt.UTC), '{"$date": "2020-01-01T00:00:00Z"}'),
        (dt.datetime(2020, 1, 1, 0, 0, 0, 470000, tzinfo=dt.UTC), '{"$date": "2020-01-01T00:00:00.47Z"}'),
        (Binary(b"kafka", 0), '{"$binary": {"base64": "a2Fma2E=","subType": "00"}}'),
        ({"hi": "kafka", "nums": [10.0, 100.0, 1000.0]}, '{"hi": "kafka","nums": [10.0,100.0,1000.0]}'),
    ],
)
def test_a_key_id_is_relaxed_extended_json_in_the_drivers_compact_layout(value, text):
    assert relaxed(value) == text


def test_after_and_before_are_strict_extended_json():
    document = {
        "_id": OID,
        "phone": Int64(123),
        "n": 5,
        "created": dt.datetime.fromtimestamp(1783078553.473, dt.UTC),
        "price": Decimal128("3.25"),
        "blob": Binary(b"\x01\x02", 0),
        "ts": Timestamp(1, 2),
        "re": Regex("p", "i"),
        "nested": {"list": [1, "a", None, True]},
    }
    assert strict(document) == (
        '{"_id": {"$oid": "596e275826f08b2730779e1f"},"phone": {"$numberLong": "123"},"n": 5,'
        '"created": {"$date": 1783078553473},"price": {"$numberDecimal": "3.25"},'
        '"blob": {"$binary": "AQI=","$type": "00"},"ts": {"$timestamp": {"t": 1,"i": 2}},'
        '"re": {"$regex": "p","$options": "i"},"nested": {"list": [1,"a",null,true]}}'
    )


def test_updated_fields_are_relaxed_with_spaced_separators():
    assert relaxed({"phone": Int64(123), "scores": [1.2, 3.4, 5.6]}, ", ") == (
        '{"phone": 123, "scores": [1.2, 3.4, 5.6]}'
    )


def test_a_uuid_key_is_binary_subtype_4():
    value = uuid.UUID("a58305c6-3930-4ec3-b8fb-42eae9ce642e")
    assert (
        relaxed(Binary.from_uuid(value))
        == '{"$binary": {"base64": "pYMFxjkwTsO4+0Lq6c5kLg==","subType": "04"}}'
    )


# ---------------------------------------------------------------------------- filters


def test_bson_brackets_order_types_as_mongodb_sorts_them():
    ordered = [MinKey(), None, 3, "a", {"x": 1}, [1], Binary(b"", 0), OID, True, dt.datetime(2020, 1, 1)]
    ordered += [Timestamp(1, 1), Regex("x"), MaxKey()]
    brackets = [bracket_of(v) for v in ordered]
    assert brackets == sorted(brackets) and len(set(brackets)) == len(brackets)


def test_a_range_takes_the_whole_brackets_on_its_far_side():
    assert after(5) == {
        "$or": [
            {"_id": {"$gt": 5}},
            {
                "_id": {
                    "$type": [
                        "string", "symbol", "object", "array", "binData", "objectId", "bool", "date",
                        "timestamp", "regex", "dbPointer", "javascript", "javascriptWithScope", "maxKey",
                    ]
                }
            },
        ]
    }  # fmt: skip
    assert up_to(
        "m", frozenset({"undefined", "symbol", "dbPointer", "javascript", "javascriptWithScope"})
    ) == {
        "$or": [
            {"_id": {"$lte": "m"}},
            {"_id": {"$type": ["minKey", "null", "double", "int", "long", "decimal"]}},
        ]
    }
    assert chunk_filter(None, None, None) == {}


def test_a_window_within_one_bracket_is_one_range_and_one_across_brackets_takes_both_sides():
    assert chunk_filter((2.5,), (Int64(10),), None) == {"_id": {"$gt": 2.5, "$lte": Int64(10)}}
    assert chunk_filter((7,), ("a",), None) == {"$and": [after(7), up_to("a")]}
    assert chunk_filter(None, (7,), None) == up_to(7) and chunk_filter((7,), None, None) == after(7)
    # an `_id` of null is a bound like any other, not "no bound"
    assert chunk_filter((None,), (7,), None) == {"$and": [after(None), up_to(7)]}
    assert after(None, frozenset({"undefined"}))["_id"]["$type"][:2] == ["double", "int"]
    assert up_to(None, frozenset({"undefined"})) == {"$or": [{"_id": None}, {"_id": {"$type": ["minKey"]}}]}


def test_conditions_render_as_literals_of_the_named_fields():
    condition = parse_condition(
        "status = 'paid' AND (total BETWEEN 10 AND 20 OR note LIKE 'a%' OR gone IS NULL) AND n NOT IN (1, 2)",
        ANY_FIELD,
    )
    rendered = render(condition)
    assert rendered["$and"][0] == {"status": {"$eq": "paid"}}
    assert rendered["$and"][1]["$or"][0] == {"total": {"$gte": 10, "$lte": 20}}
    assert rendered["$and"][1]["$or"][1]["note"]["$regex"].pattern == "^a.*$"
    assert rendered["$and"][1]["$or"][2] == {"gone": None}
    assert rendered["$and"][2] == {"n": {"$nin": [1, 2]}}
    # a value that looks like an operator stays a value
    assert render(parse_condition("name = '$where'", ANY_FIELD)) == {"name": {"$eq": "$where"}}


def test_a_timestamp_literal_matches_a_string_field_or_a_bson_date_field():
    """A backfill's interval is written as quoted timestamps; documents hold BSON dates,
    which MongoDB never compares with a string: each bound matches either type."""
    at = dt.datetime(2025, 3, 1, tzinfo=dt.UTC)
    rendered = render(parse_condition("ts >= '2025-03-01 00:00:00' AND ts < '2025-03-02'", ANY_FIELD))
    assert rendered == {
        "$and": [
            {"$or": [{"ts": {"$gte": "2025-03-01 00:00:00"}}, {"ts": {"$gte": at}}]},
            {"$or": [{"ts": {"$lt": "2025-03-02"}}, {"ts": {"$lt": at + dt.timedelta(days=1)}}]},
        ]
    }
    # an offset is honoured; equality and lists take the date as one more value
    assert render(parse_condition("ts = '2025-03-01T02:00:00+02:00'", ANY_FIELD)) == {
        "ts": {"$in": ["2025-03-01T02:00:00+02:00", at]}
    }
    assert render(parse_condition("ts NOT IN ('2025-03-01', 'x')", ANY_FIELD)) == {
        "ts": {"$nin": ["2025-03-01", "x", at]}
    }
    # dates have milliseconds: a finer bound rounds so the comparison keeps its meaning,
    # and equality with it can hold only for the string
    fine = "2025-03-01 00:00:00.000500"
    ms = dt.timedelta(milliseconds=1)
    assert render(parse_condition(f"ts >= '{fine}'", ANY_FIELD))["$or"][1] == {"ts": {"$gte": at + ms}}
    assert render(parse_condition(f"ts > '{fine}'", ANY_FIELD))["$or"][1] == {"ts": {"$gt": at}}
    assert render(parse_condition(f"ts <= '{fine}'", ANY_FIELD))["$or"][1] == {"ts": {"$lte": at}}
    assert render(parse_condition(f"ts < '{fine}'", ANY_FIELD))["$or"][1] == {"ts": {"$lt": at + ms}}
    assert render(parse_condition(f"ts = '{fine}'", ANY_FIELD)) == {"ts": {"$in": [fine]}}
    between = render(parse_condition("ts NOT BETWEEN '2025-03-01' AND '2025-03-02'", ANY_FIELD))
    assert between["$or"][0] == {"$or": [{"ts": {"$lt": "2025-03-01"}}, {"ts": {"$lt": at}}]}
    # text that only starts like a date stays text
    assert render(parse_condition("note = '2025-03-01 is a date'", ANY_FIELD)) == {
        "note": {"$eq": "2025-03-01 is a date"}
    }


@pytest.mark.parametrize(
    "text",
    [
        "$where = 'sleep(1000)'",
        '{"$where": "this.a > 1"}',
        "a = 1; db.dropDatabase()",
        "a IN (SELECT x FROM y)",
        "function() { return true }",
        "a.$gt = 1",
    ],
)
def test_hostile_conditions_are_refused(text):
    with pytest.raises(TidemarkError):
        parse_condition(text, ANY_FIELD)


@pytest.mark.parametrize(
    "raw", [9, Int64(2**40), "abc", ObjectId("0000000000000000000000ab"), {"k": [1, "x"]}]
)
def test_a_key_a_release_leaves_out_is_named_as_its_events_and_staged_rows_name_it(raw):
    """Windows record keys in their canonical form; the release record names them as
    event values, which the merge compares with the staged `_id` (the key's relaxed text).
    Encoding the canonical text again named keys no row has: a document deleted inside its
    window came back from the staged file."""
    from cdc_core.connectors.mongodb.shape import ID, MongoTypeMapper, collection_schema
    from cdc_core.schema.model import TableId

    mapper = MongoTypeMapper()
    column = collection_schema(TableId("shop", "orders")).column(ID)
    canonical = mapper.key_value(column)(raw)
    event_value = mapper.key_event_value(column)(canonical)
    assert event_value == mapper.map_column(column, optional=False).convert(raw) == relaxed(raw)


def test_condition_numbers_are_values_bson_holds():
    """A decimal is a double as in a JSON filter, unless a double cannot hold its digits;
    integers beyond 64 bits are Decimal128: every filter the grammar accepts encodes."""
    condition = parse_condition(
        "price > 9.99 AND qty IN (1, 9223372036854775808) AND total BETWEEN 0.5 AND "
        "1.2345678901234567 AND big < " + "9" * 40,
        ["price", "qty", "total", "big"],
    )
    rendered = render(condition)
    assert rendered["$and"][0] == {"price": {"$gt": 9.99}}
    assert rendered["$and"][1] == {"qty": {"$in": [1, Decimal128("9223372036854775808")]}}
    assert rendered["$and"][2] == {"total": {"$gte": 0.5, "$lte": Decimal128("1.2345678901234567")}}
    assert rendered["$and"][3] == {"big": {"$lt": 1e40}}
    bson.encode(rendered)
