"""The incremental window protocol at the HW (DESIGN.md §4): a window's staged rows minus
the keys the stream changed inside it are released in the HW's place, or read again when
they cannot be (a schema change, rows gone or in another form); what was released is kept
until no offset can lead back to the HW, and open windows are saved before every commit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import OP_READ
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.snapshot.context import ReadAgain, Snapshot, TableProgress
from cdc_core.snapshot.keycodec import decode_key
from cdc_core.snapshot.release_decisions import ReleaseDecision
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import StagingError, read_parquet
from cdc_core.snapshot.window_notes import CLOSED_BY_DELETE, read_note
from cdc_core.snapshot.windows import Window, release
from cdc_core.source import LogItem, RowChange, SnapshotRelease

log = logging.getLogger("tidemark.snapshot")


def snapshot_source(source: dict[str, Any], table: TableId, row: int) -> dict[str, Any]:
    """A released row's `source` block, from its HW's (a row of the signal table): the
    released table's names, `snapshot: incremental`, the row's place in the release.
    Only the fields the connector's block has, under its names (`table`, or MongoDB's
    `collection`; Vitess's `db` is empty and stays so)."""
    block = {**source, "snapshot": "incremental"}
    if source.get("db"):
        block["db"] = table.database
    for name in ("table", "collection"):
        if name in source:
            block[name] = table.table
    if "row" in source:
        block["row"] = row
    return block


class WindowReleases:
    """The snapshot stage's window release (a part of `SnapshotStage`)."""

    def _window_open(self, signal_id: str, data: Any) -> None:
        try:
            d = orjson.loads(data)
            snapshot = self.context.find(d["snapshot"])
            table_id = TableId.parse(d["table"])
            window = Window(
                d["window"],
                d["snapshot"],
                table_id,
                decode_key(d["lo"]),
                decode_key(d["hi"]),
                bool(d.get("exact")),
                tuple(d["key"]),
                index=d.get("index"),
                of=d.get("of"),
                partition=d.get("partition"),
                note=str(d["note"]) if d.get("closed_by") == CLOSED_BY_DELETE else None,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, TidemarkError) as exc:
            log.error("ignoring malformed window-open watermark %s: %s", signal_id, exc)
            return
        if snapshot is None:
            self._orphaned(window)
            return  # a watermark of a snapshot that was stopped or finished
        self._canonical_bounds(window)
        if not self._stale(window):
            self.tracker.open(window)
        else:
            self._orphaned(window)

    def _orphaned(self, window: Window) -> None:
        """A window that will never be released (`_stale`): if it closes by the delete of
        its open row, the row is queued for the in-process reader to delete, since the
        reader that opened it may be gone (killed between the LW and the delete): under
        insert_delete the signal table must not keep it. Deleted twice is deleted once;
        its delete, when it comes, finds no open window and releases nothing."""
        if window.note is not None:
            self.orphaned_rows.append((f"{window.id}-open", window.partition))

    def _window_close(self, item: RowChange, data: Any) -> list[LogItem]:
        try:
            d = orjson.loads(data)
            window_id, columns, staged_uri = d["window"], tuple(d["columns"]), d.get("staged")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            log.error("ignoring malformed window-close watermark: %s", exc)
            return []
        return self._finish_window(
            window_id,
            columns,
            staged_uri,
            int(d.get("rows", 0)),
            item.source,
            item.ts_ms,
            shaped=d.get("shaped"),
        )

    def _window_deleted(self, window_id: str, item: RowChange) -> list[LogItem]:
        """A window's open row was deleted: under insert_delete, the window's HW. Its
        close note says what a close row would have (`window_notes.py`). A window not
        open here (closed and committed before, a stopped snapshot's) and not decided
        either is a delete replayed or someone's cleanup: ignored; so is the delete of a
        window that closes with a close row (insert_insert: the signal table purged by
        hand)."""
        window = self.tracker.get(window_id)
        decided = self.staging.read_release(window_id) if window is None else None
        known = window if window is not None else decided.window if decided is not None else None
        if known is None:
            log.info(
                "the open watermark of window %s was deleted; the window is not open here: ignored", window_id
            )
            return []
        if known.note is None:
            log.warning(
                "the open watermark of window %s was deleted, but the window closes with a close row "
                "(insert_insert): not its high watermark, ignored",
                window_id,
            )
            return []
        self._activity[known.snapshot_id] = time.monotonic()
        try:
            note = read_note(known.note, window_id)
        except StagingError as exc:
            return self._finish_window(window_id, (), None, 0, item.source, item.ts_ms, unreleasable=str(exc))
        return self._finish_window(
            window_id, note.columns, note.staged, note.rows, item.source, item.ts_ms, shaped=note.shaped
        )

    def _finish_window(
        self,
        window_id: str,
        columns: tuple[str, ...],
        staged_uri: str | None,
        staged_rows: int,
        source: dict[str, Any],
        ts_ms: int,
        extra: dict[str, Any] | None = None,
        shaped: str | None = None,
        unreleasable: str | None = None,
    ) -> list[LogItem]:
        """The log passed a window's HW: its release, as items to put in the HW's place.
        `shaped`: the digest of the staged form the chunk job wrote the rows in (None: the
        table's own rows). `unreleasable`: why what the HW should say cannot be known (a
        missing close note): the window is read again."""
        window = self.tracker.close(window_id)
        try:
            decided = self.staging.read_release(window_id)
            if decided is not None:
                window = decided.window  # this HW was processed before a restart: release the same again
            elif window is None:
                log.info(
                    "snapshot window %s closed but is not open here (a stale window, or one whose "
                    "saved state is gone): nothing released",
                    window_id,
                )
                return []
            snapshot = self.context.find(window.snapshot_id)
            schema = self.schemas.get(window.table)
            if snapshot is None or schema is None:
                return []
            progress = snapshot.progress_of(str(window.table), window.partition)
            if progress is None:
                log.warning(
                    "snapshot window %s names %s partition %r, which snapshot %s does not read "
                    "(its partitions changed, e.g. by a reshard): nothing released",
                    window_id,
                    window.table,
                    window.partition,
                    snapshot.id,
                )
                return []
            if progress.done or (window.index is not None and window.index in progress.done_windows):
                return []  # a planned window released before (the reader ran again)
            if window.index is None and not self._at_progress(window, progress):
                # Its range was released by another window (a read-only range read again
                # after a restart, and its earlier decision waited for as well): never twice.
                if decided is not None and window_id not in self._staged_by_release.values():
                    self.staging.delete(window_id)
                return []
            if unreleasable is not None:
                self._read_again(snapshot, progress, window, unreleasable)
                return []
            if window.truncated:
                self._read_again(snapshot, progress, window, "the table was truncated inside the window")
                return []
            if window.schema_changed or schema.column_names != columns:
                self._read_again(snapshot, progress, window, "the table's schema changed inside the window")
                return []
            if decided is not None:
                shaped = decided.shaped
            form = self._form(schema, window, shaped)
            if shaped is not None and form is None:
                self._read_again(snapshot, progress, window, "its rows were staged under other column rules")
                return []
            key_of = self.keys.key_of(schema, window.key_columns, form.columns if form else columns)
            if key_of is None:
                self._read_again(
                    snapshot, progress, window, "its key columns are not among the staged columns"
                )
                return []
            # A read-only release (`extra`: its synthetic BEGIN, HW position, columns) is not in
            # the log; what a restart needs to release it again identically is kept with it.
            keep = ReleaseDecision(window, source, shaped, **(extra or {}))
            if snapshot.release == "lakehouse" and staged_uri:
                out: list[LogItem] = [
                    self._release_record(source, ts_ms, snapshot, window, schema, staged_uri, staged_rows)
                ]
                released, dropped = staged_rows, 0
                if decided is None:
                    self.staging.write_release(window_id, keep)
            else:
                if decided is not None:
                    rows, dropped = list(decided.rows or ()), decided.dropped
                else:
                    try:
                        staged = (
                            read_parquet(staged_uri, form.columns if form else columns)
                            if staged_uri
                            else self.staging.read(window_id)
                        )
                    except StagingError as exc:
                        self._read_again(snapshot, progress, window, str(exc))
                        return []
                    result = release(window, staged, key_of)
                    rows, dropped = result.rows, result.dropped
                    self.staging.write_release(window_id, replace(keep, rows=tuple(rows), dropped=dropped))
                out = [
                    RowChange(
                        schema, OP_READ, None, row, snapshot_source(source, window.table, i), ts_ms, form
                    )
                    for i, row in enumerate(rows)
                ]
                released = len(rows)
            progress = self._advance(progress, window, released, dropped)
            released_seq = self.context.released + 1
            self._staged_by_release[released_seq] = window_id
            self._set(replace(self.context.put(snapshot.with_table(progress)), released=released_seq))
            self._retire_windows()
            if progress.done:
                log.info(
                    "snapshot %s of %s done: %d rows released, %d dropped as superseded by the stream",
                    snapshot.id,
                    window.table,
                    progress.rows_released,
                    progress.rows_dropped,
                )
            return out
        finally:
            # Only now may the chunk reader move on: the state above is final for this window.
            self._passed.append(window_id)
            with self.changed:
                self.changed.notify_all()

    def _read_again(self, snapshot: Snapshot, progress: TableProgress, window: Window, why: str) -> None:
        """A window that cannot be released. The in-process reader reads its table on
        from the last released key anyway; a planned window (of an external reader such as
        the Spark chunk job) is queued for the streamer's own reader to read again, so the
        snapshot finishes without another run of the job."""
        if window.index is None:
            log.warning("snapshot window %s of %s: %s; reading the chunk again", window.id, window.table, why)
            return
        log.warning(
            "snapshot window %s of %s (%d of %s): %s; the streamer reads it again",
            window.id,
            window.table,
            window.index + 1,
            window.of or "?",
            why,
        )
        again = ReadAgain(window.index, window.of, window.lo, window.hi, window.exact_range)
        if any(r.index == again.index for r in progress.read_again):
            return
        updated = replace(progress, read_again=(*progress.read_again, again))
        self._set(self.context.put(snapshot.with_table(updated)))

    def _stale(self, window: Window) -> bool:
        """A window that can never be released: its snapshot or table is finished, or its
        range was released by another window (the reader ran again, or read it again
        after a restart). Its HW, if it ever comes, releases nothing."""
        snapshot = self.context.find(window.snapshot_id)
        progress = snapshot.progress_of(str(window.table), window.partition) if snapshot else None
        if progress is None or progress.done:
            return True
        if window.index is not None:
            return window.index in progress.done_windows
        return not self._at_progress(window, progress)

    def _at_progress(self, window: Window, progress: TableProgress) -> bool:
        """Whether a sequential window starts where its table's progress stands, the two
        bounds compared in the canonical key form (the progress holds the driver's)."""
        schema = self.schemas.get(window.table)
        lo = self.keys.canonical(schema, window.key_columns, progress.lo) if schema else progress.lo
        return lo == window.lo

    def _retire_windows(self) -> None:
        """Forget stale windows whose watermarks are in the log (see `_stale`); without
        this, the LW of a chunk job killed before its HW would keep a window open forever."""
        for window in self.tracker.open_windows():
            if window.in_log and self._stale(window):
                self.tracker.close(window.id)
                self._orphaned(window)

    def _restore_open_windows(self) -> None:
        """The windows open at the last offset commit, with the keys they recorded."""
        for window in self._window_file.load():
            # A read-only window's chunk is read again after a restart (or its decided
            # release waited for again, `resume_releases`): this one can never be released.
            if window.in_log and not self._stale(window):
                self.tracker.open(window)
            elif window.in_log:
                self._orphaned(window)
        self._saved_windows = self.tracker.changes

    def before_commit(self) -> None:
        """Called before an offset is committed: the open windows and their keys, on disk
        first (only when they changed), so the offset never gets ahead of them."""
        if self.tracker.changes != self._saved_windows:
            self._window_file.save(self.tracker.open_windows())
            self._saved_windows = self.tracker.changes

    def _form(self, schema: TableSchema, window: Window, shaped: str | None) -> StagedForm | None:
        """The staged form a window's rows were written in, if the chunk job shaped them
        (`shaped`, its digest), and if this streamer's column rules give the same form;
        None otherwise, and the window is read again."""
        if shaped is None:
            return None
        form = self.staged_form(schema, window.key_columns) if self.staged_form else None
        if form is None or form.digest != shaped:
            return None
        return form

    @staticmethod
    def _advance(progress: TableProgress, window: Window, released: int, dropped: int) -> TableProgress:
        common = {
            "windows_done": progress.windows_done + 1,
            "rows_released": progress.rows_released + released,
            "rows_dropped": progress.rows_dropped + dropped,
        }
        if window.index is None:  # sequential windows: the next starts after this one
            next_lo = window.driver_hi if window.driver_hi is not None else window.hi
            return replace(progress, lo=next_lo, done=window.hi is None, **common)
        done = tuple(sorted({*progress.done_windows, window.index}))
        total = window.of or progress.windows_total
        return replace(
            progress,
            done_windows=done,
            windows_total=total,
            done=total is not None and len(done) >= total,
            read_again=tuple(r for r in progress.read_again if r.index != window.index),
            **common,
        )

    def _release_record(
        self,
        source: dict[str, Any],
        ts_ms: int,
        snapshot: Snapshot,
        window: Window,
        schema: TableSchema,
        staged: str,
        rows: int,
    ) -> SnapshotRelease:
        """The lakehouse fast path: the merge applies the staged file minus the keys the
        stream changed inside the window, at this point's order key."""
        return SnapshotRelease(
            schema,
            snapshot.id,
            window.id,
            staged,
            rows,
            window.key_columns,
            sorted(window.recorded, key=repr),
            snapshot_source(source, window.table, 0),
            ts_ms,
        )

    def window_passed(self, window_id: str) -> bool:
        return window_id in self._passed

    def _clean_staging(self) -> None:
        """Staged windows of snapshots no longer in the (committed) state can never be released."""
        for window_id in self.staging.windows():
            decided = self.staging.read_release(window_id)
            # In-process window ids start with their snapshot's id; a decision names its window.
            snapshot_id = decided.window.snapshot_id if decided else window_id.split(".", 1)[0]
            if self.context.find(snapshot_id) is None:
                self.staging.delete(window_id)
