"""Chunk boundaries survive JSON exactly, type included."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import orjson
import pytest

from cdc_core.errors import TidemarkError
from cdc_core.snapshot.keycodec import decode_key, encode_key


@pytest.mark.parametrize(
    "key",
    [
        (1,),
        (-(2**63), "é 🦀", 1.5),
        (Decimal("12.3400"),),
        (
            dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
            dt.date(1999, 12, 31),
            dt.timedelta(hours=-3, microseconds=7),
        ),
        (b"\x00\xffbin",),
        (True, None),
    ],
)
def test_round_trip_keeps_value_and_type(key):
    back = decode_key(orjson.loads(orjson.dumps(encode_key(key))))
    assert back == key
    assert [type(v) for v in back] == [type(v) for v in key]


def test_none_is_an_open_end_and_unknown_types_are_refused():
    assert encode_key(None) is None and decode_key(None) is None
    with pytest.raises(TidemarkError, match="cannot use a set value"):
        encode_key(({1},))


def test_a_type_a_source_registers_round_trips_as_its_own_text():
    """A MongoDB value kept as its BSON bytes (a snapshot's staged document, a date past
    year 9999 pymongo cannot decode) comes back as those bytes, not through pymongo."""
    from cdc_core.connectors.mongodb.bson_text import RawValue

    key = (RawValue(0x09, (253402300800000).to_bytes(8, "little")), RawValue(0x0E, b"\x02\x00\x00\x00s\x00"))
    encoded = orjson.loads(orjson.dumps(encode_key(key)))
    assert encoded == [{"$bsonvalue": "CQDcH9J35gAA"}, {"$bsonvalue": "DgIAAABzAA=="}]
    assert decode_key(encoded) == key


def test_a_window_of_a_registered_type_is_staged_in_parquet_and_read_back_as_itself(tmp_path):
    """The Spark chunk job stages a stream release's rows as read: a MongoDB window's
    `_id`s and documents as their BSON (pyarrow cannot hold them; the documents as
    inferred structs lost fields and types)."""
    from cdc_core.connectors.mongodb.bson_text import RawValue, document_value
    from cdc_core.snapshot.staging import read_parquet, write_parquet

    rows = [
        (
            RawValue(0x10, b"\x01\x00\x00\x00"),
            document_value(b"\x0c\x00\x00\x00\x10n\x00\x01\x00\x00\x00\x00"),
        ),
        (RawValue(0x02, b"\x02\x00\x00\x00k\x00"), None),
    ]
    uri = str(tmp_path / "w.parquet")
    write_parquet(uri, ("_id", "document"), rows)
    assert read_parquet(uri, ("_id", "document")) == rows
