"""Records whose Connect schema the merge already knows are cut by prefix and parsed in
one pass; the rest are found by search. Whatever the merge knows beforehand, a batch
parses to the same typed rows, and a held-back record's value comes back byte for byte."""

from __future__ import annotations

import json

import pytest

from cdc_core.events.connect_schema import field
from tests.support.events import FIELDS, event, row, tombstone, transaction

pytestmark = pytest.mark.integration

WIDER = [*FIELDS, field("string", "nickname")]


def batch() -> list[dict]:
    """More records of one schema than the merge samples, then a second schema of the
    table (a column added), a record in another JSON layout, a tombstone and
    transaction boundaries, one transaction left open."""
    records = [event("c", (0, n, 1), after=row(n, f"a{n}")) for n in range(1, 41)]
    records += [
        event(
            "u", (0, 41, 1), before=row(1, "a1"), after=row(1, "b1", extra={"nickname": "x"}), fields=WIDER
        ),
        event("c", (0, 42, 1), after=row(42, "c42", extra={"nickname": "y"}), fields=WIDER),
        event("d", (0, 43, 1), before=row(2, "a2")),
        tombstone(2),
        transaction("BEGIN", 44),
        event("c", (0, 44, 1), after=row(44, "held")),  # its END is not in the batch
    ]
    spaced = event("c", (0, 45, 1), after=row(45, "spaced"))
    records.append(dict(spaced, value=json.dumps(json.loads(spaced["value"]))))
    records += [transaction("END", n, {"shop.accounts": 1}) for n in (*range(1, 44), 45)]
    return records


def parsed_outcome(spark, records, known):
    """The typed change rows and the held-back records' values the merge derives."""
    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.changes import table_changes
    from spark_jobs.merge.cutting import value_text
    from spark_jobs.merge.transactions import split_complete

    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    with parsed_batch(frame, "tm", known) as (parsed, shapes):
        (changes,) = table_changes(parsed, {"tm.shop.accounts"}, shapes)
        rows = sorted(map(repr, changes.rows.collect()))
        split = split_complete(parsed, "tm")
        try:
            held = split.held.select("topic", "key", value_text(shapes.texts()).alias("value")).collect()
        finally:
            split.release()
        return rows, sorted(map(tuple, held)), shapes


def test_a_batch_parses_alike_whatever_schemas_are_known(spark):
    from spark_jobs.merge.known_schemas import KnownSchemas

    records = batch()
    cold = KnownSchemas()  # learns the first schema from its sample only
    first = parsed_outcome(spark, records, cold)
    assert [t for t, _ in cold.pairs() if t == "tm.shop.accounts"] == ["tm.shop.accounts"] * 2
    warm = parsed_outcome(spark, records, cold)  # everything known but the spaced record's
    rows, held, shapes = first
    assert (warm[0], warm[1]) == (rows, held)
    assert any("nickname='x'" in r for r in rows) and len(rows) == 45
    assert held == sorted(
        (r["topic"], r["key"], r["value"]) for r in records if "0-1-44" in (r["value"] or "")
    )
    assert shapes.records["tm.shop.accounts"] == 45


def test_the_schema_text_is_taken_only_when_it_is_a_whole_object():
    from spark_jobs.merge.known_schemas import schema_of

    value = event("c", (0, 1, 1), after=row(1, "a"))["value"]
    assert json.loads(schema_of(value)) == json.loads(value)["schema"]
    odd = [*FIELDS[:1], field("string", "name", parameters={"note": "n", "payload": "p"}), *FIELDS[2:]]
    assert schema_of(event("c", (0, 1, 1), after=row(1, "a"), fields=odd)["value"]) is None
    assert schema_of('{"payload":{"op":"c"}}') is None and schema_of(None) is None


def test_known_schemas_are_kept_in_the_checkpoint_and_a_bad_file_is_a_search(spark, tmp_path, caplog):
    from spark_jobs.merge.known_schemas import FILE, KnownSchemas

    records = batch()
    learned = KnownSchemas()
    expected = parsed_outcome(spark, records, learned)
    learned.save(spark, str(tmp_path))
    again = KnownSchemas.load(spark, str(tmp_path))
    assert again.pairs() == learned.pairs()
    assert parsed_outcome(spark, records, again)[:2] == expected[:2]
    (tmp_path / FILE).write_text('{"version": 1, "topics": ')  # torn
    assert KnownSchemas.load(spark, str(tmp_path)).pairs() == []
    assert "schemas are found by search again" in caplog.text
    assert KnownSchemas.load(spark, str(tmp_path / "none")).pairs() == []


def test_the_key_columns_come_from_the_batch_not_from_what_was_known(spark):
    """A key sampled in an earlier batch (or run) names the columns of that time: a table
    whose primary key changed without its value schema changing merges on the new key."""
    from spark_jobs.merge.batches import parsed_batch
    from spark_jobs.merge.changes import table_changes
    from spark_jobs.merge.known_schemas import KnownSchemas, schema_of

    records = [event("c", (0, n, 1), after=row(n, f"a{n}")) for n in range(1, 4)]
    known = KnownSchemas()
    stale = json.dumps({"schema": {"type": "struct", "fields": [{"field": "name", "type": "string"}]},
                        "payload": {"name": "a1"}})  # fmt: skip
    known.add("tm.shop.accounts", schema_of(records[0]["value"]), stale)
    frame = spark.createDataFrame(records, "topic STRING, key STRING, value STRING")
    with parsed_batch(frame, "tm", known) as (parsed, shapes):
        (changes,) = table_changes(parsed, {"tm.shop.accounts"}, shapes)
    assert changes.key_columns == ("id",)
