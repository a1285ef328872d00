"""Offsets are committable only when every record before them is acknowledged."""

from __future__ import annotations

from cdc_core.pipeline.ack_tracker import AckTracker


def test_out_of_order_acks_commit_only_the_acknowledged_prefix():
    t = AckTracker()
    a = t.add("A", 2)
    b = t.add("B", 1)
    c = t.add("C", 1)
    t.ack(c)
    assert t.take_committable() is None  # C is done but A and B are not
    t.ack(a)
    assert t.take_committable() is None  # A still waits for a second record
    t.ack(a)
    assert t.take_committable() == "A"
    t.ack(b)
    assert t.take_committable() == "C"
    assert t.outstanding == 0


def test_recordless_positions_advance_behind_pending_records():
    t = AckTracker()
    a = t.add("A", 1)
    t.add("P1", 0)
    t.add("P2", 0)  # coalesced with P1
    assert t.take_committable() is None
    t.ack(a)
    assert t.take_committable() == "P2"


def test_heartbeat_entries_do_not_move_the_offset():
    t = AckTracker()
    t.add("A", 0)
    h = t.add(None, 1)
    t.ack(h)
    assert t.take_committable() == "A"
    assert t.take_committable() is None
