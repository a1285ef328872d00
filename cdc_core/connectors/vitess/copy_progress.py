"""Which tables the copy phase has still to start on each shard, kept in the offsets.

A VGTID alone cannot resume a copy phase cut between tables. VTGate lists a table in a
shard's `table_p_ks` only once that shard has sent its first batch, and drops it when
the table is done; a shard that finished one table and has not begun the next has a
real GTID and no `table_p_ks`, which VStream reads as "copy done, stream from here".
Resuming there would never copy the tables not yet started on that shard.

So the connector remembers, while the copy phase runs, the tables it asked VStream to
copy and, per shard, those whose copy began (a FIELD event on the shard) and the shards
whose copy completed. A resumed request lists, for every shard past its start, each
table not yet begun as a `table_p_ks` entry without a last key: VStream copies it from
its first row, and the tables in progress from their last keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from cdc_core.connectors.vitess.positions import is_real
from cdc_core.connectors.vitess.vgtid import Vgtid


@dataclass
class CopyProgress:
    tables: tuple[str, ...]  # the tables the copy phase was asked for (every shard has them)
    started: dict[str, set[str]] = field(default_factory=dict)  # shard -> tables begun
    done: set[str] = field(default_factory=set)  # shards whose copy completed

    def begun(self, shard: str, table: str) -> None:
        if shard not in self.done:
            self.started.setdefault(shard, set()).add(table)

    def completed(self, shard: str) -> None:
        self.done.add(shard)
        self.started.pop(shard, None)

    def pending(self, shard: str) -> list[str]:
        if shard in self.done:
            return []
        begun = self.started.get(shard, set())
        return [t for t in self.tables if t not in begun]

    def request(self, vgtid: Vgtid) -> Vgtid:
        """`vgtid` with every shard's tables not yet begun listed to copy from the start
        (a shard still at `""` copies everything anyway)."""
        out = vgtid
        for entry in vgtid.shards:
            if not is_real(entry.gtid):
                continue
            listed = {t.get("table_name") for t in entry.table_p_ks}
            missing = [{"table_name": t} for t in self.pending(entry.shard) if t not in listed]
            if missing:
                out = out.with_shard(replace(entry, table_p_ks=(*entry.table_p_ks, *missing)))
        return out

    def copy(self) -> CopyProgress:
        return CopyProgress(self.tables, {s: set(t) for s, t in self.started.items()}, set(self.done))

    def to_json(self) -> dict[str, Any]:
        return {
            "tables": list(self.tables),
            "started": {s: sorted(t) for s, t in sorted(self.started.items())},
            "done": sorted(self.done),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CopyProgress | None:
        if not data:
            return None
        return cls(
            tuple(data.get("tables", ())),
            {s: set(t) for s, t in (data.get("started") or {}).items()},
            set(data.get("done") or ()),
        )
