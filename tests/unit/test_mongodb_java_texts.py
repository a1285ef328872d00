"""Every BSON value MongoDB stores, built by hand (the deprecated types, dates of any year,
Decimal128 specials, every binary subtype, a repeated name, text that is not UTF-8), is
written by both renderers exactly as the MongoDB Java driver writes it in Debezium's
records: `data/mongodb_java_texts.json` holds the driver's own texts (5.6.2, Debezium's
settings; `tests/support/mongo/JavaTexts.java`). Random documents of all of them give
both renderers' same bytes; malformed ones are refused by both, as by the driver; the
JDK's decoding of text that is not UTF-8 is followed."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.bson_text import (
    RELAXED,
    STRICT,
    MalformedBson,
    document_text,
    elements,
    value_of,
)
from cdc_core.connectors.mongodb.java_bson import decimal128_text, java_utf8
from tests.support.mongo.bson_bytes import (
    arr,
    change_event,
    decimal128,
    doc_of,
    document,
    element,
    int32,
    int64,
    malformed_variants,
    random_document,
    sub,
    text,
)

CASES = json.loads((Path(__file__).parent / "data" / "mongodb_java_texts.json").read_text())["cases"]
compiled = pytest.mark.skipif(not rendering.available(), reason="the transcoder is not built (make install)")


def value_bytes(case: dict) -> tuple[int, bytes]:
    """The case's value (its document is {"v": value})."""
    ((_, found),) = elements(bytes.fromhex(case["bson"]))
    return found.kind, found.data


def reply(*documents: bytes) -> bytes:
    """A `find` reply holding `documents`, as a server sends it."""
    batch = document(*(element(3, str(i), d) for i, d in enumerate(documents)))
    return doc_of(("cursor", sub(doc_of(("firstBatch", arr(batch)), ("id", int64(0))))), ("ok", int32(1)))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_python_path_writes_each_value_as_the_java_driver_does(case):
    raw = bytes.fromhex(case["bson"])
    assert document_text(raw, STRICT) == '{"v": ' + case["strict"] + "}"
    assert document_text(raw, RELAXED) == '{"v": ' + case["relaxed"] + "}"
    assert document_text(raw, RELAXED, ", ") == '{"v": ' + case["relaxed_spaced"] + "}"


@compiled
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_compiled_renderer_writes_each_value_as_the_java_driver_does(case):
    """As a snapshot's document and its `_id`, and in an update's `updatedFields`."""
    kind, payload = value_bytes(case)
    ids, texts, left, _ = rendering.render_reply(reply(doc_of(("_id", (kind, payload)))))
    assert left == []
    assert ids == [case["relaxed"]]
    assert texts == ['{"_id": ' + case["strict"] + "}"]
    update = change_event(1, "update", None, int32(1), updated=doc_of(("v", (kind, payload))))
    ((*_, rows, _, _, _, _, _),) = rendering.render([update], 0, "tm", "v", ("", ""), None, 0, 0, 0, False)
    ((_, _, payload_json),) = rows
    updated = orjson.loads(payload_json)["updateDescription"]["updatedFields"]
    assert updated == '{"v": ' + case["relaxed_spaced"] + "}"


def test_a_repeated_name_keeps_its_first_place_and_its_last_value():
    """The Java driver's `BsonDocument` is a LinkedHashMap: `put` of a name it has keeps
    the place and takes the value. pymongo's dict does the same; the old compiled
    renderer left such a document to pymongo."""
    raw = doc_of(("_id", int32(1)), ("a", int32(1)), ("b", int32(2)), ("a", text("last")))
    assert document_text(raw, STRICT) == '{"_id": 1,"a": "last","b": 2}'
    assert value_of(raw, "a").text(RELAXED) == '"last"'


def test_decimal128_is_written_as_javas_to_string():
    assert decimal128_text(bytes.fromhex("00" * 15 + "7c")) == "NaN"
    assert decimal128_text(decimal128(1, 0xB040000000000000)[1]) == "-1"
    assert decimal128_text(decimal128(1, 0x3040000000000000 - (7 << 49))[1]) == "1E-7"
    assert decimal128_text(decimal128(125, 0x3040000000000000 - (2 << 49))[1]) == "1.25"
    assert decimal128_text(decimal128(0, 0x3040000000000000 + (3 << 49))[1]) == "0E+3"


def test_text_that_is_not_utf8_is_decoded_as_the_jdk_decodes_it():
    """One U+FFFD per malformed sequence as the JDK groups them (a surrogate's three bytes
    are one; Python's decoder makes three); a sequence cut short at the end ends it."""
    assert java_utf8(b"a\xed\xa0\x80b") == "a\ufffdb"
    assert java_utf8(b"\xff\xfe") == "\ufffd\ufffd"
    assert java_utf8(b"a\xe2\x82") == "a\ufffd"
    assert java_utf8(b"\xf0\x9f\x99x") == "\ufffdx"
    assert java_utf8(b"\xc0\xaf") == "\ufffd\ufffd"
    assert java_utf8("é🙂".encode()) == "é🙂"


def every_type_documents(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    keys = [int32(5), text("k"), decimal128(7, 0x3040000000000000), sub(doc_of(("a", int32(1))))]
    return [random_document(rng, id_value=rng.choice(keys)) for _ in range(count)]


@compiled
def test_random_documents_of_every_type_give_both_renderers_the_same_bytes():
    documents = every_type_documents(20261201, 1500)
    ids, texts, left, _ = rendering.render_reply(memoryview(reply(*documents)))
    assert left == []
    for raw, key, rendered in zip(documents, ids, texts, strict=True):
        assert rendered == document_text(raw, STRICT)
        assert key == value_of(raw, "_id").text(RELAXED)


@compiled
def test_malformed_documents_are_refused_by_both_as_the_java_driver_refuses_them():
    """An unknown type byte, a boolean of 2, a string or document whose length does not
    fit, an old binary whose lengths differ: the compiled renderer leaves each to the
    Python path, which refuses it, naming what is wrong."""
    good = every_type_documents(7, 40)
    broken = [m for d in good for m in malformed_variants(d)[:5]]
    broken += [doc_of(("_id", int32(1)), ("x", sub(m))) for m in broken[:40]]  # nested
    _, _, left, _ = rendering.render_reply(reply(*good, *broken))
    assert [index for index, _ in left] == list(range(len(good), len(good) + len(broken)))
    for raw in broken:
        with pytest.raises(MalformedBson):
            document_text(raw, STRICT)
