"""Which of two events for the same key is newer.

Every change event carries Vitess-style ordered transaction metadata, generalised to all
sources: `transaction_epoch`, `transaction_rank` and `total_order`. The rule (Debezium's
Vitess connector): the higher epoch wins; on a tie the higher rank; on a tie the higher
total_order (same transaction, later event). Each connector defines epoch and rank from
its own log and documents it (README, "Ordered transaction metadata").

This module is the one place that rule lives; the Delta merge, window deduplication and
the correctness harness all call it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class OrderKey:
    """(epoch, rank, total_order), compared lexicographically.

    Field order matters: dataclass ordering compares fields in declaration order, which
    is exactly the Vitess rule.
    """

    epoch: int
    rank: int
    total_order: int = 0

    def is_newer_than(self, other: OrderKey) -> bool:
        return self > other

    def to_json(self) -> dict[str, int]:
        return {
            "transaction_epoch": self.epoch,
            "transaction_rank": self.rank,
            "total_order": self.total_order,
        }

    @classmethod
    def from_transaction_block(cls, block: dict[str, Any]) -> OrderKey:
        """Read the order key from an event's `transaction` block."""
        try:
            return cls(
                int(block["transaction_epoch"]), int(block["transaction_rank"]), int(block["total_order"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"transaction block has no complete order key: {block!r}") from exc


def newer(a: OrderKey, b: OrderKey) -> OrderKey:
    """The newer of two order keys (`a` on equality: the same event)."""
    return b if b > a else a


def is_newer(candidate: dict[str, Any], current: dict[str, Any]) -> bool:
    """True when event value `candidate` is newer than `current` (both Debezium envelopes)."""
    return OrderKey.from_transaction_block(candidate["transaction"]) > OrderKey.from_transaction_block(
        current["transaction"]
    )
