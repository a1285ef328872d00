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
