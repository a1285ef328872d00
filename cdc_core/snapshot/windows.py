"""DBLog snapshot windows, as the streamer sees them in log order.

A chunk reader writes a low watermark (LW), reads the rows of one table whose key lies in
`(lo, hi]`, stages them, and writes a high watermark (HW). Between LW and HW in the log,
the streamer records the key of every change to that table inside the window's range. At
HW, a staged row whose key was recorded is older than (or as old as) an event already
delivered, so it is dropped; the rest are released at the HW's position. Windows are
independent, so any number can be open at once (parallel readers).

Recording is bounded to the window's table and key range. Python compares keys the way
the database does for numbers, temporals and binary strings; for text keys under a
collation (case- or accent-insensitive, padded) it cannot, so such a window records every
key of its table while it is open — dropping a staged row is always safe when its key
changed inside the window, so recording more keys is never wrong, only bigger.

Keys are compared in one canonical form (the connector's `key_value`), whichever reader
gave them: the binlog, a chunk read, a staged file. The windows whose watermarks are in
the log, with their recorded keys, are kept on disk at every offset commit
(`open_windows.py`), so a streamer restarted between a window's LW and HW still releases
it at the HW, as it would have without the restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cdc_core.schema.model import TableId

Key = tuple[Any, ...]


@dataclass
class Window:
    id: str
    snapshot_id: str
    table: TableId
    lo: Key | None  # exclusive; None: from the first key
    hi: Key | None  # inclusive; None: to the last key
    exact_range: bool = True
    key_columns: tuple[str, ...] = ()
    recorded: set[Key] = field(default_factory=set)
    schema_changed: bool = False  # the key columns vanished mid-window: never release it
    index: int | None = None  # position in a planned set of windows (external readers)
    of: int | None = None  # size of that set
    in_log: bool = True  # its LW and HW are rows in the log (read-only windows are not)
    partition: str | None = None  # the source partition (shard) whose log holds its watermarks
    # `hi` as the chunk reader's driver gave it, before the canonical form replaced it: the
    # next window's lower bound, which goes back to the database (a canonical form need not
    # be a value the database can compare: MongoDB's is an `_id`'s Extended JSON text).
    driver_hi: Key | None = None
    truncated: bool = False  # a TRUNCATE of the table mid-window: every key changed
    # Where the close note of a window closed by deleting its open row is (insert_delete,
    # `window_notes.py`); None: a close row closes it.
    note: str | None = None

    def covers(self, key: Key) -> bool:
        if not self.exact_range:
            return True
        try:
            return (self.lo is None or key > self.lo) and (self.hi is None or key <= self.hi)
        except TypeError:  # keys that do not compare (a type changed): record, never guess
            return True


@dataclass(frozen=True)
class Release:
    window: Window
    rows: list[tuple[Any, ...]]
    dropped: int


class WindowTracker:
    def __init__(self) -> None:
        self._by_id: dict[str, Window] = {}
        self._by_table: dict[TableId, list[Window]] = {}
        self.changes = 0  # grows with every window opened or closed and every key recorded

    def __len__(self) -> int:
        return len(self._by_id)

    def open(self, window: Window) -> None:
        if window.id in self._by_id:  # the same LW seen twice (a re-read after restart)
            return
        self._by_id[window.id] = window
        self._by_table.setdefault(window.table, []).append(window)
        self.changes += 1

    def observe(
        self, table: TableId, keys: Iterable[Key], key_columns: tuple[str, ...] | None = None
    ) -> None:
        """A change to `table` touching `keys` (before and after key of an update), in
        the canonical key form over `key_columns` (None: every window of the table)."""
        windows = self._by_table.get(table)
        if not windows:
            return
        for key in keys:
            for window in windows:
                if key_columns is not None and window.key_columns != key_columns:
                    continue
                if window.covers(key) and key not in window.recorded:
                    window.recorded.add(key)
                    self.changes += 1

    def get(self, window_id: str) -> Window | None:
        return self._by_id.get(window_id)

    def close(self, window_id: str) -> Window | None:
        """Remove and return the window, or None if it was not open in this process."""
        window = self._by_id.pop(window_id, None)
        if window is not None:
            windows = self._by_table[window.table]
            windows.remove(window)
            if not windows:
                del self._by_table[window.table]
            self.changes += 1
        return window

    def discard(self, snapshot_id: str | None = None, table: TableId | None = None) -> list[Window]:
        """Forget open windows (a stopped snapshot); their HWs will release nothing."""
        gone = [
            w
            for w in self._by_id.values()
            if (snapshot_id is None or w.snapshot_id == snapshot_id) and (table is None or w.table == table)
        ]
        for window in gone:
            self.close(window.id)
        return gone

    def open_windows(self) -> list[Window]:
        return list(self._by_id.values())

    def observed_tables(self) -> Any:
        """A live view of the tables that have open windows."""
        return self._by_table.keys()

    def windows_of(self, table: TableId) -> list[Window]:
        return self._by_table.get(table, [])


def release(
    window: Window, staged: Iterable[tuple[Any, ...]], key_of: Callable[[tuple[Any, ...]], Key]
) -> Release:
    """The staged rows to emit at HW: those whose key no change inside the window touched."""
    rows: list[tuple[Any, ...]] = []
    dropped = 0
    recorded = window.recorded
    for row in staged:
        if key_of(row) in recorded:
            dropped += 1
        else:
            rows.append(row)
    return Release(window, rows, dropped)
