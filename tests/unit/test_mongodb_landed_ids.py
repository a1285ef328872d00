"""A document's `_id` as Delta lands it (`landed_ids.py`): the record key's relaxed text
rewritten as the strict text its document holds, for every `_id` type; keys called
plain are their own landed form."""

from __future__ import annotations

import datetime as dt
import random
import re
import uuid

import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.datetime_ms import DatetimeMS

from cdc_core.connectors.mongodb.ext_json import relaxed, strict
from cdc_core.connectors.mongodb.landed_ids import PLAIN, landed_id

IDS = [
    ObjectId("656f00000000000000000abc"),
    "abc",
    'quote " backslash \\ newline \n é $date',
    "",
    0,
    -7,
    2**31 - 1,
    -(2**31),
    2**31,
    Int64(2**40),
    Int64(-(2**63)),
    1.5,
    5.0,
    -0.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e20,
    5e-324,
    Decimal128("1.0E+3"),
    Decimal128("NaN"),
    Decimal128("-0"),
    dt.datetime(2024, 1, 2, 3, 4, 5, 470000, tzinfo=dt.UTC),
    dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC),
    DatetimeMS(253402300800000 + 5),
    DatetimeMS(-62135596800000 - 1000),
    Binary(b"\x01\x02\x03", 4),
    Binary.from_uuid(uuid.UUID(int=1)),
    Binary(b"", 0x80),
    b"xyz",
    Regex("a.b", "i"),
    Timestamp(4_000_000_000, 7),
    MinKey(),
    MaxKey(),
    True,
    False,
    None,
    {"region": "eu", "n": 100004},
    {"z": 1, "a": {"$x": [1, 2, {"c": Int64(2**35)}], "when": dt.datetime(2020, 1, 1, tzinfo=dt.UTC)}},
    {"empty": {}, "list": [], "nested": [[], {}]},
    Code("x = 1"),
    Code("y", {"k": Int64(2**33), "d": -0.0}),
]


def _strict_value(value) -> str:
    """The `_id` member's text in the document's strict text."""
    text = strict({"_id": value})
    assert text.startswith('{"_id": ') and text.endswith("}")
    return text[len('{"_id": ') : -1]


@pytest.mark.parametrize("value", IDS, ids=lambda v: type(v).__name__)
def test_a_keys_landed_id_is_the_text_its_document_holds(value):
    assert landed_id(relaxed(value)) == _strict_value(value)


def test_an_int64_that_fits_32_bits_lands_as_the_int32_the_key_cannot_tell_it_from():
    """Relaxed text writes both alike, and MongoDB holds them one `_id`."""
    assert landed_id(relaxed(Int64(5))) == "5" == landed_id(relaxed(5))
    assert _strict_value(Int64(5)) == '{"$numberLong": "5"}'


def test_random_nested_ids_land_as_their_documents_write_them():
    rng = random.Random(64)

    def value(depth: int):
        kinds = [
            lambda: rng.randint(-(2**31), 2**31 - 1),
            lambda: Int64(rng.choice([-1, 1]) * rng.randint(2**31, 2**63 - 1)),
            lambda: rng.uniform(-1e6, 1e6),
            lambda: "".join(rng.choice('ab"\\$ é\t') for _ in range(rng.randint(0, 6))),
            lambda: (
                dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
                + dt.timedelta(milliseconds=rng.randint(-(10**12), 10**13))
            ),
            lambda: Binary(rng.randbytes(rng.randint(0, 9)), rng.choice([0, 3, 4, 5, 0x80])),
            lambda: ObjectId(rng.randbytes(12)),
        ]
        if depth < 3:
            kinds.append(lambda: {f"k{n}": value(depth + 1) for n in rng.sample(range(9), rng.randint(0, 4))})
            kinds.append(lambda: [value(depth + 1) for _ in range(rng.randint(0, 3))])
        return rng.choice(kinds)()

    for _ in range(500):
        found = value(0)
        if isinstance(found, list):
            found = {"list": found}
        assert landed_id(relaxed(found)) == _strict_value(found)


@pytest.mark.parametrize("value", IDS, ids=lambda v: type(v).__name__)
def test_a_key_called_plain_is_its_own_landed_form(value):
    text = relaxed(value)
    if re.match(PLAIN, text):
        assert landed_id(text) == text


def test_the_common_keys_are_plain():
    for value in (ObjectId(), "order-17", 123456789, -5):
        assert re.match(PLAIN, relaxed(value)), value
