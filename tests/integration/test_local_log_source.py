"""The merge's reader of a JSON-lines embedded log (`spark_jobs.local_log_source`) gives
each record as the log's own reader does, whatever its key and value hold, and leaves out
a line still being written."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

TOPIC = "tm.shop.accounts"


def test_json_lines_records_read_by_spark_are_the_logs_own_and_a_torn_line_waits(spark, tmp_path):
    from cdc_core.events.envelope import SCHEMA_HEADER, Record
    from cdc_core.sinks.local_log import LocalEventLog, LocalEventLogReader
    from spark_jobs.local_log_source import spark_read_local_log

    # Keys and values holding the wrapper's own member names, as names and in strings.
    records = [
        Record(
            TOPIC,
            b'{"schema":{"type":"struct"},"payload":{"id":1,"value":2,"headers":3}}',
            b'{"schema":{"type":"struct","fields":[{"field":"value"}]},"payload":{"after":'
            b'{"value":",\\"value\\":{\\"x\\":1},\\"headers\\":{}}","n":[1,2.50,null]}}}',
            (("trace", b'a,"value":b'),),
        ),
        Record(TOPIC, b'{"id":2}', None),  # a tombstone
        Record(TOPIC, None, b'{"op":"c","payload":{"k":"\xc3\xa9"}}', ((SCHEMA_HEADER, b"tm.s.1"),)),
        # numbers Spark's parser writes back otherwise (1.5)
        Record(TOPIC, b'{"id":1.50,"n":"\xc3\xa9"}', b'{"payload":{"x":1.50,"headers":{"a":"b"}}}'),
    ]
    log = LocalEventLog(tmp_path / "log")
    log.append(records)
    log.flush()
    log.close()
    (segment,) = (tmp_path / "log" / TOPIC).glob("*.log")
    with segment.open("ab") as f:  # a writer killed in the middle of its next line
        f.write(b'{"offset":4,"ts":1,"key":{"id":3},"val')

    rows = sorted(spark_read_local_log(spark, tmp_path / "log", [TOPIC]).collect(), key=lambda r: r.offset)
    own = list(LocalEventLogReader(tmp_path / "log").read(TOPIC))

    assert [r.offset for r in rows] == [r.offset for r in own] == [0, 1, 2, 3]
    for got, expected in zip(rows, own, strict=True):
        assert got.topic == TOPIC
        for text, raw in ((got.key, expected.key), (got.value, expected.value)):
            assert (None if text is None else json.loads(text)) == (None if raw is None else json.loads(raw))
        assert got.headers == {k: v.decode() for k, v in expected.headers.items()}
    assert [r.schema_ref for r in rows] == [None, None, "tm.s.1", None]
