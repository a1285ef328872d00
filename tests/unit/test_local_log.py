"""The embedded event log keeps Kafka's promises on local disk: dense offsets per topic,
records readable from any offset across segments, one writer at a time, and a torn last
line (a crash mid-write) cut off on reopen without renumbering what was complete."""

from __future__ import annotations

import orjson
import pytest

from cdc_core.events.envelope import Record
from cdc_core.sinks.local_log import (
    ConsumerPositions,
    LocalEventLog,
    LocalEventLogReader,
    LocalLogError,
)


def rec(topic: str, n: int, headers: tuple[tuple[str, bytes], ...] = ()) -> Record:
    return Record(topic, orjson.dumps({"id": n}), orjson.dumps({"after": {"id": n, "v": f"é{n}"}}), headers)


def ids(records) -> list[int]:
    return [orjson.loads(r.key)["id"] for r in records]


def test_offsets_are_dense_per_topic_and_records_round_trip(tmp_path):
    log = LocalEventLog(tmp_path)
    placed = log.append(
        [rec("a", 1), rec("b", 2), rec("a", 3), Record("a", orjson.dumps({"id": 4}), None, ())]
    )
    log.flush()
    assert placed == [("a", 0), ("b", 0), ("a", 1), ("a", 2)]
    records = list(LocalEventLogReader(tmp_path).read("a"))
    assert [r.offset for r in records] == [0, 1, 2]
    assert orjson.loads(records[1].value) == {"after": {"id": 3, "v": "é3"}}
    assert records[2].value is None  # a tombstone stays a tombstone
    assert LocalEventLogReader(tmp_path).topics() == ["a", "b"]
    log.close()


def test_headers_survive(tmp_path):
    log = LocalEventLog(tmp_path)
    log.append([rec("a", 1, (("__debezium.newkey", b'{"id":2}'),))])
    log.close()
    (record,) = LocalEventLogReader(tmp_path).read("a")
    assert record.headers == {"__debezium.newkey": b'{"id":2}'}


def test_reading_from_an_offset_across_rolled_segments(tmp_path):
    log = LocalEventLog(tmp_path, segment_bytes=200)
    for n in range(50):
        log.append([rec("t", n)])
    log.close()
    segments = sorted((tmp_path / "t").glob("*.log"))
    assert len(segments) > 3
    reader = LocalEventLogReader(tmp_path)
    assert ids(reader.read("t", 37)) == list(range(37, 50))
    assert ids(reader.read("t", 10, max_records=5)) == [10, 11, 12, 13, 14]
    assert reader.end_offset("t") == 50
    # Reopening continues numbering in the last segment.
    log = LocalEventLog(tmp_path, segment_bytes=200)
    assert log.append([rec("t", 50)]) == [("t", 50)]
    log.close()
    assert ids(LocalEventLogReader(tmp_path).read("t", 49)) == [49, 50]


def test_torn_last_line_is_cut_on_reopen_and_never_read(tmp_path):
    log = LocalEventLog(tmp_path)
    log.append([rec("t", n) for n in range(3)])
    log.close()
    (segment,) = (tmp_path / "t").glob("*.log")
    with open(segment, "ab") as f:
        f.write(b'{"offset":3,"ts":1,"key":{"id":3},"val')  # the crash
    assert ids(LocalEventLogReader(tmp_path).read("t")) == [0, 1, 2]
    log = LocalEventLog(tmp_path)
    assert log.append([rec("t", 99)]) == [("t", 3)]
    log.close()
    assert ids(LocalEventLogReader(tmp_path).read("t")) == [0, 1, 2, 99]
    assert segment.read_bytes().count(b"\n") == 4


def test_a_second_writer_is_refused_until_the_first_closes(tmp_path):
    first = LocalEventLog(tmp_path)
    with pytest.raises(LocalLogError, match="another process is writing"):
        LocalEventLog(tmp_path)
    first.close()
    LocalEventLog(tmp_path).close()


def test_invalid_topic_names_are_refused(tmp_path):
    log = LocalEventLog(tmp_path)
    with pytest.raises(LocalLogError, match="invalid topic name"):
        log.append([rec("../escape", 1)])
    log.close()


def test_consumer_positions_merge_per_topic_and_persist(tmp_path):
    positions = ConsumerPositions(tmp_path, "merge")
    assert positions.get("a") == 0
    positions.commit({"a": 5, "b": 2})
    positions.commit({"a": 9})
    assert ConsumerPositions(tmp_path, "merge").load() == {"a": 9, "b": 2}
    assert ConsumerPositions(tmp_path, "other").load() == {}
    with pytest.raises(LocalLogError):
        ConsumerPositions(tmp_path, "../x")
