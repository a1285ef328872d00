"""The snapshot stage's signal actions (a part of `SnapshotStage`): execute-snapshot
(incremental or blocking), the snapshots Tidemark starts itself (snapshot.mode=initial,
newly captured tables), pause/resume and stop-snapshot. Each changes the snapshot state
only through the stage, in log order."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace

from cdc_core.schema.model import TableId
from cdc_core.signals.actions import ExecuteSnapshot, SignalError, StopSnapshot, matching_tables
from cdc_core.signals.conditions import condition_fields, parse_condition
from cdc_core.snapshot.blocking import BlockingRun
from cdc_core.snapshot.chunks import SnapshotError, snapshot_key
from cdc_core.snapshot.context import Snapshot, TableProgress
from cdc_core.source import RowChange

log = logging.getLogger("tidemark.snapshot")


class SnapshotActions:
    """What the signals that start, pause and stop snapshots do to the stage's state."""

    def set_paused(self, paused: bool) -> None:
        """pause-snapshot / resume-snapshot: the running incremental snapshot waits or goes on."""
        active = self.context.active()
        if active is None:
            raise SignalError(f"no incremental snapshot is running to {'pause' if paused else 'resume'}")
        self._set(self.context.put(replace(active, paused=paused)))
        log.info("snapshot %s %s", active.id, "paused" if paused else "resumed")

    def start_snapshot(self, signal_id: str, tables: list[TableId], kind: str = "incremental") -> None:
        """A snapshot not asked for by a signal (snapshot.mode=initial, newly captured tables)."""
        progress = []
        for table_id in tables:
            schema = self.schemas.get(table_id)
            if schema is None:
                continue
            try:
                key = snapshot_key(schema, None, self.key_columns(table_id))
            except SnapshotError as exc:
                log.error("not snapshotting %s: %s", table_id, exc)
                continue
            progress.extend(self._entries(table_id, key))
        if progress:
            self._begin(Snapshot(_new_id(), signal_id, kind, tuple(progress), self.chunk_size))

    def execute_snapshot(self, action: ExecuteSnapshot, item: RowChange | None = None) -> None:
        """execute-snapshot: the tables, keys and filters checked, then the snapshot begun."""
        tables, problems = matching_tables(
            action.collections, self.schemas, self.captures, self._source_tables, self.excluded_by
        )
        problems += action.unmatched_conditions(tables)
        if problems:
            raise SignalError("; ".join(problems))
        progress = []
        for table_id in tables:
            schema = self.schemas[table_id]
            key = snapshot_key(schema, action.surrogate_key, self.key_columns(table_id))
            condition = action.condition_for(table_id)
            if condition is not None:
                parse_condition(
                    condition, condition_fields(schema)
                )  # refuse bad filters now, not mid-snapshot
            progress.extend(self._entries(table_id, key, condition))
        if action.snapshot_type == "blocking":
            if any(p.partition is not None for p in progress):
                raise SignalError(
                    "blocking snapshots need a source with one log; this source's tables live in "
                    "partitions with logs of their own (shards): use an incremental snapshot"
                )
            if self.open_chunk_source is None or item is None:
                raise SignalError(
                    "blocking snapshots are signalled through the signal table (source channel)"
                )
            plans = [(self.schemas[TableId.parse(p.table)], p) for p in progress]
            self._blocking = BlockingRun(
                action.id, plans, self.open_chunk_source(), action.chunk_size or self.chunk_size, item
            )
            log.info(
                "blocking snapshot %s of %s: streaming paused",
                action.id,
                ", ".join(p.table for p in progress),
            )
            return
        self._begin(
            Snapshot(
                _new_id(),
                action.id,
                "incremental",
                tuple(progress),
                action.chunk_size or self.chunk_size,
                reader=action.reader,
                release=action.release,
            )
        )

    def _source_tables(self) -> list[TableId]:
        """The source's tables now, captured or not (asked only to explain a refusal: the
        streamer knows the captured ones alone)."""
        if self.open_chunk_source is None:
            return []
        session = self.open_chunk_source()
        try:
            return list(session.list_tables())
        finally:
            session.close()

    def _entries(
        self, table_id: TableId, key: tuple[str, ...], condition: str | None = None
    ) -> list[TableProgress]:
        """A table's progress entries: one per partition of the source (one in all for a
        source with one log), each read in windows of its own."""
        return [
            TableProgress(str(table_id), key, condition, partition=partition)
            for partition in self.partitions(table_id)
        ]

    def _begin(self, snapshot: Snapshot) -> None:
        snapshot = replace(snapshot, started_ms=int(time.time() * 1000))
        self._set(self.context.put(snapshot))
        log.info(
            "snapshot %s of %s requested (%s)",
            snapshot.id,
            ", ".join(t.label for t in snapshot.tables),
            snapshot.kind,
        )

    def stop_snapshot(self, action: StopSnapshot) -> None:
        active = self.context.active()
        if active is None:
            raise SignalError("no incremental snapshot is running to stop")
        if not action.collections:
            for snapshot in self.context.snapshots:
                self.tracker.discard(snapshot_id=snapshot.id)
                self._set(self.context.remove(snapshot.id))
            log.info("all incremental snapshots stopped")
            return
        for snapshot in self.context.snapshots:
            for progress in snapshot.tables:
                if not progress.done and any(p.fullmatch(progress.table) for p in action.collections):
                    self._end_table(TableId.parse(progress.table), "stopped by signal")

    def _end_table(self, table_id: TableId, why: str) -> None:
        for snapshot in self.context.snapshots:
            for progress in snapshot.tables:
                if progress.table == str(table_id) and not progress.done:
                    self.tracker.discard(snapshot_id=snapshot.id, table=table_id)
                    log.warning("snapshot %s of %s ended: %s", snapshot.id, table_id, why)
                    snapshot = snapshot.with_table(replace(progress, done=True))
                    self._set(self.context.put(snapshot))


def _new_id() -> str:
    return uuid.uuid4().hex[:16]
