"""Read-only windows (`read.only`): log positions stand in for watermark rows.

The chunk reader records the position before and after reading a chunk; the window is
released once the log has passed the position read after it, as a synthetic transaction
that is not in the log. So a restart that resumes before that point waits for the same
position again and releases the same rows with the same order key (`replay_synthetic`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

from cdc_core.snapshot.windows import Window
from cdc_core.source import LogItem, TransactionBegin, TransactionCommit

log = logging.getLogger("tidemark.snapshot")


class ReadOnlyWindows:
    """The snapshot stage's read-only window protocol (a part of `SnapshotStage`)."""

    def submit_window(self, window: Window) -> None:
        """Read-only mode: open a window now (before the chunk is read). Recording keys
        from before the low watermark is safe: such a change is already in the stream
        with the state the chunk would show."""
        with self._lock:
            self._window_inbox.append(("open", window))

    def submit_high_watermark(self, window_id: str, marker: str, columns: tuple[str, ...]) -> None:
        """Read-only mode: the server's executed position right after the chunk read; the
        window is released once the log has passed it."""
        with self._lock:
            self._window_inbox.append(("hw", (window_id, marker, columns)))

    def _take_windows(self) -> None:
        with self._lock:
            pending, self._window_inbox = list(self._window_inbox), deque()
        for kind, payload in pending:
            if kind == "open":
                payload.in_log = False  # no watermark rows: a restart reads its chunk again
                self._canonical_bounds(payload)
                self._to_open.append(payload)
            else:
                window_id, marker, columns = payload
                self._awaiting_hw[window_id] = (marker, columns)
        if not self._in_txn:
            self._open_pending()

    def _open_pending(self) -> None:
        """Open the windows waiting for a transaction boundary, at the position processed
        last. The chunk reader reads once a snapshot of the source holds every
        transaction up to it (`opened_at`): the log hands a transaction over before the
        database shows it to other sessions (MariaDB's group commit; a semi-synchronous
        replica's acknowledgement comes in between), so a change this stage has already
        passed, unrecorded, could otherwise be missing from the chunk, and its row
        released after it as it was before."""
        for window in self._to_open:
            self._opened_at[window.id] = self.last_position
            self.tracker.open(window)
        self._to_open.clear()
        with self.changed:
            self.changed.notify_all()

    def opened_at(self, window_id: str) -> dict[str, Any] | None:
        """The log position a read-only window opened at (None: before anything was read)."""
        return self._opened_at.get(window_id)

    def reached(self, marker: str) -> bool | None:
        """Whether the log, as processed here, has reached a source position (None when
        the connector cannot compare positions, e.g. without GTIDs)."""
        if self.positions is None:
            return None
        return self.last_position is not None and self.positions.passed(self.last_position, marker)

    def window_open(self, window_id: str) -> bool:
        return window_id in self._opened_at and any(w.id == window_id for w in self.tracker.open_windows())

    def _release_passed(self, position: dict[str, Any], ts_ms: int) -> list[LogItem]:
        """Windows whose HW position the log has now passed, each released in a
        transaction of its own at this position's order key."""
        out: list[LogItem] = []
        for window_id, (marker, columns) in list(self._awaiting_hw.items()):
            if not self.positions.passed(position, marker):
                continue
            del self._awaiting_hw[window_id]
            self._opened_at.pop(window_id, None)
            window = next((w for w in self.tracker.open_windows() if w.id == window_id), None)
            table = window.table if window else None
            source = self.positions.source_block(position, table, ts_ms)
            epoch, rank = self.positions.order(position)
            begin = TransactionBegin(
                f"snapshot-window-{window_id}", epoch, rank, ts_ms, position, synthetic=window_id
            )
            extra = {"begin": begin, "marker": marker, "columns": tuple(columns)}
            released = self._finish_window(window_id, columns, None, 0, source, ts_ms, extra)
            if released:
                out.append(begin)
                out.extend(released)
                self._flush_state(out)
                out.append(TransactionCommit(position, ts_ms))
        return out

    def replay_synthetic(self, window_id: str) -> list[LogItem]:
        """After a restart inside a read-only release: the same transaction again (the
        dispatcher suppresses what was delivered), then the log from before it."""
        decided = self.staging.read_release(window_id)
        if decided is None or decided.begin is None:
            log.warning("the release of window %s cannot be replayed (its record is gone)", window_id)
            return []
        begin, window = decided.begin, decided.window
        self.tracker.open(window)
        columns = self.schemas[window.table].column_names if window.table in self.schemas else ()
        released = self._finish_window(window_id, columns, None, 0, decided.source, begin.ts_ms)
        out: list[LogItem] = [begin, *released]
        self._flush_state(out)
        out.append(TransactionCommit(begin.restart, begin.ts_ms))
        return out

    def resume_releases(
        self, committed: Mapping[str, Any] | None, synthetic: str | None, read_only: bool
    ) -> None:
        """After a (re)start at the committed offset's log position `committed`.

        A read-only release is not in the log, so it happens again only if this stage
        makes it again. The release an offset was committed inside of (`synthetic`) is
        replayed first, as it was. Every decided release whose HW position the log at the
        committed offset has not passed is waited for again: the log passes it at the same
        point, and if its range is then the next to release (the releases before it came
        again first, as they did), the same rows go out with the same order key, so what
        was delivered before the kill is delivered again, not read anew. One whose range
        is not the next then releases nothing (`_finish_window`). A decision the log at
        the committed offset has passed is of a run killed before committing it, and can
        never be part of the delivered history: made now, its rows (read back then) would
        take a later order key than changes made to them since. It is deleted, and the
        range is read again, as is a read-only chunk staged with no decision (`read_only`:
        in the other mode a chunk whose watermarks are in the log after the committed
        offset is released from its staged rows when they come again)."""
        if synthetic is not None:
            self._replay_first = synthetic
        if self.positions is None:
            return
        for window_id in self.staging.windows():
            if window_id == synthetic:
                continue
            decided = self.staging.read_release(window_id)
            if decided is None:
                if read_only:  # a chunk staged by a killed run: read again under a new window
                    self.staging.delete(window_id)
                continue
            if decided.marker is None:
                continue
            window = decided.window
            snapshot = self.context.find(window.snapshot_id)
            progress = snapshot.progress_of(str(window.table), window.partition) if snapshot else None
            passed = committed is not None and self.positions.passed(committed, decided.marker)
            if progress is None or progress.done or passed:
                self.staging.delete(window_id)
                continue
            self.tracker.open(window)
            self._awaiting_hw[window_id] = (decided.marker, tuple(decided.columns or ()))
