"""The in-process chunk reader: one window at a time, beside the streamer.

For the active snapshot's current table it asks the database for the next boundary,
writes the LW row, reads the chunk `(lo, hi]`, stages the rows durably, writes the HW
row, and waits until the streamer has passed that HW (released the window or decided to
read it again) before it starts the next one, so at most one window's rows wait in
staging. It also reads again, one by one, the planned windows of an external reader
(the Spark chunk job) that the streamer could not release (`TableProgress.read_again`),
so such a snapshot finishes without another run of the job. Pause, resume and stop take
effect between windows. Database trouble is logged and retried; it never stops streaming.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from typing import Any

from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.signals.actions import WINDOW_CLOSE, WINDOW_OPEN
from cdc_core.signals.conditions import ConditionError, condition_fields, parse_condition
from cdc_core.snapshot.chunks import ChunkPlan, ChunkSource
from cdc_core.snapshot.context import ReadAgain, Snapshot, TableProgress
from cdc_core.snapshot.keycodec import encode_key
from cdc_core.snapshot.stage import SnapshotStage
from cdc_core.snapshot.window_notes import CLOSED_BY_DELETE, WindowNote, write_note
from cdc_core.snapshot.windows import Window

log = logging.getLogger("tidemark.snapshot")

RELEASE_TIMEOUT = 300.0


class ChunkCoordinator:
    def __init__(
        self,
        stage: SnapshotStage,
        open_source: Any,  # () -> ChunkSource
        current_schema: Any,  # (TableId) -> TableSchema | None, the schema now (not in log order)
        retry_delay: float = 2.0,
        read_only: bool = False,
        close_by_delete: bool = False,  # insert_delete: a window's open row is deleted as its HW
    ) -> None:
        self.stage = stage
        self.open_source = open_source
        self.current_schema = current_schema
        self.retry_delay = retry_delay
        self.read_only = read_only
        self.close_by_delete = close_by_delete
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="snapshot-chunks", daemon=True)
        self._source: ChunkSource | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.stage.changed:
            self.stage.changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(30)
        if self._source is not None:
            self._source.close()
            self._source = None

    # ------------------------------------------------------------------

    def _run(self) -> None:
        self._catch_up()
        while not self._stop.is_set():
            self._delete_orphaned_rows()
            work = self._next()
            if work is None:
                with self.stage.changed:
                    self.stage.changed.wait(1.0)
                continue
            snapshot, progress, again = work
            try:
                self._window(snapshot, progress, again)
            except (TidemarkError, ConditionError, OSError) as exc:
                log.error(
                    "snapshot %s of %s: %s; retrying in %.0fs",
                    snapshot.id,
                    progress.label,
                    exc,
                    self.retry_delay,
                )
                self._drop_source()
                self._stop.wait(self.retry_delay)
            except Exception as exc:  # a database error of any kind must not end the thread
                log.error(
                    "snapshot %s of %s: unexpected %s: %s",
                    snapshot.id,
                    progress.label,
                    type(exc).__name__,
                    exc,
                )
                self._drop_source()
                self._stop.wait(self.retry_delay)

    def _delete_orphaned_rows(self) -> None:
        """The open rows of windows that will never be released (their reader killed
        before it deleted them, insert_delete), deleted so the signal table does not
        grow. Best effort: one that cannot be deleted now is logged and left."""
        while self.stage.orphaned_rows and not self._stop.is_set():
            row_id, partition = self.stage.orphaned_rows.popleft()
            try:
                self._chunk_source().delete_watermark(row_id, partition)
            except Exception as exc:  # the database may be away: the row stays, nothing else does
                log.warning("could not delete the orphaned watermark %s: %s", row_id, exc)
                self._drop_source()
                return

    def _catch_up(self) -> None:
        """After a (re)start, windows still ahead in the log may be replayed and released;
        reading the same range again meanwhile would release its rows twice. So wait
        until the streamer has reached the server's current position."""
        while not self._stop.is_set():
            try:
                marker = self._chunk_source().position_marker()
                break
            except Exception as exc:  # the database may be away; retried like any chunk read
                log.warning("snapshot reader: %s; retrying", exc)
                self._drop_source()
                self._stop.wait(self.retry_delay)
        else:
            return
        with self.stage.changed:
            while not self._stop.is_set() and self.stage.context.active() is not None:
                reached = self.stage.reached(marker)
                if reached is None or reached:
                    return
                self.stage.changed.wait(0.5)

    def _next(self) -> tuple[Snapshot, TableProgress, ReadAgain | None] | None:
        for snapshot in self.stage.context.snapshots:
            if snapshot.paused or self.read_only:
                continue
            for progress in snapshot.tables:
                if progress.read_again and not progress.done:
                    return snapshot, progress, progress.read_again[0]
        snapshot = self.stage.context.active()
        if snapshot is None or snapshot.paused or snapshot.reader != "inprocess":
            return None
        progress = snapshot.current()
        if progress is None:
            return None
        return snapshot, progress, None

    def _drop_source(self) -> None:
        if self._source is not None:
            with contextlib.suppress(Exception):
                self._source.close()
            self._source = None

    def _chunk_source(self) -> ChunkSource:
        if self._source is None:
            self._source = self.open_source()
        return self._source

    def _window(self, snapshot: Snapshot, progress: TableProgress, again: ReadAgain | None = None) -> None:
        """The next window of `progress`'s table, or the planned window `again`."""
        table_id = TableId.parse(progress.table)
        schema: TableSchema | None = self.current_schema(table_id)
        if schema is None:
            raise TidemarkError(f"{table_id} is not in the schema timeline")
        condition = (
            parse_condition(progress.condition, condition_fields(schema)) if progress.condition else None
        )
        plan = ChunkPlan(schema, progress.key, condition, progress.partition)
        source = self._chunk_source()
        if again is None:
            lo = progress.lo
            hi = source.next_boundary(plan, lo, snapshot.chunk_size)
        else:
            lo, hi = again.lo, again.hi
        window_id = f"{snapshot.id}.{uuid.uuid4().hex[:12]}"
        table = str(table_id)
        if self.read_only:
            self._read_only_window(snapshot, progress, plan, source, window_id, lo, hi)
            return
        planned: dict[str, Any] = {} if again is None else {"index": again.index, "of": again.of}
        if progress.partition is not None:
            planned["partition"] = progress.partition
        note = str(self.stage.staging.note_path(window_id)) if self.close_by_delete else None
        if note is not None:
            planned.update(closed_by=CLOSED_BY_DELETE, note=note)
        source.write_watermark(
            WINDOW_OPEN,
            f"{window_id}-open",
            {
                "snapshot": snapshot.id,
                "window": window_id,
                "table": table,
                "key": list(progress.key),
                "lo": encode_key(lo),
                "hi": encode_key(hi),
                "exact": source.exact_key_order(plan),
                **planned,
            },
            progress.partition,
        )
        rows = source.read_chunk(plan, lo, hi)
        self.stage.staging.write(window_id, rows)
        if note is not None:
            write_note(note, WindowNote(snapshot.id, window_id, tuple(schema.column_names), len(rows)))
            source.delete_watermark(f"{window_id}-open", progress.partition)
        else:
            source.write_watermark(
                WINDOW_CLOSE,
                f"{window_id}-close",
                {
                    "snapshot": snapshot.id,
                    "window": window_id,
                    "columns": list(schema.column_names),
                    "rows": len(rows),
                },
                progress.partition,
            )
        self._await_release(snapshot.id, window_id, progress)

    def _read_only_window(
        self,
        snapshot: Snapshot,
        progress: TableProgress,
        plan: ChunkPlan,
        source: ChunkSource,
        window_id: str,
        lo: Any,
        hi: Any,
    ) -> None:
        """No writes to the source: open the window in the stage, read and stage the chunk
        once the database shows all the stage had passed when it opened, then hand over
        the server's position as the high watermark."""
        window = Window(
            window_id, snapshot.id, plan.table.id, lo, hi, source.exact_key_order(plan), progress.key
        )
        self.stage.submit_window(window)
        with self.stage.changed:
            while not self._stop.is_set() and not self.stage.window_open(window_id):
                self.stage.changed.wait(0.5)
        if self._stop.is_set():
            return
        rows = source.read_chunk_seeing(plan, lo, hi, self.stage.opened_at(window_id))
        self.stage.staging.write(window_id, rows)
        self.stage.submit_high_watermark(window_id, source.position_marker(), plan.table.column_names)
        self._await_release(snapshot.id, window_id, progress)

    def _await_release(self, snapshot_id: str, window_id: str, before: TableProgress) -> None:
        """Until the streamer has passed the HW: the table's progress moved, or the window
        was dropped (it is then read again)."""
        waited = 0.0
        with self.stage.changed:
            while not self._stop.is_set():
                snapshot = self.stage.context.find(snapshot_id)
                if snapshot is None:
                    break
                now = snapshot.progress_of(before.table, before.partition)
                if now is None or now != before:
                    break
                if waited >= RELEASE_TIMEOUT:
                    log.warning(
                        "window %s of %s not released after %.0fs; reading it again",
                        window_id,
                        before.label,
                        waited,
                    )
                    break
                if self.stage.window_passed(window_id):
                    break
                self.stage.changed.wait(0.5)
                waited += 0.5
