"""The embedded log as a sink: a record is acknowledged only once durable, and a slow
stream into Parquet lands what comes within `sink.local.linger.ms` as one file per topic."""

from __future__ import annotations

import time

from cdc_core.sinks import local_sink
from cdc_core.sinks.local_log import LocalEventLogReader
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
