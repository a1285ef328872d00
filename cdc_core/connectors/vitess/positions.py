"""Shard positions: GTID sets as VStream writes them, their rank and epoch, key ranges.

Seed 004 defines the order of two events of one key: the higher `transaction_epoch`,
else the higher `transaction_rank`, else the higher `total_order`. Both come from the
GTID position of the transaction's shard, as Debezium's Vitess connector computes them:

- rank: the sum over the position's sources (MySQL server UUIDs, MariaDB replication
  domains) of their highest sequence number. It grows with every transaction of the
  shard. (Debezium reads the end of each source's *first* interval; with a gap in the
  set, `uuid:1-5:7-9`, that gives later transactions an unchanged rank, so the highest
  end is used here.)
- epoch: per shard, unchanged while each position's sources include the previous one's
  (a new primary keeps the old UUIDs in its set), one more when a source disappears
  (a primary whose history does not contain the previous one's: rank starts over).
  A shard that appears in a reshard starts one above every shard whose key range it
  overlaps: its sequence numbers start over too, and its events must still order after
  its parents' for the same key. (Debezium does this only with `vitess.inherit.epoch`;
  here it always does, because the Delta merge orders by it.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cdc_core.errors import TidemarkError

CURRENT = "current"  # VStream: start at the shard's position now
COPY = ""  # VStream: copy the tables first, then stream


def is_real(gtid: str) -> bool:
    """A position, as opposed to VStream's `current` and `""` (copy) requests."""
    return gtid not in (CURRENT, COPY)


@dataclass(frozen=True)
class ShardPosition:
    """A parsed shard position: its flavor and the highest sequence number per source."""

    flavor: str  # "MySQL56", "MariaDB" or "" (none written)
    sequences: Mapping[str, int]

    @property
    def sources(self) -> frozenset[str]:
        return frozenset(self.sequences)

    @property
    def rank(self) -> int:
        return sum(self.sequences.values())


def parse_position(text: str) -> ShardPosition:
    """`MySQL56/<uuid>:1-5[:7-9][,<uuid>:...]` or `MariaDB/<domain>-<server>-<seq>[,...]`
    (the flavor prefix optional, as VStream accepts it)."""
    flavor, _, body = text.rpartition("/")
    sequences: dict[str, int] = {}
    try:
        for entry in filter(None, (e.strip() for e in body.split(","))):
            if ":" in entry:  # MySQL: uuid:interval[:interval...]
                source, *intervals = entry.split(":")
                sequences[source.lower()] = max(int(i.rpartition("-")[2]) for i in intervals)
            else:  # MariaDB: domain-server-sequence, one per domain
                domain, _server, sequence = entry.split("-")
                sequences[domain] = int(sequence)
    except ValueError:
        raise TidemarkError(
            f"cannot read the shard position {text!r} (not a MySQL56 or MariaDB GTID set)"
        ) from None
    return ShardPosition(flavor, sequences)


def next_epoch(epoch: int, previous: str, current: str) -> int:
    """The shard's epoch for a transaction at `current`, the previous one being at
    `previous` with `epoch`."""
    if not is_real(current):
        raise TidemarkError(f"a transaction at the position {current!r} (not a position)")
    if not is_real(previous):
        return epoch + 1  # streaming from `current` or a copy: a new sequence of ranks begins
    if parse_position(current).sources >= parse_position(previous).sources:
        return epoch
    return epoch + 1


@dataclass(frozen=True)
class KeyRange:
    """A shard's key range `[start, end)` of keyspace ids; empty bounds are unbounded."""

    start: bytes
    end: bytes | None

    @classmethod
    def of(cls, shard: str) -> KeyRange:
        """Vitess names shards by key range (`-80`, `80-c0`); `0` and `-` are unsharded."""
        if shard in ("0", "-", ""):
            return cls(b"", None)
        left, sep, right = shard.partition("-")
        if not sep:
            raise TidemarkError(f"shard {shard!r} is not a key range (such as -80 or 80-c0)")
        try:
            return cls(bytes.fromhex(left), bytes.fromhex(right) if right else None)
        except ValueError:
            raise TidemarkError(f"shard {shard!r} is not a key range (such as -80 or 80-c0)") from None

    def overlaps(self, other: KeyRange) -> bool:
        below_other_end = other.end is None or self.start < other.end
        above_other_start = self.end is None or other.start < self.end
        return below_other_end and above_other_start


def inherited_epoch(shard: str, epochs: Mapping[str, int]) -> int:
    """The epoch of a shard new to the stream: one above every known shard it overlaps."""
    mine = KeyRange.of(shard)
    parents = [e for name, e in epochs.items() if name != shard and KeyRange.of(name).overlaps(mine)]
    return max(parents) + 1 if parents else 0
