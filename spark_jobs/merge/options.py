"""Per-table merge settings: SCD type 2, partitioning, clustering."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cdc_core.errors import TidemarkError


@dataclass(frozen=True)
class TableOptions:
    scd2: bool = False
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergeOptions:
    """`scd2`: a regex over `db.table` names; `partition_by`/`cluster_by`: per table name."""

    scd2: str | None = None
    partition_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_by: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def for_table(self, name: str) -> TableOptions:
        return TableOptions(
            bool(self.scd2 and re.fullmatch(self.scd2, name)),
            self.partition_by.get(name, ()),
            self.cluster_by.get(name, ()),
        )

    @classmethod
    def from_args(
        cls, scd2: str | None, partition_by: Sequence[str] = (), cluster_by: Sequence[str] = ()
    ) -> MergeOptions:
        if scd2:
            try:
                re.compile(scd2)
            except re.error as exc:
                raise TidemarkError(f"--scd2 is not a regular expression: {exc}") from None
        return cls(scd2, _per_table(partition_by, "--partition-by"), _per_table(cluster_by, "--cluster-by"))


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
