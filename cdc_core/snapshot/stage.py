"""The snapshot stage: between the log reader and the dispatcher, in log order.

It is where the watermark protocol of DESIGN.md §4 happens on the streaming side:

- rows of the signal table are signals: user signals (`execute-snapshot`, ...) change the
  snapshot state; watermark rows open and close windows;
- every change to a table with an open window records its key(s) in the windows whose
  range covers them;
- at a window's HW, its staged rows minus the recorded keys replace the HW row as `op=r`
  row changes inside the HW's transaction, so the dispatcher gives them the HW's order
  key (epoch, rank) and numbers them after it;
- the snapshot state (`SnapshotContext`) changes only here, so the state in an offset is
  the state at that point of the log.

Signals from outside the log (Kafka topic, file) are applied at batch boundaries through
`submit`. A signal that is malformed or not allowed is logged with its reason and kept in the snapshot
state (the newest 20, across restarts); streaming goes on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import OP_CREATE, OP_READ
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.signals.actions import (
    INTERNAL_TYPES,
    WINDOW_CLOSE,
    WINDOW_OPEN,
    ExecuteSnapshot,
    RawSignal,
    SignalError,
    StopSnapshot,
    apply_signal,
    matching_tables,
    parse_signal,
)
from cdc_core.signals.conditions import ConditionError, parse_condition
from cdc_core.snapshot.chunks import SnapshotError, snapshot_key
from cdc_core.snapshot.context import ReadAgain, Snapshot, SnapshotContext, TableProgress
from cdc_core.snapshot.key_forms import KeyForms, KeyValue
from cdc_core.snapshot.keycodec import decode_key
from cdc_core.snapshot.open_windows import OpenWindowFile
from cdc_core.snapshot.release_decisions import ReleaseDecision
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import LocalStaging, StagingError, read_parquet
from cdc_core.snapshot.windows import Window, WindowTracker, release
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    RowChange,
    SchemaChange,
    SnapshotRelease,
    StateChange,
    TransactionBegin,
    TransactionCommit,
)

if TYPE_CHECKING:
    from cdc_core.connector import PositionWatermarks

log = logging.getLogger("tidemark.snapshot")


class SnapshotStage:
    def __init__(
        self,
        context: SnapshotContext,
        tables: Mapping[TableId, TableSchema],
        captures: Callable[[TableId], bool],
        signal_table: TableId | None,
        staging: LocalStaging,
        chunk_size: int,
        key_value: Callable[[Column], KeyValue],
        key_columns: Callable[[TableId], tuple[str, ...]] = lambda _t: (),
        source_signals: bool = True,
        open_chunk_source: Callable[[], Any] | None = None,
        positions: PositionWatermarks | None = None,  # read-only mode (`cdc_core.connector`)
        staged_form: Callable[[TableSchema, tuple[str, ...]], StagedForm] | None = None,
    ) -> None:
        self.context = context
        self.schemas: dict[TableId, TableSchema] = dict(tables)
        self.captures = captures
        self.signal_table = signal_table
        self.staging = staging
        self.chunk_size = chunk_size
        self.key_columns = key_columns
        self.source_signals = source_signals  # user signals from the signal table (watermarks always count)
        self.open_chunk_source = open_chunk_source
        self.positions = positions
        self.staged_form = staged_form  # the connector's column rules over a table and snapshot key
        self._window_inbox: deque[tuple[str, Any]] = deque()
        # read-only windows waiting for the log to pass their HW position: (marker, columns)
        self._awaiting_hw: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.last_position: dict[str, Any] | None = None
        self._replay_first: str | None = None
        self._blocking: _BlockingRun | None = None
        self.tracker = WindowTracker()
        self.keys = KeyForms(key_value)  # every key compared in the connector's canonical form
        self._window_file = OpenWindowFile(staging.directory)
        self._saved_windows = 0  # the tracker's `changes` when the open windows were last saved
        self._started = time.monotonic()
        self._activity: dict[str, float] = {}  # snapshot (or signal) id -> when a watermark of it came
        self._inbox: deque[tuple[RawSignal, tuple[str, Any] | None]] = deque()
        self._lock = threading.Lock()
        self.changed = threading.Condition()  # notified when a window closes or the state changes
        self._passed: deque[str] = deque(maxlen=256)  # windows whose HW the log has passed
        self._state_changed = False
        self._staged_by_release: dict[int, str] = {}
        self._clean_staging()
        self._restore_open_windows()
        self._rearm_read_only_releases()

    # ------------------------------------------------------------------ outside signals

    def submit(self, signal: RawSignal, position: tuple[str, Any] | None = None) -> None:
        """A signal from a channel outside the log, and the channel's position after it;
        applied (and the position stored in the state) at the next batch."""
        with self._lock:
            self._inbox.append((signal, position))

    # ------------------------------------------------------------------ the stage

    def process(self, items: list[LogItem]) -> list[LogItem]:
        """The items with signal rows replaced by what they cause, and `StateChange`
        markers wherever the snapshot state changed."""
        out: list[LogItem] = []
        if self._replay_first is not None:
            window_id, self._replay_first = self._replay_first, None
            out.extend(self.replay_synthetic(window_id))
        if self._inbox:
            with self._lock:
                pending, self._inbox = list(self._inbox), deque()
            for signal, position in pending:
                if signal.extra.get("error"):
                    self._fail(signal, signal.extra["error"])
                elif not signal.extra.get("skip"):
                    self._signal(signal, None)
                if position is not None:
                    self._set(self.context.at_channel_position(*position))
        if self._window_inbox:
            self._take_windows()
        self._flush_state(out)
        if not len(self.tracker) and self.signal_table is None and not self._awaiting_hw:
            for item in items:
                kind = type(item)
                if kind is SchemaChange:
                    self._schema_change(item)  # any state change it causes goes out with the next batch
                elif kind is TransactionCommit or kind is PositionAdvance:
                    self.last_position = item.position
            return out + items if out else items
        observed = self.tracker.observed_tables()
        for index, item in enumerate(items):
            if type(item) is RowChange:
                table_id = item.table.id
                if table_id == self.signal_table:
                    out.extend(self._signal_row(item))
                    self._flush_state(out)
                    if self._blocking is not None:  # streaming pauses here until the tables are read
                        self._blocking.deferred = items[index + 1 :]
                        out.extend(self.drain())
                        return out
                    continue
                if table_id in observed:
                    self._observe(item)
            elif type(item) is SchemaChange:
                out.append(item)
                self._schema_change(item)
                self._flush_state(out)
                continue
            elif type(item) is TransactionCommit or type(item) is PositionAdvance:
                self.last_position = item.position
                if self._awaiting_hw:
                    out.append(item)
                    out.extend(self._release_passed(item.position, item.ts_ms))
                    self._flush_state(out)
                    continue
            out.append(item)
        return out

    # ------------------------------------------------------------------ read-only windows

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
                self.tracker.open(payload)
                with self.changed:
                    self.changed.notify_all()
            else:
                window_id, marker, columns = payload
                self._awaiting_hw[window_id] = (marker, columns)

    def reached(self, marker: str) -> bool | None:
        """Whether the log, as processed here, has reached a source position (None when
        the connector cannot compare positions, e.g. without GTIDs)."""
        if self.positions is None:
            return None
        return self.last_position is not None and self.positions.passed(self.last_position, marker)

    def window_open(self, window_id: str) -> bool:
        return any(w.id == window_id for w in self.tracker.open_windows())

    def _release_passed(self, position: dict[str, Any], ts_ms: int) -> list[LogItem]:
        """Windows whose HW position the log has now passed, each released in a
        transaction of its own at this position's order key."""
        out: list[LogItem] = []
        for window_id, (marker, columns) in list(self._awaiting_hw.items()):
            if not self.positions.passed(position, marker):
                continue
            del self._awaiting_hw[window_id]
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

    def replay_first(self, window_id: str) -> None:
        """Have the next `process` start with the replay of this read-only release."""
        self._replay_first = window_id

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

    def _flush_state(self, out: list[LogItem]) -> None:
        if self._state_changed:
            self._state_changed = False
            out.append(StateChange(self.context.to_json()))

    def _schema_change(self, item: SchemaChange) -> None:
        present = {t.id: t for t in item.tables}
        for table_id in item.affected:
            if table_id in present:
                self.schemas[table_id] = present[table_id]
            else:
                self.schemas.pop(table_id, None)
                self._end_table(table_id, "the table was dropped")
        if self.context.captured is not None:
            # Tables created or dropped while streaming: their rows come through the log,
            # so they are never "new" for the next start.
            captured = {str(t) for t in self.schemas if self.captures(t)}
            if captured != set(self.context.captured):
                self._set(replace(self.context, captured=tuple(sorted(captured))))

    def check_captured(self, initial: bool) -> None:
        """At start: snapshot tables added to the include list since the last run (or all
        of them with `snapshot.mode=initial` at first start), without stopping streaming."""
        captured = sorted(t for t in self.schemas if self.captures(t))
        names = tuple(str(t) for t in captured)
        previous = self.context.captured
        if previous is None:
            if initial:
                self.start_snapshot("initial", captured, kind="initial")
        else:
            added = [t for t in captured if str(t) not in set(previous)]
            if added:
                log.info(
                    "tables added to the capture list: %s; snapshotting them", ", ".join(map(str, added))
                )
                self.start_snapshot("new-tables", added, kind="new-tables")
        if previous != names:
            self._set(replace(self.context, captured=names))

    def _observe(self, item: RowChange) -> None:
        windows = self.tracker.windows_of(item.table.id)
        for key_columns in {w.key_columns for w in windows}:
            key_of = self.keys.key_of(item.table, key_columns)
            if key_of is None:  # the key column is gone: record nothing, the HW check discards the window
                for window in windows:
                    if window.key_columns == key_columns:
                        window.schema_changed = True
                continue
            keys = [key_of(values) for values in (item.before, item.after) if values is not None]
            self.tracker.observe(item.table.id, keys, key_columns)

    def _canonical_bounds(self, window: Window) -> None:
        """A window's bounds (as its chunk reader's driver gave them) in the canonical key form."""
        schema = self.schemas.get(window.table)
        if schema is not None:
            window.lo = self.keys.canonical(schema, window.key_columns, window.lo)
            window.hi = self.keys.canonical(schema, window.key_columns, window.hi)

    # ------------------------------------------------------------------ signal rows

    def _signal_row(self, item: RowChange) -> list[LogItem]:
        if item.op != OP_CREATE or item.after is None:
            return []
        schema = item.table
        values = dict(zip(schema.column_names, item.after, strict=False))
        signal_id, kind, data = values.get("id"), values.get("type"), values.get("data")
        if not isinstance(signal_id, str) or not isinstance(kind, str):
            self._fail(RawSignal(str(signal_id), str(kind), data, "source"), "id and type must be strings")
            return []
        if kind in (WINDOW_OPEN, WINDOW_CLOSE):
            with contextlib.suppress(orjson.JSONDecodeError, TypeError, AttributeError):
                self._activity[orjson.loads(data).get("snapshot")] = time.monotonic()
            if kind == WINDOW_OPEN:
                self._window_open(signal_id, data)
                return []
            return self._window_close(item, data)
        if self.source_signals:
            self._signal(RawSignal(signal_id, kind, data, "source"), item)
        return []

    def _signal(self, raw: RawSignal, item: RowChange | None) -> None:
        if self.context.seen(raw.id):
            return  # re-read after a restart: already acted on
        if raw.type in INTERNAL_TYPES:
            self._fail(raw, "watermark rows are written by Tidemark's chunk readers, not sent as signals")
            return
        try:
            action = parse_signal(raw)
            apply_signal(action, self, item)
        except (SignalError, SnapshotError, ConditionError) as exc:
            self._fail(raw, str(exc))
            return
        if self._blocking is None:  # a blocking snapshot counts as done only when its last row is out
            self._set(self.context.remember(raw.id))

    def _fail(self, raw: RawSignal, reason: str) -> None:
        log.error("signal %s (%s, from %s) failed: %s", raw.id, raw.type, raw.channel, reason)
        refused = {"id": raw.id, "type": raw.type, "channel": raw.channel, "reason": reason}
        context = self.context.refuse({**refused, "at_ms": int(time.time() * 1000)})
        self._set(context.remember(raw.id) if raw.id else context)

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
            progress.append(TableProgress(str(table_id), key))
        if progress:
            self._begin(Snapshot(_new_id(), signal_id, kind, tuple(progress), self.chunk_size))

    def execute_snapshot(self, action: ExecuteSnapshot, item: RowChange | None = None) -> None:
        """execute-snapshot: the tables, keys and filters checked, then the snapshot begun."""
        tables, problems = matching_tables(action.collections, self.schemas, self.captures)
        if problems:
            raise SignalError("; ".join(problems))
        progress = []
        for table_id in tables:
            schema = self.schemas[table_id]
            key = snapshot_key(schema, action.surrogate_key, self.key_columns(table_id))
            condition = action.condition_for(table_id)
            if condition is not None:
                parse_condition(condition, schema.column_names)  # refuse bad filters now, not mid-snapshot
            progress.append(TableProgress(str(table_id), key, condition))
        if action.snapshot_type == "blocking":
            if self.open_chunk_source is None or item is None:
                raise SignalError(
                    "blocking snapshots are signalled through the signal table (source channel)"
                )
            plans = [(self.schemas[TableId.parse(p.table)], p) for p in progress]
            self._blocking = _BlockingRun(
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

    def _begin(self, snapshot: Snapshot) -> None:
        snapshot = replace(snapshot, started_ms=int(time.time() * 1000))
        self._set(self.context.put(snapshot))
        log.info(
            "snapshot %s of %s requested (%s)",
            snapshot.id,
            ", ".join(t.table for t in snapshot.tables),
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

    # ------------------------------------------------------------------ windows

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
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, TidemarkError) as exc:
            log.error("ignoring malformed window-open watermark %s: %s", signal_id, exc)
            return
        if snapshot is None:
            return  # a watermark of a snapshot that was stopped or finished
        self._canonical_bounds(window)
        if not self._stale(window):
            self.tracker.open(window)

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
    ) -> list[LogItem]:
        """The log passed a window's HW: its release, as items to put in the HW's place.
        `shaped`: the digest of the staged form the chunk job wrote the rows in (None: the
        table's own rows)."""
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
            progress = next(t for t in snapshot.tables if t.table == str(window.table))
            if progress.done or (window.index is not None and window.index in progress.done_windows):
                return []  # a planned window released before (the reader ran again)
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
                        schema, OP_READ, None, row, _snapshot_source(source, window.table, i), ts_ms, form
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
        progress = (
            next((t for t in snapshot.tables if t.table == str(window.table)), None) if snapshot else None
        )
        if progress is None or progress.done:
            return True
        if window.index is not None:
            return window.index in progress.done_windows
        schema = self.schemas.get(window.table)
        lo = self.keys.canonical(schema, window.key_columns, progress.lo) if schema else progress.lo
        return lo != window.lo

    def _retire_windows(self) -> None:
        """Forget stale windows whose watermarks are in the log (see `_stale`); without
        this, the LW of a chunk job killed before its HW would keep a window open forever."""
        for window in self.tracker.open_windows():
            if window.in_log and self._stale(window):
                self.tracker.close(window.id)

    def _restore_open_windows(self) -> None:
        """The windows open at the last offset commit, with the keys they recorded."""
        for window in self._window_file.load():
            if not self._stale(window):
                self.tracker.open(window)
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
            return replace(progress, lo=window.hi, done=window.hi is None, **common)
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
            _snapshot_source(source, window.table, 0),
            ts_ms,
        )

    def window_passed(self, window_id: str) -> bool:
        return window_id in self._passed

    def after_commit(self, snapshot_state: dict[str, Any] | None) -> None:
        """A committed offset carries `released`: windows up to it will never be replayed."""
        upto = int((snapshot_state or {}).get("released", 0))
        for seq in [s for s in self._staged_by_release if s <= upto]:
            self.staging.delete(self._staged_by_release.pop(seq))

    def _rearm_read_only_releases(self) -> None:
        """A read-only release is not in the log. If the committed state is from before one
        (its window's range not yet passed), wait for its HW position again: the log will
        pass it at the same point and release exactly the same rows with the same order key,
        instead of the range being read (and released) a second time."""
        for window_id in self.staging.windows():
            decided = self.staging.read_release(window_id)
            if not decided or decided.marker is None:
                continue
            window = decided.window
            snapshot = self.context.find(window.snapshot_id)
            progress = (
                next((t for t in snapshot.tables if t.table == str(window.table)), None) if snapshot else None
            )
            if progress is not None and not progress.done and progress.lo == window.lo:
                self.tracker.open(window)
                self._awaiting_hw[window_id] = (decided.marker, tuple(decided.columns or ()))

    def _clean_staging(self) -> None:
        """Staged windows of snapshots no longer in the (committed) state can never be released."""
        for window_id in self.staging.windows():
            decided = self.staging.read_release(window_id)
            # In-process window ids start with their snapshot's id; a decision names its window.
            snapshot_id = decided.window.snapshot_id if decided else window_id.split(".", 1)[0]
            if self.context.find(snapshot_id) is None:
                self.staging.delete(window_id)

    def _set(self, context: SnapshotContext) -> None:
        self.context = context
        self._state_changed = True
        with self.changed:
            self.changed.notify_all()

    def progress(self) -> dict[str, Any]:
        """Machine-readable progress for status.json and Airflow: the state as processed
        so far, with each running snapshot's open windows and how long ago it last saw a
        watermark (`cdc_core/snapshot/health.py` tells a stalled snapshot by them)."""
        progress = self.context.progress()
        now = time.monotonic()
        windows = self.tracker.open_windows()
        for entry in progress["running"]:
            ids = {entry["id"], entry["signal_id"]}
            entry["open_windows"] = sum(1 for w in windows if w.snapshot_id in ids)
            last = max((self._activity.get(i, self._started) for i in ids), default=self._started)
            entry["idle_ms"] = int((now - last) * 1000)
        return {**progress, "open_windows": len(self.tracker)}


class _BlockingRun:
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
                parse_condition(progress.condition, schema.column_names) if progress.condition else None
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


def _snapshot_source(source: dict[str, Any], table: TableId, row: int) -> dict[str, Any]:
    return {**source, "db": table.database, "table": table.table, "snapshot": "incremental", "row": row}


def _new_id() -> str:
    return uuid.uuid4().hex[:16]
