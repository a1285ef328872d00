"""The Vitess rule decides which of two events for a key is newer."""

from __future__ import annotations

import pytest

from cdc_core.events.ordering import OrderKey, is_newer, newer


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (OrderKey(1, 0, 0), OrderKey(0, 99, 99)),  # higher epoch wins over everything
        (OrderKey(0, 5, 1), OrderKey(0, 4, 99)),  # same epoch: higher rank wins
        (OrderKey(0, 5, 3), OrderKey(0, 5, 2)),  # same transaction: later event wins
    ],
)
def test_newer_is_decided_by_epoch_then_rank_then_total_order(a, b):
    assert a.is_newer_than(b)
    assert not b.is_newer_than(a)
    assert newer(a, b) == a == newer(b, a)


def test_equal_keys_are_not_newer():
    assert not OrderKey(0, 1, 1).is_newer_than(OrderKey(0, 1, 1))


def test_is_newer_reads_envelopes():
    old = {"transaction": {"transaction_epoch": 0, "transaction_rank": 10, "total_order": 2}}
    new = {"transaction": {"transaction_epoch": 0, "transaction_rank": 11, "total_order": 1}}
    assert is_newer(new, old)
    assert not is_newer(old, new)


def test_incomplete_block_is_an_error():
    with pytest.raises(ValueError, match="no complete order key"):
        OrderKey.from_transaction_block({"id": "x", "total_order": 1})
