"""`_id` windows in MongoDB's own order of BSON types, JavaScript code included.

MongoDB compares values of different types by `canonicalizeBSONType`
(src/mongo/bson/bsontypes.h): MinKey, undefined 0, null 5, numbers 10, string/symbol 15,
object 20, array 25, binData 30, objectId 35, bool 40, date 45, timestamp 47, regex 50,
dbPointer 55, javascript 60, javascriptWithScope 65, MaxKey. `$gt`/`$lte` compare within
one of those brackets only. The test server cannot hold a JavaScript `_id` (it cannot sort
one), so the windows' filters are checked here against a matcher with those two rules."""

from __future__ import annotations

import datetime as dt
import itertools
from decimal import Decimal

import pytest
from bson import Binary, Code, Decimal128, Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from bson.dbref import DBRef

from cdc_core.connectors.mongodb.filters import BRACKETS, after, bracket_of, chunk_filter, up_to

# canonicalizeBSONType's rank of each type alias
RANK = {
    "minKey": -1, "undefined": 0, "null": 5, "double": 10, "int": 10, "long": 10, "decimal": 10, "string": 15,
    "symbol": 15, "object": 20, "array": 25, "binData": 30, "objectId": 35, "bool": 40, "date": 45,
    "timestamp": 47, "regex": 50, "dbPointer": 55, "javascript": 60, "javascriptWithScope": 65, "maxKey": 127,
}  # fmt: skip


def alias_of(value):
    """The `$type` alias of a value, as the test sees it (independently of `bracket_of`)."""
    if value is None:
        return "null"
    for kind, alias in (
        (MinKey, "minKey"), (MaxKey, "maxKey"), (bool, "bool"), (Int64, "long"), (int, "int"),
        (float, "double"), (Decimal128, "decimal"), (ObjectId, "objectId"), (Binary, "binData"),
        (dt.datetime, "date"), (Timestamp, "timestamp"), (Regex, "regex"), (DBRef, "object"), (dict, "object"),
    ):  # fmt: skip
        if isinstance(value, kind):
            return alias
    if isinstance(value, Code):
        return "javascript" if value.scope is None else "javascriptWithScope"
    assert isinstance(value, str)
    return "string"


def order_key(value):
    """Where MongoDB sorts a value: its type's rank, then its value within the type."""
    alias = alias_of(value)
    rank = RANK[alias]
    if rank == 10:
        inner = Decimal(str(value.to_decimal() if isinstance(value, Decimal128) else value))
    elif alias in ("javascript", "javascriptWithScope", "string"):
        inner = str(value)
    elif alias == "object":
        inner = sorted(value.as_doc().items() if isinstance(value, DBRef) else value.items())
    elif alias in ("minKey", "maxKey", "null"):
        inner = 0
    elif alias == "timestamp":
        inner = (value.time, value.inc)
    else:
        inner = value
    return rank, inner


def matches(spec, value) -> bool:
    """`spec` (what `chunk_filter` makes) on a document whose `_id` is `value`."""
    if not spec:
        return True
    if "$and" in spec:
        return all(matches(s, value) for s in spec["$and"])
    if "$or" in spec:
        return any(matches(s, value) for s in spec["$or"])
    ((field, ops),) = spec.items()
    assert field == "_id"
    if not isinstance(ops, dict):  # equality
        return order_key(value) == order_key(ops)
    result = True
    for op, bound in ops.items():
        if op == "$type":
            result &= alias_of(value) in bound
            continue
        (rank, mine), (bound_rank, theirs) = order_key(value), order_key(bound)
        if rank != bound_rank:  # MongoDB's $gt/$lte compare within one type bracket only
            return False
        result &= {"$gt": mine > theirs, "$lte": mine <= theirs}[op]
    return result


IDS = [
    MinKey(), None, -5, 2.5, Int64(10), Decimal128("10.5"), "a", "zz", {"k": 1}, Binary(b"\x01", 0),
    ObjectId("0" * 23 + "1"), False, True, dt.datetime(2020, 1, 1, tzinfo=dt.UTC), Timestamp(5, 1),
    Code("a()"), Code("f()"), Code("z()"), Code("b()", {"x": 1}), Code("c()", {"x": 1}), MaxKey(),
]  # fmt: skip


def test_each_type_falls_in_the_bracket_mongodb_ranks_it_in():
    assert [RANK[aliases[0]] for aliases in BRACKETS] == sorted({RANK[a] for a in RANK})
    for aliases in BRACKETS:
        assert len({RANK[a] for a in aliases}) == 1, aliases  # one rank per bracket
    for value in [*IDS, DBRef("c", 1), Regex("x")]:
        assert RANK[BRACKETS[bracket_of(value)][0]] == RANK[alias_of(value)], value


def test_code_is_its_own_bracket_after_regex_and_before_code_with_scope():
    assert after(Code("f()"), frozenset()) == {
        "$or": [{"_id": {"$gt": Code("f()")}}, {"_id": {"$type": ["javascriptWithScope", "maxKey"]}}]
    }
    earlier = up_to(Code("f()"), frozenset())["$or"][1]["_id"]["$type"]
    assert earlier == [
        "minKey", "undefined", "null", "double", "int", "long", "decimal", "string", "symbol", "object", "array",
        "binData", "objectId", "bool", "date", "timestamp", "regex", "dbPointer",
    ]  # fmt: skip
    # a server that knows no JavaScript alias (the test server) holds no such `_id`: left out
    unknown = frozenset({"javascript", "javascriptWithScope"})
    assert after(Timestamp(1, 1), unknown)["$or"][1] == {"_id": {"$type": ["regex", "dbPointer", "maxKey"]}}
    assert chunk_filter((Code("a()"),), (Code("z()"),), None) == {
        "_id": {"$gt": Code("a()"), "$lte": Code("z()")}
    }


@pytest.mark.parametrize("size", [1, 2, 3, 5, len(IDS)])
def test_windows_over_mixed_ids_read_each_document_once_in_server_order(size):
    in_server_order = sorted(IDS, key=order_key)
    bounds = [None, *((v,) for v in in_server_order[size - 1 :: size]), None]  # keys; None: no bound
    read = []
    for lo, hi in itertools.pairwise(bounds):
        spec = chunk_filter(lo, hi, None)
        read += sorted((v for v in IDS if matches(spec, v)), key=order_key)
    assert read == in_server_order
