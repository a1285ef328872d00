"""The merge's known-schemas file: a head start for the next run, never a source of rows."""

from __future__ import annotations

import json

import pytest

from spark_jobs.merge.known_schemas import KnownSchemas

SCHEMA_A = '{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"name":"a"}'
SCHEMA_B = '{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"name":"b"}'
# As version 1 writes it (sort_keys, newest schema first per topic).
FROZEN_V1 = json.dumps(
    {"topics": {"tm.shop.accounts": {"schemas": [SCHEMA_B, SCHEMA_A]}, "tm.transaction": {"schemas": [SCHEMA_A]}},
     "version": 1}
)  # fmt: skip


def test_a_version_1_file_reads_back_newest_first():
    known = KnownSchemas.from_json(json.loads(FROZEN_V1))
    assert known.pairs() == [
        ("tm.shop.accounts", SCHEMA_B),
        ("tm.shop.accounts", SCHEMA_A),
        ("tm.transaction", SCHEMA_A),
    ]
    assert KnownSchemas.from_json(known.to_json()).pairs() == known.pairs()


def test_entries_that_are_not_a_whole_schema_object_are_left_out():
    body = json.loads(FROZEN_V1)
    body["topics"]["tm.shop.accounts"]["schemas"] = [
        "not json",
        '{"fields":[]},"payload":{"x":1}',  # would cut a value at the wrong place
        ["a list"],
        SCHEMA_A,
    ]
    assert KnownSchemas.from_json(body).pairs() == [
        ("tm.shop.accounts", SCHEMA_A),
        ("tm.transaction", SCHEMA_A),
    ]


@pytest.mark.parametrize("body", [{"version": 2, "topics": {}}, {"topics": {}}, ["v1"]])
def test_a_file_of_another_version_is_refused(body):
    with pytest.raises(ValueError, match="version"):
        KnownSchemas.from_json(body)
