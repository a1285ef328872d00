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
