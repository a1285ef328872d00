"""Binlog positions, GTID sets and the ordered-transaction metadata derived from them.

Epoch and rank (README, "Ordered transaction metadata") for the three position modes:

* MariaDB GTID (`domain-server-seq`): the executed state holds the last sequence number
  per replication domain. `rank` is the sum of those sequence numbers after the
  transaction — it grows by at least one with every transaction, in every domain, and
  survives a failover because replicas keep the same GTIDs. `epoch` starts at 0 and
  increases when a transaction's state is not a successor of the previous one (a domain's
  sequence went backwards, e.g. after `RESET MASTER`), so order is kept across it.
* MySQL GTID (`uuid:n`): likewise, `rank` is the sum over server UUIDs of the highest
  transaction number in the executed GTID set after the transaction; `epoch` as above.
* File/position (no GTIDs): `epoch` is the binlog file's sequence number (the numeric
  suffix, which increases at each rotation) and `rank` the position of the transaction's
  first event in that file.

Within a transaction, events are ordered by `total_order`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MARIADB_GTID = re.compile(r"(\d+)-(\d+)-(\d+)")


@dataclass(frozen=True)
class MariaDbGtidState:
    """Last `(server_id, seq)` per domain: what `@@gtid_binlog_pos` reports."""

    domains: tuple[tuple[int, int, int], ...] = ()  # (domain, server, seq), sorted by domain

    @classmethod
    def parse(cls, text: str | None) -> MariaDbGtidState:
        if not text:
            return cls()
        found = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            m = _MARIADB_GTID.fullmatch(part)
            if not m:
                raise ValueError(f"not a MariaDB GTID: {part!r}")
            domain, server, seq = (int(g) for g in m.groups())
            found[domain] = (server, seq)
        return cls(tuple((d, s, q) for d, (s, q) in sorted(found.items())))

    def __str__(self) -> str:
        return ",".join(f"{d}-{s}-{q}" for d, s, q in self.domains)

    def with_gtid(self, gtid: str) -> MariaDbGtidState:
        m = _MARIADB_GTID.fullmatch(gtid)
        if not m:
            raise ValueError(f"not a MariaDB GTID: {gtid!r}")
        domain, server, seq = (int(g) for g in m.groups())
        found = {d: (s, q) for d, s, q in self.domains}
        found[domain] = (server, seq)
        return MariaDbGtidState(tuple((d, s, q) for d, (s, q) in sorted(found.items())))

    def rank(self) -> int:
        return sum(q for _, _, q in self.domains)

    def succeeds(self, previous: MariaDbGtidState) -> bool:
        """True when no domain of `previous` is missing or went backwards."""
        mine = {d: q for d, _, q in self.domains}
        return all(d in mine and mine[d] >= q for d, _, q in previous.domains)


@dataclass(frozen=True)
class MySqlGtidSet:
    """An executed GTID set `uuid:1-5:7,uuid2:1-3` as intervals per server UUID."""

    intervals: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> MySqlGtidSet:
        if not text:
            return cls()
        found: dict[str, list[tuple[int, int]]] = {}
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            sid, *ranges = part.split(":")
            spans = found.setdefault(sid.lower(), [])
            for r in ranges:
                lo, _, hi = r.partition("-")
                spans.append((int(lo), int(hi or lo)))
        return cls(tuple((sid, _normalise(spans)) for sid, spans in sorted(found.items())))

    def __str__(self) -> str:
        parts = []
        for sid, spans in self.intervals:
            text = ":".join(f"{lo}-{hi}" if hi != lo else f"{lo}" for lo, hi in spans)
            parts.append(f"{sid}:{text}")
        return ",".join(parts)

    def with_gtid(self, gtid: str) -> MySqlGtidSet:
        sid, _, number = gtid.rpartition(":")
        n = int(number)
        found = {s: list(spans) for s, spans in self.intervals}
        found.setdefault(sid.lower(), []).append((n, n))
        return MySqlGtidSet(tuple((s, _normalise(spans)) for s, spans in sorted(found.items())))

    def rank(self) -> int:
        return sum(spans[-1][1] for _, spans in self.intervals if spans)

    def succeeds(self, previous: MySqlGtidSet) -> bool:
        mine = dict(self.intervals)
        for sid, spans in previous.intervals:
            if sid not in mine or mine[sid][-1][1] < spans[-1][1]:
                return False
        return True


def _normalise(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


def binlog_file_index(name: str) -> int:
    """`mariadb-bin.000042` → 42: the epoch in file/position mode."""
    suffix = name.rsplit(".", 1)[-1]
    if not suffix.isdigit():
        raise ValueError(f"binlog file {name!r} has no numeric suffix")
    return int(suffix)
