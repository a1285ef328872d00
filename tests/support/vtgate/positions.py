"""Shard positions in Vitess's MariaDB flavor: `MariaDB/<domain>-<server>-<sequence>`, one
GTID per replication domain, sorted by domain (`replication.EncodePosition`).

A position is the whole GTID state after a transaction, not one GTID: a tablet adds each
transaction's GTID to it (`AppendGTID`), and "contains" compares sequences per domain, as
`MariadbGTIDSet.Contains` does. Positions of another flavor (`MySQL56/...`) parse, but no
MariaDB server contains them, so asking a shard for one is a GTIDSet mismatch."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from tests.support.vtgate.errors import tablet_error

FLAVOR = "MariaDB"
_OTHER_FLAVORS = ("MySQL56", "FilePos")


@dataclass(frozen=True)
class Position:
    """A shard's GTID state: (domain, server, sequence) per domain, sorted by domain."""

    gtids: tuple[tuple[int, int, int], ...] = ()
    foreign: str = ""  # the text of a position of another flavor

    @classmethod
    def decode(cls, text: str) -> Position:
        """`replication.DecodePosition`; errors are the tablet's `could not decode position`."""
        if text == "":
            return cls()
        flavor, sep, body = text.partition("/")
        if not sep:
            flavor, body = "", text
        if flavor in _OTHER_FLAVORS:
            return cls(foreign=text)
        if flavor != FLAVOR:
            raise tablet_error(
                grpc.StatusCode.INTERNAL,
                f'could not decode position: parse error: unknown GTIDSet flavor "{flavor}"',
            )
        return cls.from_server(body)

    @classmethod
    def from_server(cls, gtid_binlog_pos: str) -> Position:
        """A server's `@@global.gtid_binlog_pos` (`0-11-42,1-11-7`)."""
        found: dict[int, tuple[int, int, int]] = {}
        for part in gtid_binlog_pos.split(","):
            part = part.strip()
            if not part:
                continue
            gtid = _gtid(part)
            found[gtid[0]] = gtid
        return cls(tuple(found[d] for d in sorted(found)))

    @property
    def is_zero(self) -> bool:
        return not self.gtids and not self.foreign

    def after(self, gtid: str) -> Position:
        """This position with one more transaction's GTID (`d-s-n`)."""
        domain, server, sequence = _gtid(gtid)
        kept = {g[0]: g for g in self.gtids}
        kept[domain] = (domain, server, sequence)
        return Position(tuple(kept[d] for d in sorted(kept)))

    def contains(self, other: Position) -> bool:
        """Whether every domain of `other` is at or behind this position."""
        if other.foreign or self.foreign:
            return False
        mine = {g[0]: g[2] for g in self.gtids}
        return all(d in mine and mine[d] >= seq for d, _, seq in other.gtids)

    @property
    def gtid_list(self) -> str:
        """The GTID list a MariaDB replica connects with (`@slave_connect_state`)."""
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.gtids)

    def __str__(self) -> str:
        if self.foreign:
            return self.foreign
        return f"{FLAVOR}/{self.gtid_list}" if self.gtids else ""


def _gtid(text: str) -> tuple[int, int, int]:
    parts = text.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise tablet_error(
            grpc.StatusCode.INTERNAL,
            f"could not decode position: invalid MariaDB GTID ({text}): expecting Domain-Server-Sequence",
        )
    return int(parts[0]), int(parts[1]), int(parts[2])
