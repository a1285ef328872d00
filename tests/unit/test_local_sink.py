"""The embedded log as a sink: a record is acknowledged only once durable, and a slow
stream into Parquet lands what comes within `sink.local.linger.ms` as one file per topic."""

from __future__ import annotations

import time

import pytest

from cdc_core.events.envelope import Record
from cdc_core.sinks import local_sink
from cdc_core.sinks.local_log import LocalEventLogReader, LocalLogError
from cdc_core.sinks.local_sink import LocalLogSink
from tests.unit.test_parquet_log import rec


def files(path) -> int:
    return len(list((path / "t").glob("*.parquet")))


def wait_acked(sink, acked, n):
    deadline = time.monotonic() + 10
    while len(acked) < n and time.monotonic() < deadline:
        time.sleep(0.01)
        sink.poll()
    return acked


def test_a_slow_stream_lands_what_came_within_the_linger_as_one_file(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(local_sink.time, "monotonic", lambda: now[0])
    acked: list[int] = []
    sink = LocalLogSink(
        tmp_path, acked.append, parquet=True, key_schemas=False, value_schemas=False, linger=0.5
    )
    for n in range(5):  # five transactions, 0.1 s apart: each poll finds them too young to land
        sink.send([(rec(n), n)])
        sink.poll()
        now[0] += 0.1
    assert acked == [] and files(tmp_path) == 0
    now[0] += 0.1  # the oldest has waited 0.6 s
    sink.poll()
    monkeypatch.undo()
    assert wait_acked(sink, acked, 5) == [0, 1, 2, 3, 4]
    assert files(tmp_path) == 1
    sink.close()
    assert [r.offset for r in LocalEventLogReader(tmp_path).read("t")] == [0, 1, 2, 3, 4]


def test_without_linger_each_poll_lands_and_close_lands_the_rest(tmp_path):
    acked: list[int] = []
    sink = LocalLogSink(
        tmp_path, acked.append, parquet=True, key_schemas=False, value_schemas=False, linger=0
    )
    sink.send([(rec(0), 0)])
    sink.poll()
    assert wait_acked(sink, acked, 1) == [0]
    sink.send([(rec(1), 1)])
    sink.close()  # lands without waiting for the linger
    assert acked == [0, 1] and files(tmp_path) == 2


def test_json_lines_are_acknowledged_at_the_poll_after_their_fsync(tmp_path):
    acked: list[int] = []
    sink = LocalLogSink(tmp_path, acked.append)
    sink.send([(rec(0), 7)])
    assert acked == []
    sink.poll()
    assert acked == [7]
    sink.close()


def test_a_failed_landing_lands_nothing_and_nothing_lands_after_it(tmp_path):
    """Later records landing past it would leave offsets that are never written and a cut
    spanning a transaction whose row is missing: the stream stops, its position kept, and
    what was not acknowledged is read again from the source."""

    def boundary(n: int, status: str) -> Record:
        return Record("tx", b'{"id":"%d"}' % n, b'{"status":"%s"}' % status.encode(), boundary=status)

    good_elsewhere = rec(0)
    good_elsewhere.topic = "b"
    bad = rec(2)
    bad.value = b'{"after":{"id":"two"},"op":"c"}'
    acked: list[int] = []
    sink = LocalLogSink(tmp_path, acked.append, parquet=True, linger=0)
    sink.send(
        [(boundary(1, "BEGIN"), 0), (good_elsewhere, 1), (rec(1), 2), (bad, 3), (boundary(1, "END"), 4)]
    )
    with pytest.raises(LocalLogError, match="do not match their Connect schema"):
        sink.flush()
    sink.send([(boundary(2, "BEGIN"), 5), (rec(3), 6), (boundary(2, "END"), 7)])
    with pytest.raises(LocalLogError, match="stopped at a failed landing: records of t do not match"):
        sink.flush()
    sink.close()  # the failure was raised: closing does not raise it again

    assert acked == []
    assert not list(tmp_path.rglob("*.parquet"))  # not the valid topics of the landing either
    assert not (tmp_path / "_cut.json").exists()
    restarted = LocalLogSink(tmp_path, acked.append, parquet=True, linger=0)
    restarted.send([(boundary(1, "BEGIN"), 0), (rec(1), 1), (boundary(1, "END"), 2)])
    assert restarted.flush() and acked == [0, 1, 2]
    restarted.close()
    reader = LocalEventLogReader(tmp_path)
    assert {t: [r.offset for r in reader.read(t)] for t in reader.topics()} == {
        "b": [],
        "t": [0],
        "tx": [0, 1],
    }
