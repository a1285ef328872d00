"""A change whose BSON cannot be read (malformed: no MongoDB server sends it, so it is
built by hand here) follows event.processing.failure.handling.mode on both rendering
paths: `fail` stops naming where it is (cluster time, resume token, collection, the
document's `_id`) and the way past it, never the document's contents; `warn` and `skip`
leave that one change out (warn logs its collection and key), report it for the
streamer's status, and move the position past it, so a restart does not meet it again;
no other change is lost, inside a transaction neither. The status shows the count."""

from __future__ import annotations

import logging
import struct

import orjson
import pytest

from cdc_core.cli import cmd_status
from cdc_core.pipeline.ack_tracker import AckTracker
from cdc_core.pipeline.dispatcher import Dispatcher
from cdc_core.pipeline.skipped_events import SkippedEvents
from cdc_core.source import PositionAdvance, SkippedEvent, TransactionCommit
from tests.support.mongo.bson_bytes import change_event, doc_of, element, int32, text
from tests.unit.test_mongodb_java_texts import compiled
from tests.unit.test_mongodb_transcoder import fixed_clock, records, source, through_python, through_renderer

SECRET = "s3cr3t-card-4111"
__all__ = ["fixed_clock"]  # the records' processing time, fixed (an autouse fixture)


def good(i: int) -> bytes:
    return change_event(i, "insert", doc_of(("_id", int32(i)), ("n", int32(i))), int32(i))


def unreadable(i: int, transaction: tuple[bytes, int] | None = None) -> bytes:
    """An insert of `_id` 7 whose document holds a sensitive string and, after it, a
    member of an unknown type (0x14)."""
    full = doc_of(("_id", int32(7)), ("card", text(SECRET)))
    broken = full[:-1] + element(0x14, "x", b"") + b"\0"
    broken = struct.pack("<i", len(broken)) + broken[4:]
    return change_event(i, "insert", broken, int32(7), transaction=transaction)


PATHS = [through_python, pytest.param(through_renderer, marks=compiled)]


def items_of(path, src, raws):
    return path(src, raws)[0]


@pytest.mark.parametrize("path", PATHS)
def test_fail_stops_naming_the_place_and_the_way_past_it_never_the_contents(tmp_path, path):
    from cdc_core.errors import TidemarkError

    src = source(tmp_path)  # the default mode: fail
    with pytest.raises(TidemarkError) as failure:
        items_of(path, src, [good(0), unreadable(4), good(5)])
    message = str(failure.value)
    for part in ("shop.orders", "_id 7", "clusterTime 1800000001.2", "82000000000000000000000000000004"):
        assert part in message
    assert "warn or skip" in message and "unknown BSON type 0x14" in message
    assert SECRET not in message


@pytest.mark.parametrize("mode", ["warn", "skip"])
@pytest.mark.parametrize("path", PATHS)
def test_warn_and_skip_leave_that_one_change_out_and_move_past_it(tmp_path, caplog, path, mode):
    src = source(tmp_path, f"event.processing.failure.handling.mode: {mode}\n")
    raws = [good(0), good(1), unreadable(4), good(5), good(6)]
    with caplog.at_level(logging.WARNING, "tidemark.mongodb"):
        items, position, *_ = path(src, raws)
    (skipped,) = [i for i in items if isinstance(i, SkippedEvent)]
    assert (str(skipped.table), skipped.key) == ("shop.orders", "7")
    assert "clusterTime 1800000001.2" in skipped.where and "0x14" in skipped.reason
    # the position moves past it at once: a restart from there does not read it again
    after = items[items.index(skipped) + 1]
    assert isinstance(after, PositionAdvance)
    assert after.position["resume_token"] == {"_data": "82000000000000000000000000000004"}
    assert position["resume_token"] == {"_data": "82000000000000000000000000000006"}
    # every other change is there, as the Python path writes it without the bad one
    got, offset = records(src, items)
    want, _ = records(src, through_python(src, [good(0), good(1), good(5), good(6)])[0])
    assert [r[:3] for r in got] == [r[:3] for r in want]
    assert offset["source"] == position
    logged = [r.getMessage() for r in caplog.records]
    if mode == "warn":
        (line,) = logged
        assert "shop.orders" in line and "_id 7" in line and SECRET not in line
    else:
        assert logged == []


@pytest.mark.parametrize("path", PATHS)
def test_a_change_left_out_of_a_transaction_leaves_the_rest_of_it(tmp_path, path):
    src = source(tmp_path, "event.processing.failure.handling.mode: skip\n")
    txn = (b"\x01" * 16, 3)
    raws = [
        change_event(3, "insert", doc_of(("_id", int32(1))), int32(1), transaction=txn),
        unreadable(4, transaction=txn),
        change_event(5, "insert", doc_of(("_id", int32(2))), int32(2), transaction=txn),
        good(6),
    ]
    items = items_of(path, src, raws)
    kinds = [type(i).__name__ for i in items]
    # no position inside the transaction: its END carries it past the skipped change
    assert "PositionAdvance" not in kinds[: kinds.index("TransactionCommit")]
    got, _ = records(src, items)
    topics = [r[0] for r in got]
    assert topics.count("tm.shop.orders") == 3  # the two others of the transaction and the last
    assert topics.count("tm.transaction") == 2  # BEGIN and END
    end = orjson.loads(next(r[2] for r in got if r[0] == "tm.transaction" and b'"END"' in r[2]))
    assert end["event_count"] == 2
    assert [i for i in items if isinstance(i, TransactionCommit)]


def test_the_dispatcher_reports_each_skipped_change_and_the_status_shows_the_count(tmp_path, capsys):
    """The count is carried from one streamer to the next through status.json, and
    `tidemark status` shows it with the last ones (key and place, never contents)."""
    import argparse

    src = source(tmp_path, "event.processing.failure.handling.mode: warn\n")
    items = through_python(src, [good(0), unreadable(4), good(5)])[0]
    state = tmp_path / "state"
    seen = SkippedEvents.carried_from(state / "status.json")  # none yet
    dispatcher = Dispatcher(src.config, src, AckTracker())
    dispatcher.on_skipped = seen.add
    dispatcher.process(items)
    assert dispatcher.stats.skipped == 1 and seen.total == 1

    state.mkdir()
    status = {
        "state": "stopped",
        "pid": 1,
        "updated_at": "-",
        "events_total": 2,
        "skipped_events": seen.as_json(),
    }
    (state / "status.json").write_bytes(orjson.dumps(status))
    again = SkippedEvents.carried_from(state / "status.json")
    assert again.total == 1 and again.recent[0]["key"] == "7" and again.recent[0]["table"] == "shop.orders"

    config = tmp_path / "c.yaml"
    config.write_text(config.read_text() + f"state.directory: {state}\n")
    assert cmd_status(argparse.Namespace(config=str(config), json=False, offline=True)) == 0
    shown = capsys.readouterr().out
    assert "1 event(s) left out" in shown and "shop.orders _id 7 at clusterTime 1800000001.2" in shown
    assert SECRET not in shown
