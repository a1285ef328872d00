"""`field.exclude.list` and `field.renames` as Debezium's MongoDB connector applies them
(`FieldSelector`): the expected texts of Debezium's own integration tests
(FieldRenamesIT, FieldExcludeListIT) for read, insert and update events, renamed members
at the end of their document, into arrays of documents, `updatedFields` by dotted name,
removed fields' names; both renderers the same bytes on random documents and rules, in
change events and snapshot reads; namespaces matched with `*`, case-insensitively; a
rename onto an existing name following event.processing.failure.handling.mode."""

from __future__ import annotations

import random

import orjson
import pytest

from cdc_core.config.connector_config import ConfigError
from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.bson_text import RELAXED, STRICT, document_text
from cdc_core.connectors.mongodb.field_rules import (
    FieldRules,
    RuleConflict,
    apply_to_change,
    apply_to_document,
    apply_to_name,
)
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.source import SkippedEvent
from tests.support.mongo.bson_bytes import (
    TRUE,
    arr,
    array,
    change_event,
    doc_of,
    document,
    double,
    element,
    int32,
    int64,
    oid,
    random_value,
    sub,
    text,
)
from tests.unit.test_mongodb_java_texts import compiled, reply
from tests.unit.test_mongodb_transcoder import (
    fixed_clock,
    records,
    same_records,
    source,
    through_python,
    through_renderer,
)

__all__ = ["fixed_clock"]  # the records' processing time, fixed (an autouse fixture)

OID = "65a1b2c3d4e5f60718293a4b"
C1 = TableId("db", "c1")


def rules(excludes: str = "", renames: str = "") -> tuple:
    parsed = FieldRules([e for e in excludes.split(",") if e], [r for r in renames.split(",") if r])
    return parsed.of_table(C1)


def sally(with_address: bool = True) -> bytes:
    members = [("_id", oid(OID)), ("name", text("Sally")), ("phone", int64(123))]
    if with_address:
        address = doc_of(
            ("number", int64(34)), ("street", text("Claude Debussylaan")), ("city", text("Amsterdam"))
        )
        members.append(("address", sub(address)))
    members += [("active", TRUE), ("scores", arr(array(double(1.2), double(3.4), double(5.6))))]
    return doc_of(*members)


def test_renamed_fields_go_to_the_end_of_their_document_as_in_debeziums_read_and_insert_events():
    """FieldRenamesIT.shouldRenameNestedFieldsForReadEvent (and ...ForInsertEvent)."""
    paths = rules(renames="*.c1.name:new_name,*.c1.active:new_active,*.c1.address.number:new_number")
    assert document_text(apply_to_document(sally(), paths), STRICT) == (
        '{"_id": {"$oid": "' + OID + '"},"phone": {"$numberLong": "123"},'
        '"address": {"street": "Claude Debussylaan","city": "Amsterdam","new_number": {"$numberLong": "34"}},'
        '"scores": [1.2,3.4,5.6],"new_name": "Sally","new_active": true}'
    )


def test_updated_fields_are_renamed_by_their_dotted_names_as_in_debeziums_update_events():
    """FieldRenamesIT.shouldRenameNestedFieldsForSetNestedFieldUpdateEvent (`$set` of
    `name` and `address.*`) and ...WithArrayOfEmbeddedDocuments (`addresses.0.*`)."""
    updated = doc_of(("address.city", text("Amsterdam")), ("address.number", int64(34)),
                     ("address.street", text("Claude Debussylaan")), ("name", text("Sally")))  # fmt: skip
    paths = rules(renames="*.c1.name:new_name,*.c1.address.number:new_number")
    assert document_text(apply_to_change(updated, paths), RELAXED, ", ") == (
        '{"address.city": "Amsterdam", "address.street": "Claude Debussylaan", "new_name": "Sally", '
        '"address.new_number": 34}'
    )
    updated = doc_of(("addresses.0.city", text("Amsterdam")), ("addresses.0.number", int64(34)),
                     ("addresses.0.street", text("Claude Debussylaan")), ("name", text("Sally")))  # fmt: skip
    assert document_text(
        apply_to_change(updated, rules(renames="*.c1.addresses.number:new_number")), RELAXED, ", "
    ) == (
        '{"addresses.0.city": "Amsterdam", "addresses.0.street": "Claude Debussylaan", "name": "Sally", '
        '"addresses.0.new_number": 34}'
    )


def test_excluded_fields_leave_arrays_of_documents_updated_fields_and_removed_names():
    """FieldExcludeListIT: `addresses.number` out of each address and of `addresses.0.*`;
    an unset of `name` and `phone` with `name` excluded removes only `phone`."""
    addresses = array(
        (0x03, doc_of(("number", int64(45)), ("street", text("a")))),
        (0x03, doc_of(("number", int64(8)), ("street", text("b")))),
        (0x04, array((0x03, doc_of(("number", int32(1)))))),  # arrays of arrays are not looked into
    )
    full = doc_of(("_id", int32(1)), ("addresses", arr(addresses)))
    paths = rules("*.c1.addresses.number")
    assert document_text(apply_to_document(full, paths), STRICT) == (
        '{"_id": 1,"addresses": [{"street": "a"},{"street": "b"},[{"number": 1}]]}'
    )
    updated = doc_of(("addresses.0.city", text("x")), ("addresses.0.number", int64(34)), ("name", text("S")))
    assert (
        document_text(apply_to_change(updated, paths), RELAXED, ", ")
        == '{"addresses.0.city": "x", "name": "S"}'
    )
    names = rules("*.c1.name")
    assert [apply_to_name(n, names) for n in ("name", "phone")] == [None, "phone"]
    # a removed name equal to or a parent of the rule's path matches it (as Debezium has it)
    assert [apply_to_name(n, rules("*.c1.a.b")) for n in ("a", "a.b", "a.b.c", "a.0.b")] == [
        None,
        None,
        "a.b.c",
        None,
    ]
    assert apply_to_name("a.0.b", rules(renames="*.c1.a.b:c")) == "a.0.c"


def test_a_name_that_is_a_prefix_of_a_rule_has_the_rest_of_it_applied_inside_its_value():
    updated = doc_of(("address", sub(doc_of(("number", int32(1)), ("city", text("x"))))), ("z", int32(2)))
    paths = rules(renames="*.c1.address.number:n")
    assert (
        document_text(apply_to_change(updated, paths), RELAXED, ", ")
        == '{"address": {"city": "x", "n": 1}, "z": 2}'
    )


def test_rules_apply_to_the_collections_their_namespace_matches_with_wildcards_case_insensitively():
    parsed = FieldRules(["*.C1.secret", "shop.orders.card", "sh*p.ord*.pin"], ["*.*.old:new"])
    assert [p.field for p in parsed.of_table(TableId("db", "c1"))] == ["secret", "old"]
    assert [p.field for p in parsed.of_table(TableId("shop", "orders"))] == ["card", "pin", "old"]
    assert [p.field for p in parsed.of_table(TableId("shop", "orders_x"))] == ["pin", "old"]


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ("field.exclude.list", "db.c1"),
        ("field.exclude.list", "db.c1.a b"),
        ("field.renames", "db.c1.a"),
        ("field.renames", "db.c1.a:b:c"),
        ("field.renames", "db.c1.a:b.c"),
    ],
)
def test_a_rule_not_of_debeziums_form_is_refused_naming_it(tmp_path, prop, value):
    with pytest.raises(ConfigError, match="is not of the form"):
        source(tmp_path, f"{prop}: {value!r}\n")


def test_a_rename_onto_an_existing_name_cannot_be_applied():
    """Debezium throws ("Document already contains field"): the change follows
    event.processing.failure.handling.mode."""
    with pytest.raises(RuleConflict, match="already has 'city'"):
        apply_to_document(sally(), rules(renames="*.c1.address.street:city"))


# ---------------------------------------------------------------------------- both renderers

RULES = (
    "field.exclude.list: 'shop.orders.f1,shop.*.f2.f3,*.users.f4.0'\n"
    "field.renames: 'shop.orders.f5:g5,shop.orders.f2.f6:g6,*.*.f7.f8:g8,shop.users.f0:f9'\n"
)


def nested_document(rng: random.Random, depth: int = 0) -> bytes:
    """Documents whose names the rules above name, nested in documents and arrays."""
    members = []
    for _ in range(rng.randrange(1, 6)):
        name = f"f{rng.randrange(10)}"
        pick = rng.random()
        if depth < 3 and pick < 0.3:
            members.append((name, sub(nested_document(rng, depth + 1))))
        elif depth < 3 and pick < 0.45:
            items = [
                sub(nested_document(rng, depth + 1)) if rng.random() < 0.7 else random_value(rng, 3)
                for _ in range(rng.randrange(3))
            ]
            members.append((name, arr(array(*items))))
        else:
            members.append((name, random_value(rng, 3)))
    return doc_of(*members)


def dotted_updates(rng: random.Random) -> bytes:
    """`updatedFields` naming the rules' paths, their parents, children and indexes."""
    names = [
        "f1",
        "f2.f3",
        "f2.0.f3",
        "f2.f6",
        "f2.f6.x",
        "f5",
        "f5.0",
        "f7.f8",
        "f7",
        "f2",
        "f9",
        "f0.0.0.f1",
    ]
    members = []
    for name in rng.sample(names, rng.randrange(1, 5)):
        kind, payload = rng.choice([int32(1), text("v"), sub(nested_document(rng, 2))])
        members.append(element(kind, name, payload))
    return document(*members)


def rule_events(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    raws = []
    for i in range(count):
        full = doc_of(
            ("_id", int32(i)), *((f"f{n}", sub(nested_document(rng, 1))) for n in rng.sample(range(10), 4))
        )
        kind = ["insert", "update", "replace", "delete"][i % 4]
        raws.append(
            change_event(
                i,
                kind,
                None if kind == "delete" else full,
                int32(i),
                collection=["orders", "users", "other"][i % 3],
                before=full if kind != "insert" and i % 2 else None,
                updated=dotted_updates(rng) if kind == "update" else None,
            )
        )
    return raws


@compiled
def test_both_renderers_apply_the_rules_to_random_documents_the_same_way(tmp_path):
    """Rename conflicts included: those changes go the Python way and are skipped."""
    raws = rule_events(20261202, 400)
    extra = RULES + "event.processing.failure.handling.mode: skip\n"
    rendered = same_records(tmp_path, raws, extra)
    src = source(tmp_path, extra)
    items = through_python(src, raws)[0]
    skipped = sum(isinstance(i, SkippedEvent) for i in items)
    # the first change of each collection goes the Python way (its rules are then known)
    assert rendered == len(raws) - skipped - 3
    got, _ = records(src, items)
    afters = [orjson.loads(r[2])["after"] for r in got if r[2] and orjson.loads(r[2]).get("after")]
    assert any('"g5"' in a for a in afters) and not any('"f1"' in a for a in afters if "orders" in a)


@compiled
def test_rules_of_a_collection_renamed_in_an_event_are_in_its_record(tmp_path):
    raw = change_event(1, "insert", sally(), oid(OID), collection="c1")
    src = source(tmp_path, "field.renames: '*.c1.name:new_name'\n")
    for path in (through_python, through_renderer):
        got, _ = records(src, path(src, [raw, raw])[0])
        assert orjson.loads(got[0][2])["after"].endswith('"new_name": "Sally"}')
        assert got[0][1] == b'{"id":"{\\"$oid\\": \\"' + OID.encode() + b'\\"}"}'  # the key keeps its _id


def test_a_rename_conflict_stops_the_stream_under_fail(tmp_path):
    raw = change_event(1, "insert", sally(), oid(OID), collection="c1")
    src = source(tmp_path, "field.renames: '*.c1.address.street:city'\n")
    with pytest.raises(TidemarkError, match="already has 'city'"):
        through_python(src, [raw])


@compiled
def test_snapshot_reads_apply_the_rules_as_the_stream_does():
    """A window's raw `find` replies (the compiled renderer, else `bson_text.py`)."""
    rng = random.Random(5)
    documents = [
        doc_of(("_id", int32(i)), *((f"f{n}", sub(nested_document(rng, 1))) for n in range(10)))
        for i in range(60)
    ]
    paths = FieldRules(["shop.orders.f1", "shop.*.f2.f3"], ["shop.orders.f5:g5", "*.*.f7.f8:g8"]).of_table(
        TableId("shop", "orders")
    )
    ids, texts, cursor = rendering.reply_documents(reply(*documents), paths=paths)
    want = [document_text(apply_to_document(d, paths), STRICT) for d in documents]
    assert texts == want and cursor == 0
    assert ids == [str(i) for i in range(60)]
    assert all('"g5": ' in t for t in texts)
    assert texts != [document_text(d, STRICT) for d in documents]


def test_a_window_staged_under_other_field_rules_has_another_staged_form(tmp_path):
    """The staged form's digest (which a window-close carries, and which the streamer
    compares with its own before releasing) changes with the collection's field rules: a
    window staged before a field was excluded is read again rather than released with it."""
    from cdc_core.connectors.mongodb.field_rules import FieldRules
    from cdc_core.connectors.mongodb.shape import MongoTypeMapper, collection_schema
    from cdc_core.filters import ColumnRules
    from cdc_core.schema.model import TableId
    from cdc_core.snapshot.staged_form import StagedForm
    from tests.unit.test_dispatcher import config

    schema = collection_schema(TableId("shop", "users"))
    rules = ColumnRules(config(tmp_path))

    def digest(excludes: list[str]) -> str:
        types = MongoTypeMapper(FieldRules(excludes, []) if excludes else None)
        return StagedForm(schema, rules, types, ("_id",)).digest

    assert digest([]) == digest(["shop.orders.card"])  # another collection's rule: the same form
    assert digest([]) != digest(["shop.users.card"]) != digest(["shop.users.ssn"])
