"""Blocking snapshots: the tables read chunk after chunk while streaming waits; their rows
take the signal's place in the log.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from cdc_core.events.envelope import OP_READ
from cdc_core.schema.model import TableSchema
from cdc_core.signals.conditions import condition_fields, parse_condition
from cdc_core.snapshot.context import TableProgress
from cdc_core.source import LogItem, RowChange

log = logging.getLogger("tidemark.snapshot")


class BlockingRun:
    """A blocking snapshot: tables read chunk after chunk while streaming waits. Its rows
    take the signal's place in the log (inside its transaction, with its order key)."""

    def __init__(
        self,
        signal_id: str,
        plans: list[tuple[TableSchema, TableProgress]],
        source: Any,
        chunk_size: int,
        signal_item: RowChange,
    ) -> None:
        self.signal_id = signal_id
        self.plans = plans
        self.source = source
        self.chunk_size = chunk_size
        self.signal_item = signal_item
        self.deferred: list[LogItem] = []
        self.table = 0
        self.lo: tuple[Any, ...] | None = None
        self.rows = 0
        self.per_table: dict[str, int] = {}

    def next_chunk(self) -> list[LogItem] | None:
        from cdc_core.snapshot.chunks import ChunkPlan

        while self.table < len(self.plans):
            schema, progress = self.plans[self.table]
            condition = (
                parse_condition(progress.condition, condition_fields(schema)) if progress.condition else None
            )
            plan = ChunkPlan(schema, progress.key, condition)
            hi = self.source.next_boundary(plan, self.lo, self.chunk_size)
            rows = self.source.read_chunk(plan, self.lo, hi)
            last_table = self.table == len(self.plans) - 1
            if hi is None:
                self.table, self.lo = self.table + 1, None
            else:
                self.lo = hi
            if not rows:
                continue
            item = self.signal_item
            out: list[LogItem] = []
            for i, row in enumerate(rows):
                marker = "last" if hi is None and last_table and i == len(rows) - 1 else "true"
                source = {
                    **item.source,
                    "db": schema.id.database,
                    "table": schema.id.table,
                    "snapshot": marker,
                    "row": self.rows + i,
                }
                out.append(RowChange(schema, OP_READ, None, row, source, item.ts_ms))
            self.rows += len(rows)
            self.per_table[str(schema.id)] = self.per_table.get(str(schema.id), 0) + len(rows)
            return out
        return None

    def close(self) -> None:
        self.source.close()

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.signal_id,
            "signal_id": self.signal_id,
            "kind": "blocking",
            "finished_ms": int(time.time() * 1000),
            "tables": [{"table": t, "rows_released": n, "done": True} for t, n in self.per_table.items()],
        }


class BlockingSnapshots:
    """The snapshot stage's blocking snapshots (a part of `SnapshotStage`)."""

    def busy(self) -> bool:
        """A blocking snapshot is running: the streamer takes items from `drain`, not the log."""
        return self._blocking is not None

    def drain(self) -> list[LogItem]:
        """The next chunk of a blocking snapshot; after the last one, the log items that
        waited behind the signal (processed as usual)."""
        run = self._blocking
        assert run is not None
        rows = run.next_chunk()
        if rows is not None:
            return rows
        self._blocking = None
        run.close()
        log.info("blocking snapshot %s done: %d rows; streaming resumes", run.signal_id, run.rows)
        finished = (*self.context.finished, run.summary())[-10:]
        self._set(replace(self.context.remember(run.signal_id), finished=finished))
        out: list[LogItem] = []
        self._flush_state(out)
        return out + self.process(run.deferred)
