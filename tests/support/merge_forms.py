"""The same hand-built records (tests/support/events.py) in each form the merge reads:
JSON with the Connect schema (Kafka, a `json` embedded log), schemaless JSON naming the
schema by reference, and the Parquet embedded log's files (typed parts, no JSON parsed).

FORMS, the forms every merge test runs in, are the two encodings: JSON text and the
binary log. Schemaless JSON is JSON text cut by a schema found elsewhere; its own tests
give the same events with and without schemas (`test_schemaless_values_...`, the
conformance and pipeline tests' `schemas by reference`), which keeps the suite in its
time budget (test_delta_merge.py, 2026-11-26: 3 min 42 s in one form, 7 min 31 s in the
three, 5 min 24 s in these two)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.events import dumps

FORMS = ("json", "parquet")


def schemaless(record: dict, catalogue: dict) -> dict:
    """`record` as the streamer writes it with `value.converter.schemas.enable: false`:
    the payload alone, naming its schema (recorded in `catalogue`) by reference."""
    from cdc_core.pipeline.schema_references import schema_digest, schema_record
    from spark_jobs.merge.schema_catalogue import schema_entry

    value = None if record["value"] is None else json.loads(record["value"])
    if value is None or "schema" not in value:  # a tombstone; a BEGIN/END written without
        return {**record, "schema_ref": None}
    schema = dumps(value["schema"]).encode()
    digest = schema_digest(record["topic"], schema)
    entry = schema_entry(schema_record("tm", digest, record["topic"], schema).value.decode())
    catalogue[digest] = entry[1:]
    return {**record, "value": dumps(value["payload"]), "schema_ref": digest}


def _apart(text: str | None) -> tuple[bytes | None, bytes | None]:
    """(payload, schema) of a record's key or value written with its schema."""
    if text is None:
        return None, None
    doc = json.loads(text)
    if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        return dumps(doc["payload"]).encode(), dumps(doc["schema"]).encode()
    return text.encode(), None


def parquet_log(records: list[dict], folder: Path) -> list[str]:
    """`records` landed in a Parquet event log under `folder` as the streamer lands them
    (payloads apart from their schemas, a tombstone with its delete's); returns its topics."""
    from cdc_core.sinks.parquet_log import ParquetEventLog

    log = ParquetEventLog(folder, key_schemas=True, value_schemas=True)
    last: dict[str, Any] = {}
    for r in records:
        record = log_record(r)
        previous = last.get(r["topic"])
        if record.value is None and previous is not None:  # a tombstone: in its delete's file
            record.key_schema, record.value_schema = previous.key_schema, previous.value_schema
        last[r["topic"]] = record
        log.append([record])
    log.close()
    return sorted({r["topic"] for r in records})


# One bytes object per schema text, as the streamer keeps them: the log writer starts a
# file where the schema object changes (`ParquetEventLog._run`).
_SCHEMAS: dict[bytes, bytes] = {}


def log_record(record: dict, log_format: str = "parquet") -> Any:
    """`record` as the streamer hands it to the embedded log: for the Parquet log, payloads
    apart from their schemas; for JSON lines, the texts whole. A transaction's BEGIN and
    END are marked as such (`Record.boundary`)."""
    from cdc_core.events.envelope import Record

    (key, key_schema), (value, value_schema) = _apart(record["key"]), _apart(record["value"])
    boundary = None
    if record["topic"].endswith(".transaction") and value is not None:
        boundary = json.loads(value).get("status")
    if log_format == "json":
        text = (None if t is None else t.encode() for t in (record["key"], record["value"]))
        return Record(record["topic"], *text, boundary=boundary)
    key_schema, value_schema = (
        None if s is None else _SCHEMAS.setdefault(s, s) for s in (key_schema, value_schema)
    )
    return Record(record["topic"], key, value, (), key_schema, value_schema, boundary)


def in_form(spark: Any, records: list[dict], form: str, folder: Path) -> dict[str, Any]:
    """What the merge's entry points take for `records` in `form` (of FORMS): `records`
    (a frame) and, from the Parquet log, `typed` (its typed parts)."""
    from spark_jobs.local_log_source import read_local_log

    if form == "json":  # as a Kafka batch gives them: with their topic partition and offset
        offsets: dict[str, int] = {}
        rows = []
        for r in records:
            offsets[r["topic"]] = offsets.get(r["topic"], -1) + 1
            rows.append((r["topic"], 0, offsets[r["topic"]], r["key"], r["value"]))
        schema = "topic STRING, partition INT, offset LONG, key STRING, value STRING"
        return {"records": spark.createDataFrame(rows, schema)}
    assert form == "parquet", form
    folder.mkdir(parents=True, exist_ok=True)
    root = Path(folder) / f"log-{len(list(folder.iterdir()))}"
    text, typed = read_local_log(spark, root, parquet_log(records, root))
    return {"records": text, "typed": typed}
