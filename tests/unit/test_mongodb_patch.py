"""An update's `updateDescription` (in the envelope's form) applied to the document it
changed, as the Delta merge rebuilds documents of `capture.mode: change_streams`: the
descriptions are MongoDB's documented shapes, kept as data."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from bson import Decimal128, Int64, ObjectId, json_util

from cdc_core.connectors.mongodb.ext_json import relaxed, strict
from cdc_core.connectors.mongodb.patch import apply_update
from cdc_core.errors import TidemarkError

BASE = {
    "_id": ObjectId("0000000000000000000000a1"),
    "name": "widget",
    "count": Int64(2**40),
    "price": Decimal128("9.99"),
    "tags": ["a", "b", "c", "d"],
    "dims": {"w": 1, "h": 2},
    "at": dt.datetime(2025, 1, 2, 3, 4, 5, 678000),
}


def description(updated=None, removed=None, truncated=None) -> str:
    """The envelope's `updateDescription` (cdc_core/connectors/mongodb/events.py)."""
    return json.dumps(
        {
            "removedFields": removed,
            "updatedFields": None if updated is None else relaxed(updated, ", "),
            "truncatedArrays": truncated,
        }
    )


def applied(change: str, base: dict = BASE) -> dict:
    return json_util.loads(apply_update(strict(base), change))


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (description({"name": "gadget", "dims.h": 3}), {"name": "gadget", "dims": {"w": 1, "h": 3}}),
        (description({"tags.1": "B"}), {"tags": ["a", "B", "c", "d"]}),
        (description({"tags.6": "g"}), {"tags": ["a", "b", "c", "d", None, None, "g"]}),  # padded
        (description({"new.deep.field": 1}), {"new": {"deep": {"field": 1}}}),
        (description(removed=["dims.w", "name", "absent.field"]), {"dims": {"h": 2}}),
        (description(truncated=[{"field": "tags", "size": 2}]), {"tags": ["a", "b"]}),
        (  # a pipeline update: truncation first, then its sets
            description({"tags.1": "x"}, truncated=[{"field": "tags", "size": 2}]),
            {"tags": ["a", "x"]},
        ),
        (description({"at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}), {"at": dt.datetime(2026, 1, 1)}),
    ],
)
def test_a_change_applies_to_its_document_and_the_rest_is_kept(change, expected):
    doc = applied(change)
    removed = json.loads(change)["removedFields"] or []
    assert doc == {k: v for k, v in {**BASE, **expected}.items() if k not in removed}
    assert isinstance(doc["count"], Int64) and isinstance(doc["price"], Decimal128)  # untouched: exact


def test_the_text_is_what_the_envelope_carries_for_the_same_document():
    change = description({"name": "gadget"}, removed=["tags"])
    expected = {k: v for k, v in BASE.items() if k != "tags"} | {"name": "gadget"}
    assert apply_update(strict(BASE), change) == strict(expected)


def test_without_a_document_there_is_nothing_to_change():
    assert apply_update(None, description({"name": "x"})) is None


def test_a_path_through_a_scalar_is_an_error_naming_it():
    with pytest.raises(TidemarkError, match="sets name.first, but name is not a document"):
        apply_update(strict(BASE), description({"name.first": "x"}))
