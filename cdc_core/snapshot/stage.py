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
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from cdc_core.events.envelope import OP_CREATE, OP_TRUNCATE
from cdc_core.schema.model import Column, TableId, TableSchema
from cdc_core.signals.actions import (
    INTERNAL_TYPES,
    WINDOW_CLOSE,
    WINDOW_OPEN,
    RawSignal,
    SignalError,
    apply_signal,
    parse_signal,
)
from cdc_core.signals.conditions import ConditionError
from cdc_core.snapshot.blocking import BlockingRun, BlockingSnapshots
from cdc_core.snapshot.chunks import SnapshotError
from cdc_core.snapshot.context import DAY_MS, SnapshotContext
from cdc_core.snapshot.key_forms import KeyForms, KeyValue
from cdc_core.snapshot.open_windows import OpenWindowFile
from cdc_core.snapshot.read_only_windows import ReadOnlyWindows
from cdc_core.snapshot.snapshot_actions import SnapshotActions
from cdc_core.snapshot.staged_form import StagedForm
from cdc_core.snapshot.staging import LocalStaging
from cdc_core.snapshot.window_release import WindowReleases
from cdc_core.snapshot.windows import Window, WindowTracker
from cdc_core.source import (
    LogItem,
    PositionAdvance,
    RenderedChanges,
    RowChange,
    SchemaChange,
    StateChange,
    TransactionBegin,
    TransactionCommit,
)

if TYPE_CHECKING:
    from cdc_core.connector import PositionWatermarks

log = logging.getLogger("tidemark.snapshot")


class SnapshotStage(SnapshotActions, WindowReleases, ReadOnlyWindows, BlockingSnapshots):
    """The stage itself: items in log order, signals (it is the actions' `SignalTarget`),
    window opening and key recording, the snapshot state. Its parts, one module each: the
    release at a window's HW (`window_release`), read-only windows (`read_only_windows`),
    blocking snapshots (`blocking`); they share the state set up here."""

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
        partitions: Callable[[TableId], tuple[str | None, ...]] = lambda _t: (None,),
        refused_keep_ms: int = 7 * DAY_MS,  # `signal.refused.retention.days`
        excluded_by: Callable[[TableId], str] | None = None,  # which capture filter leaves a table out
    ) -> None:
        self.context = context
        self.refused_keep_ms = refused_keep_ms
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
        self.partitions = partitions  # the source's parts with a log of their own (`Source.partitions`)
        self.excluded_by = excluded_by
        self._window_inbox: deque[tuple[str, Any]] = deque()
        self._to_open: list[Window] = []  # read-only windows waiting for a transaction boundary
        self._opened_at: dict[str, dict[str, Any] | None] = {}
        self._in_txn = False  # between a transaction's BEGIN and COMMIT in the log
        # read-only windows waiting for the log to pass their HW position: (marker, columns)
        self._awaiting_hw: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.last_position: dict[str, Any] | None = None
        self._replay_first: str | None = None
        self._blocking: BlockingRun | None = None
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

    # ------------------------------------------------------------------ outside signals

    def submit(self, signal: RawSignal, position: tuple[str, Any] | None = None) -> None:
        """A signal from a channel outside the log, and the channel's position after it;
        applied (and the position stored in the state) at the next batch."""
        with self._lock:
            self._inbox.append((signal, position))

    def has_outside_signals(self) -> bool:
        """Whether signals from the kafka or file channel wait for the next batch (on an
        idle log the streamer hands the stage an empty one for them)."""
        return bool(self._inbox)

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
        if (
            not len(self.tracker)
            and self.signal_table is None
            and not self._awaiting_hw
            and not self._to_open
        ):
            for item in items:
                kind = type(item)
                if kind is SchemaChange:
                    self._schema_change(item)  # any state change it causes goes out with the next batch
                elif kind is TransactionCommit or kind is PositionAdvance or kind is RenderedChanges:
                    self.last_position = item.position
                    self._in_txn = False
                elif kind is TransactionBegin:
                    self._in_txn = True
            return out + items if out else items
        observed = self.tracker.observed_tables()  # a live view: windows open as signals pass
        queue = deque(items)
        while queue:
            item = queue.popleft()
            if type(item) is RenderedChanges and self._one_by_one(item, observed):
                queue.extendleft(reversed(item.expand()))
                continue
            if type(item) is RowChange:
                table_id = item.table.id
                if table_id == self.signal_table:
                    out.extend(self._signal_row(item))
                    self._flush_state(out)
                    if self._blocking is not None:  # streaming pauses here until the tables are read
                        self._blocking.deferred = list(queue)
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
            elif type(item) is TransactionBegin:
                self._in_txn = True
            elif type(item) is RenderedChanges:
                self.last_position = item.position
                self._in_txn = False
            elif type(item) is TransactionCommit or type(item) is PositionAdvance:
                self.last_position = item.position
                self._in_txn = False
                if self._to_open:
                    self._open_pending()
                if self._awaiting_hw:
                    out.append(item)
                    out.extend(self._release_passed(item.position, item.ts_ms))
                    self._flush_state(out)
                    continue
            out.append(item)
        return out

    def _one_by_one(self, item: RenderedChanges, observed: Any) -> bool:
        """Whether changes a source rendered itself must be looked at one by one: their
        table has an open window (their keys leave it), is the signal table, or windows
        wait for a transaction boundary or a position."""
        table = item.table.id
        return bool(self._to_open or self._awaiting_hw) or table in observed or table == self.signal_table

    # ------------------------------------------------------------------ read-only windows

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
        if item.op == OP_TRUNCATE:  # no key to record: every key of the table changed
            for window in windows:
                window.truncated = True
            return
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
            if window.driver_hi is None:
                window.driver_hi = window.hi
            window.lo = self.keys.canonical(schema, window.key_columns, window.lo)
            window.hi = self.keys.canonical(schema, window.key_columns, window.hi)

    # ------------------------------------------------------------------ signal rows

    def _signal_row(self, item: RowChange) -> list[LogItem]:
        if item.op != OP_CREATE or item.after is None:
            return []
        schema = item.table
        values = dict(zip(schema.column_names, item.after, strict=False))
        signal_id, kind, data = values.get("id"), values.get("type"), values.get("data")
        problem = _malformed_row(signal_id, kind)
        if problem:
            raw = RawSignal(
                "" if signal_id is None else str(signal_id),
                kind if isinstance(kind, str) else "",
                data,
                "source",
            )
            self._fail(raw, problem)
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
        context = self.context.refuse({**refused, "at_ms": int(time.time() * 1000)}, self.refused_keep_ms)
        self._set(context.remember(raw.id) if raw.id else context)

    # ------------------------------------------------------------------ windows

    def after_commit(self, snapshot_state: dict[str, Any] | None) -> None:
        """A committed offset carries `released`: windows up to it will never be replayed."""
        upto = int((snapshot_state or {}).get("released", 0))
        for seq in [s for s in self._staged_by_release if s <= upto]:
            self.staging.delete(self._staged_by_release.pop(seq))

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


def _malformed_row(signal_id: Any, kind: Any) -> str:
    """What a signal row lacks to be a signal ("" when nothing): each missing or mistyped
    field by name, with what it should hold."""
    problems = []
    if signal_id is None or signal_id == "":
        problems.append("it has no id")
    elif not isinstance(signal_id, str):
        problems.append(f"its id is a {type(signal_id).__name__}, not text")
    if kind is None or kind == "":
        problems.append("it has no type")
    elif not isinstance(kind, str):
        problems.append(f"its type is a {type(kind).__name__} ({kind!r}), not text")
    if not problems:
        return ""
    return (
        f"not a signal: {' and '.join(problems)} (a signal is {{id, type, data}}; type names what to do, "
        f"e.g. execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot, log)"
    )
