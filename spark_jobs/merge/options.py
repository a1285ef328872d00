"""Merge settings: per table SCD type 2, partitioning, clustering; for every table the
largest batch sent whole to the MERGE's tasks (broadcast)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cdc_core.errors import TidemarkError

# A batch up to this size (its rows as Spark estimates them) is broadcast in its MERGE.
DEFAULT_BROADCAST_MB = 256


@dataclass(frozen=True)
class TableOptions:
    scd2: bool = False
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    broadcast_bytes: int = 0


@dataclass(frozen=True)
class MergeOptions:
    """`scd2`: a regex over `db.table` names; `partition_by`/`cluster_by`: per table name;
    `broadcast_mb`: a table's batch estimated at most this size is broadcast in its MERGE
    (0: never). Each task then holds the batch in memory, so this bounds the memory a
    merge adds per executor (and on the driver, which builds it)."""

    scd2: str | None = None
    partition_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    broadcast_mb: int = DEFAULT_BROADCAST_MB

    def for_table(self, name: str) -> TableOptions:
        return TableOptions(
            bool(self.scd2 and re.fullmatch(self.scd2, name)),
            self.partition_by.get(name, ()),
            self.cluster_by.get(name, ()),
            self.broadcast_mb * 1024 * 1024,
        )

    @classmethod
    def from_args(
        cls,
        scd2: str | None,
        partition_by: Sequence[str] = (),
        cluster_by: Sequence[str] = (),
        broadcast_mb: int = DEFAULT_BROADCAST_MB,
    ) -> MergeOptions:
        if scd2:
            try:
                re.compile(scd2)
            except re.error as exc:
                raise TidemarkError(f"--scd2 is not a regular expression: {exc}") from None
        if broadcast_mb < 0:
            raise TidemarkError(f"--broadcast-mb must be 0 (never) or more, not {broadcast_mb}")
        return cls(
            scd2,
            _per_table(partition_by, "--partition-by"),
            _per_table(cluster_by, "--cluster-by"),
            broadcast_mb,
        )


def _per_table(specs: Sequence[str], flag: str) -> dict[str, tuple[str, ...]]:
    """`db.table=col1,col2` specs."""
    out = {}
    for spec in specs:
        name, _, columns = spec.partition("=")
        cols = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not name or not cols:
            raise TidemarkError(f"{flag} {spec!r}: expected db.table=column[,column...]")
        out[name.strip()] = cols
    return out
