"""Window bookkeeping of the watermark protocol: keys changed inside a window's range
drop their staged rows at HW; everything else is released; windows are independent."""

from __future__ import annotations

from cdc_core.schema.model import TableId
from cdc_core.snapshot.windows import Window, WindowTracker, release

ORDERS = TableId("shop", "orders")
USERS = TableId("shop", "users")


def key_of(row):
    return (row[0],)


def test_changes_inside_the_range_drop_staged_rows_at_hw():
    tracker = WindowTracker()
    tracker.open(Window("w1", "s", ORDERS, lo=(10,), hi=(20,)))
    tracker.observe(ORDERS, [(15,)])  # updated after LW: the stream already has the newer version
    tracker.observe(ORDERS, [(25,)])  # outside the range: not recorded
    tracker.observe(ORDERS, [(10,)])  # lo is exclusive
    tracker.observe(USERS, [(12,)])  # another table
    window = tracker.close("w1")
    assert window.recorded == {(15,)}
    out = release(window, [(11, "a"), (15, "stale"), (20, "b")], key_of)
    assert out.rows == [(11, "a"), (20, "b")] and out.dropped == 1
    assert len(tracker) == 0


def test_many_windows_open_at_once_record_independently():
    tracker = WindowTracker()
    tracker.open(Window("a", "s", ORDERS, lo=None, hi=(100,)))
    tracker.open(Window("b", "s", ORDERS, lo=(100,), hi=None))
    tracker.open(Window("c", "s", USERS, lo=None, hi=None))
    tracker.observe(ORDERS, [(5,), (500,)])  # a primary-key change touches both keys
    tracker.observe(USERS, [(7,)])
    assert tracker.close("a").recorded == {(5,)}
    assert tracker.close("b").recorded == {(500,)}
    assert tracker.close("c").recorded == {(7,)}


def test_composite_keys_compare_as_row_values():
    window = Window("w", "s", ORDERS, lo=(1, "b"), hi=(2, "a"))
    assert window.covers((1, "c")) and window.covers((2, "a"))
    assert not window.covers((1, "b")) and not window.covers((2, "b"))


def test_collated_text_keys_record_everything_of_the_table():
    tracker = WindowTracker()
    tracker.open(Window("w", "s", ORDERS, lo=("a",), hi=("m",), exact_range=False))
    tracker.observe(ORDERS, [("Z",)])  # 'Z' sorts inside (a, m] under a case-insensitive collation
    assert tracker.close("w").recorded == {("Z",)}


def test_an_unknown_or_repeated_watermark_changes_nothing():
    tracker = WindowTracker()
    assert tracker.close("never-opened") is None
    first = Window("w", "s", ORDERS, lo=None, hi=None)
    tracker.open(first)
    tracker.observe(ORDERS, [(1,)])
    tracker.open(Window("w", "s", ORDERS, lo=None, hi=None))  # the LW re-read
    assert tracker.close("w") is first and first.recorded == {(1,)}


def test_discarding_a_snapshot_forgets_only_its_windows():
    tracker = WindowTracker()
    tracker.open(Window("a", "s1", ORDERS, None, None))
    tracker.open(Window("b", "s2", ORDERS, None, None))
    assert [w.id for w in tracker.discard(snapshot_id="s1")] == ["a"]
    assert [w.id for w in tracker.open_windows()] == ["b"]


def test_the_snapshot_state_of_format_version_0_is_read_and_a_newer_one_refused():
    """A frozen committed state as Tidemark wrote it before the version field: an upgrade
    never strands a running snapshot."""
    import datetime as dt
    import json

    import pytest

    from cdc_core.errors import TidemarkError
    from cdc_core.snapshot.context import CONTEXT_VERSION, SnapshotContext

    frozen = json.loads(
        '{"snapshots":[{"id":"sig-7","signal_id":"sig-7","kind":"incremental","tables":[{"windows_total":4,'
        '"done_windows":[0,2],"read_again":[{"index":1,"of":4,"lo":[{"$b":"AQ=="}],"hi":[7],"exact":false}],'
        '"table":"shop.orders","key":["id"],"condition":"status = \'paid\'","lo":[{"$dt":"2024-01-02T03:04:05"}],'
        '"done":false,"windows_done":2,"rows_released":512,"rows_dropped":3}],"chunk_size":256,"paused":true,'
        '"started_ms":1700000000000,"reader":"spark","release":"lakehouse"}],"signals":["sig-6","sig-7"],'
        '"finished":[{"id":"sig-5","rows":10}],"released":9,"channels":{"kafka":{"0":12}},'
        '"captured":["shop.orders"],"refused":[{"id":"bad","reason":"unknown table"}]}'
    )
    context = SnapshotContext.from_json(frozen)
    (snapshot,) = context.snapshots
    (table,) = snapshot.tables
    assert (snapshot.reader, snapshot.release, snapshot.paused, snapshot.chunk_size) == (
        "spark",
        "lakehouse",
        True,
        256,
    )
    assert table.lo == (dt.datetime(2024, 1, 2, 3, 4, 5),) and table.done_windows == (0, 2)
    assert table.read_again[0].lo == (b"\x01",) and table.condition == "status = 'paid'"
    assert (context.signals, context.released, context.captured) == (("sig-6", "sig-7"), 9, ("shop.orders",))
    written = context.to_json()
    assert written["version"] == CONTEXT_VERSION
    assert {k: v for k, v in written.items() if k != "version"} == frozen  # nothing lost on the way
    with pytest.raises(TidemarkError, match="format version 2, newer than this Tidemark reads"):
        SnapshotContext.from_json({**written, "version": CONTEXT_VERSION + 1})
