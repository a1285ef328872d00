"""The incremental-snapshot state, carried in every committed offset.

It changes only in log order (a signal row, a watermark, a release), so the state in an
offset is exactly the state after the log position it resumes from: after a restart the
snapshot goes on from the first window not done, and a release that was cut short is
redone as a new window. Objects are immutable; every change makes a new one, so an offset
that captured the state earlier never sees later changes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from cdc_core.errors import TidemarkError
from cdc_core.snapshot.keycodec import decode_key, encode_key

MAX_SIGNAL_IDS = 200
# Refused signals are kept for `signal.refused.retention.days`, and at most this many of
# them (the newest), each reason cut to MAX_REASON characters: every committed offset
# carries them, so a flood of bad signals cannot make the offsets large.
MAX_REFUSED = 200
MAX_REASON = 1000
DAY_MS = 86_400_000


@dataclass(frozen=True)
class ReadAgain:
    """A planned window the streamer could not release (the table changed inside it, its
    staged rows were gone or in another form) and reads again itself."""

    index: int
    of: int | None
    lo: tuple[Any, ...] | None
    hi: tuple[Any, ...] | None
    exact: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "of": self.of,
            "lo": encode_key(self.lo),
            "hi": encode_key(self.hi),
            "exact": self.exact,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ReadAgain:
        return cls(
            int(d["index"]),
            d.get("of"),
            decode_key(d.get("lo")),
            decode_key(d.get("hi")),
            bool(d.get("exact")),
        )


@dataclass(frozen=True)
class TableProgress:
    table: str  # "db.table"
    key: tuple[str, ...]
    condition: str | None = None  # the filter text as signalled (re-validated on use)
    lo: tuple[Any, ...] | None = None  # the next window starts after this key
    done: bool = False
    windows_done: int = 0
    rows_released: int = 0
    rows_dropped: int = 0
    windows_total: int | None = None  # known when an external reader planned the windows
    done_windows: tuple[int, ...] = ()  # indexes of the planned windows already released
    read_again: tuple[ReadAgain, ...] = ()  # planned windows queued for the streamer's reader
    # The part of the source this entry reads (a Vitess shard: each has its own log, so its
    # windows need watermarks in that log); None for a source with one log. A table of a
    # partitioned source has one entry per partition.
    partition: str | None = None

    @property
    def label(self) -> str:
        """The table, with its partition where there is one (`ks.t@-80`), for people."""
        return self.table if self.partition is None else f"{self.table}@{self.partition}"

    def is_for(self, table: str, partition: str | None) -> bool:
        return self.table == table and self.partition == partition

    def to_json(self) -> dict[str, Any]:
        return {
            **({"partition": self.partition} if self.partition is not None else {}),
            "windows_total": self.windows_total,
            "done_windows": list(self.done_windows),
            **({"read_again": [r.to_json() for r in self.read_again]} if self.read_again else {}),
            "table": self.table,
            "key": list(self.key),
            "condition": self.condition,
            "lo": encode_key(self.lo),
            "done": self.done,
            "windows_done": self.windows_done,
            "rows_released": self.rows_released,
            "rows_dropped": self.rows_dropped,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableProgress:
        return cls(
            d["table"],
            tuple(d["key"]),
            d.get("condition"),
            decode_key(d.get("lo")),
            bool(d.get("done")),
            int(d.get("windows_done", 0)),
            int(d.get("rows_released", 0)),
            int(d.get("rows_dropped", 0)),
            d.get("windows_total"),
            tuple(d.get("done_windows", ())),
            tuple(ReadAgain.from_json(r) for r in d.get("read_again", ())),
            d.get("partition"),
        )


@dataclass(frozen=True)
class Snapshot:
    id: str
    signal_id: str
    kind: str  # "incremental" | "blocking" | "initial"
    tables: tuple[TableProgress, ...]
    chunk_size: int
    paused: bool = False
    started_ms: int = 0
    reader: str = "inprocess"  # or "spark": windows come from spark_jobs/incremental_snapshot.py
    release: str = "stream"  # or "lakehouse": release records instead of op=r events

    @property
    def done(self) -> bool:
        return all(t.done for t in self.tables)

    def current(self) -> TableProgress | None:
        """The table whose next window is due (tables are read one after another)."""
        return next((t for t in self.tables if not t.done), None)

    def progress_of(self, table: str, partition: str | None = None) -> TableProgress | None:
        return next((t for t in self.tables if t.is_for(table, partition)), None)

    def with_table(self, progress: TableProgress) -> Snapshot:
        return replace(
            self,
            tables=tuple(
                progress if t.is_for(progress.table, progress.partition) else t for t in self.tables
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "signal_id": self.signal_id,
            "kind": self.kind,
            "tables": [t.to_json() for t in self.tables],
            "chunk_size": self.chunk_size,
            "paused": self.paused,
            "started_ms": self.started_ms,
            "reader": self.reader,
            "release": self.release,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Snapshot:
        return cls(
            d["id"],
            d["signal_id"],
            d["kind"],
            tuple(TableProgress.from_json(t) for t in d["tables"]),
            int(d["chunk_size"]),
            bool(d.get("paused")),
            int(d.get("started_ms", 0)),
            d.get("reader", "inprocess"),
            d.get("release", "stream"),
        )


# The snapshot state's format, kept in every committed offset (`SnapshotContext.to_json`).
CONTEXT_VERSION = 1


@dataclass(frozen=True)
class SnapshotContext:
    snapshots: tuple[Snapshot, ...] = ()
    signals: tuple[str, ...] = ()  # ids of signals already acted on (newest last)
    finished: tuple[dict[str, Any], ...] = ()  # summaries of the last finished snapshots
    released: int = 0  # windows released so far: staged files up to here are no longer needed
    channels: dict[str, Any] = field(default_factory=dict)  # read positions of the kafka and file channels
    captured: tuple[str, ...] | None = None  # the captured tables, to notice ones added to the include list
    # Signals refused (malformed, unknown table, filter outside the grammar, ...): id, type,
    # channel, reason and when (`at_ms`), oldest first, so an operator who looks after a
    # restart still sees them; kept for a time (`keep_refused`), not by a count.
    refused: tuple[dict[str, Any], ...] = ()
    refused_dropped: int = 0  # refusals within the time kept but beyond MAX_REFUSED, dropped

    def active(self) -> Snapshot | None:
        """Snapshots run one at a time, in the order they were requested."""
        return self.snapshots[0] if self.snapshots else None

    def find(self, snapshot_id: str) -> Snapshot | None:
        """By the snapshot's id, or by the id of the signal that asked for it."""
        found = next((s for s in self.snapshots if s.id == snapshot_id), None)
        return found or next((s for s in self.snapshots if s.signal_id == snapshot_id), None)

    def put(self, snapshot: Snapshot) -> SnapshotContext:
        if snapshot.done:
            summary = {
                "id": snapshot.id,
                "signal_id": snapshot.signal_id,
                "kind": snapshot.kind,
                "finished_ms": int(time.time() * 1000),
                "tables": [t.to_json() for t in snapshot.tables],
            }
            rest = tuple(s for s in self.snapshots if s.id != snapshot.id)
            return replace(self, snapshots=rest, finished=(*self.finished, summary)[-10:])
        if self.find(snapshot.id) is None:
            return replace(self, snapshots=(*self.snapshots, snapshot))
        return replace(self, snapshots=tuple(snapshot if s.id == snapshot.id else s for s in self.snapshots))

    def remove(self, snapshot_id: str) -> SnapshotContext:
        return replace(self, snapshots=tuple(s for s in self.snapshots if s.id != snapshot_id))

    def seen(self, signal_id: str) -> bool:
        return signal_id in self.signals

    def at_channel_position(self, channel: str, position: Any) -> SnapshotContext:
        return replace(self, channels={**self.channels, channel: position})

    def remember(self, signal_id: str) -> SnapshotContext:
        return replace(self, signals=(*self.signals, signal_id)[-MAX_SIGNAL_IDS:])

    def refuse(
        self, signal: dict[str, Any], keep_ms: int = 7 * DAY_MS, now_ms: int | None = None
    ) -> SnapshotContext:
        """Remember a refused signal (`at_ms` set to now unless given), forgetting those
        older than `keep_ms`; beyond MAX_REFUSED the oldest go, and are counted."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        entry = {**signal, "at_ms": signal.get("at_ms") or now_ms}
        if len(str(entry.get("reason", ""))) > MAX_REASON:
            entry["reason"] = str(entry["reason"])[: MAX_REASON - 1] + "\N{HORIZONTAL ELLIPSIS}"
        kept = self.keep_refused(keep_ms, now_ms)
        refused = (*kept.refused, entry)
        over = max(0, len(refused) - MAX_REFUSED)
        return replace(kept, refused=refused[over:], refused_dropped=kept.refused_dropped + over)

    def keep_refused(self, keep_ms: int, now_ms: int | None = None) -> SnapshotContext:
        """Without the refusals older than `keep_ms` (`signal.refused.retention.days`)."""
        since = (int(time.time() * 1000) if now_ms is None else now_ms) - keep_ms
        kept = tuple(r for r in self.refused if int(r.get("at_ms") or 0) >= since)
        if len(kept) == len(self.refused):
            return self
        # Those dropped beyond MAX_REFUSED were older still: past the time too.
        return replace(self, refused=kept, refused_dropped=0)

    def progress(self) -> dict[str, Any]:
        """Per snapshot and table: windows done/total, rows released, rows dropped by
        dedup, rate (what `tidemark status`, status.json and Airflow show)."""
        now = time.time() * 1000
        running = []
        for snapshot in self.snapshots:
            elapsed = max((now - snapshot.started_ms) / 1000, 1e-3)
            tables = []
            for t in snapshot.tables:
                total = t.windows_total  # known for planned (Spark) windows
                tables.append(
                    {
                        "table": t.table,
                        **({"partition": t.partition} if t.partition is not None else {}),
                        "done": t.done,
                        "windows_done": t.windows_done,
                        "windows_total": total,
                        "rows_released": t.rows_released,
                        "rows_dropped": t.rows_dropped,
                        "rows_per_second": round(t.rows_released / elapsed, 1),
                        "read_again": len(t.read_again),
                    }
                )
            running.append(
                {
                    "id": snapshot.id,
                    "signal_id": snapshot.signal_id,
                    "kind": snapshot.kind,
                    "reader": snapshot.reader,
                    "release": snapshot.release,
                    "paused": snapshot.paused,
                    "started_ms": snapshot.started_ms,
                    "tables": tables,
                }
            )
        return {
            "running": running,
            "finished": list(self.finished),
            "failed_signals": list(self.refused),
            **({"failed_signals_dropped": self.refused_dropped} if self.refused_dropped else {}),
        }

    def to_json(self) -> dict[str, Any] | None:
        if (
            not self.snapshots
            and not self.signals
            and not self.finished
            and not self.channels
            and self.captured is None
            and not self.refused
        ):
            return None
        return {
            "version": CONTEXT_VERSION,
            "snapshots": [s.to_json() for s in self.snapshots],
            "signals": list(self.signals),
            "finished": list(self.finished),
            "released": self.released,
            "channels": self.channels,
            "captured": None if self.captured is None else list(self.captured),
            **({"refused": list(self.refused)} if self.refused else {}),
            **({"refused_dropped": self.refused_dropped} if self.refused_dropped else {}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> SnapshotContext:
        """Today's format and every older one (version 0: before the field existed); a newer
        one is refused rather than half-read, which would strand its running snapshots."""
        if not d:
            return cls()
        version = int(d.get("version", 0))
        if version > CONTEXT_VERSION:
            raise TidemarkError(
                f"the committed snapshot state has format version {version}, newer than this Tidemark "
                f"reads ({CONTEXT_VERSION}): run the Tidemark version that wrote it, or a newer one"
            )
        return cls(
            tuple(Snapshot.from_json(s) for s in d.get("snapshots", [])),
            tuple(d.get("signals", [])),
            tuple(d.get("finished", [])),
            int(d.get("released", 0)),
            dict(d.get("channels", {})),
            None if d.get("captured") is None else tuple(d["captured"]),
            tuple(d.get("refused", ())),
            int(d.get("refused_dropped", 0)),
        )
