"""The streamer's memory bound holds for a source that hands on a large transaction at
once (Vitess gives a transaction's position only at its end): what reaches the pipeline
comes in batches of at most `max.batch.size`, in order, nothing lost or repeated; and what
the sink acknowledged is committed even when its last flush fails."""

from __future__ import annotations

import queue

import pytest

from cdc_core.config.connector_config import load_config
from cdc_core.pipeline.streamer import Streamer
from cdc_core.sinks.local_log import LocalLogError

CONFIG = """
name: shop
connector.class: mysql
topic.prefix: shop
database.hostname: 127.0.0.1
database.user: tidemark
database.server.id: 5401
max.batch.size: 100
max.queue.size: 400
"""


class OneTransactionSource:
    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def read(self):
        n = 0
        for size in self.sizes:
            yield list(range(n, n + size))
            n += size


def test_a_transaction_handed_on_whole_reaches_the_pipeline_in_bounded_batches(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    streamer = Streamer(load_config(path, environ={"TIDEMARK_DB_PASSWORD": "x"}))
    batches: queue.Queue = queue.Queue()
    streamer._read(OneTransactionSource([0, 30, 2_550, 100]), batches)
    got = []
    while not batches.empty():
        got.append(batches.get())
    *parts, end = got
    assert not isinstance(end, list)  # the end of the source
    assert max(len(p) for p in parts) == 100
    assert [i for p in parts for i in p] == list(range(2_680))
    assert [len(p) for p in parts][:2] == [0, 30]  # smaller ones pass as they are


class FailingSink:
    def flush(self, timeout=None):
        raise LocalLogError("records of t do not match their Connect schema")


class Offsets:
    def __init__(self) -> None:
        self.commits: list = []

    def commit(self, offset) -> None:
        self.commits.append(offset)


def test_a_sink_failing_at_shutdown_still_commits_what_was_acknowledged_before(tmp_path):
    """Otherwise a restart reads again every change since the last periodic commit."""
    path = tmp_path / "c.yaml"
    path.write_text(CONFIG)
    streamer = Streamer(load_config(path, environ={"TIDEMARK_DB_PASSWORD": "x"}))
    streamer.sink, streamer.offsets = FailingSink(), Offsets()
    streamer.tracker.ack(streamer.tracker.add({"pos": 1}, 1))
    streamer.tracker.add({"pos": 2}, 1)  # never acknowledged
    with pytest.raises(LocalLogError, match="do not match"):
        streamer._finish()
    assert streamer.offsets.commits == [{"pos": 1}]
    assert streamer.committed == {"pos": 1}


class Outages:
    """A source whose sessions each stream, then lose the connection."""

    def open(self, committed) -> None:
        pass

    def close(self) -> None:
        pass


def test_errors_max_retries_counts_the_retries_of_one_outage_not_of_a_lifetime(tmp_path, monkeypatch):
    from cdc_core.errors import SourceUnavailableError
    from cdc_core.pipeline import streamer as streamer_module

    path = tmp_path / "c.yaml"
    path.write_text(CONFIG + "errors.max.retries: 1\n")
    streamer = Streamer(load_config(path, environ={"TIDEMARK_DB_PASSWORD": "x"}))
    streamer.offsets = type("Offsets", (), {"load": lambda self: None})()
    sessions = []

    def stream(source, deadline, idle):
        sessions.append(1)
        if len(sessions) == 4:
            return True  # stopped cleanly after three outages, each after streaming
        streamer.events_total += 10
        return streamer_module._Failure(SourceUnavailableError(f"connection lost (outage {len(sessions)})"))

    monkeypatch.setattr(streamer, "_new_source", Outages)
    monkeypatch.setattr(streamer, "_stream", stream)
    monkeypatch.setattr(streamer, "_write_status", lambda *args, **kwargs: None)
    monkeypatch.setattr(streamer._stop, "wait", lambda seconds: False)
    assert streamer._run(None, None) == 0
    assert len(sessions) == 4
