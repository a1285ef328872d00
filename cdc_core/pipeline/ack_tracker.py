"""Which offset may be committed: the last one whose records, and all before them, the
sink has acknowledged.

Kafka acknowledges per partition, so acknowledgements arrive out of order across topics;
an offset is committable only when everything before it is durable. Entries are kept in
dispatch order; each waits for its records' acks; the committable offset is the one of
the last entry of the fully acknowledged prefix.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any


class AckTracker:
    def __init__(self) -> None:
        self._entries: deque[list[Any]] = deque()  # [entry_id, pending, offset]
        self._pending: dict[int, list[Any]] = {}
        self._next_id = 0
        self._committable: Any = None
        self._lock = threading.Lock()

    def add(self, offset: Any, records: int) -> int:
        """Register an offset reached once `records` more records are acknowledged."""
        with self._lock:
            entry_id = self._next_id
            self._next_id += 1
            entry = [entry_id, records, offset]
            if self._entries and records == 0 and offset is not None and self._entries[-1][1] == 0:
                # Coalesce runs of record-less positions: only the latest matters.
                self._entries[-1][2] = offset
                return self._entries[-1][0]
            self._entries.append(entry)
            if records:
                self._pending[entry_id] = entry
            self._advance()
            return entry_id

    def ack(self, entry_id: int) -> None:
        with self._lock:
            entry = self._pending.get(entry_id)
            if entry is None:
                raise KeyError(f"unknown or already complete entry {entry_id}")
            entry[1] -= 1
            if entry[1] == 0:
                del self._pending[entry_id]
                self._advance()

    def _advance(self) -> None:
        while self._entries and self._entries[0][1] == 0:
            offset = self._entries.popleft()[2]
            if offset is not None:  # None: records that do not move the position (heartbeats)
                self._committable = offset

    def take_committable(self) -> Any:
        """The newest committable offset since the last call, or None."""
        with self._lock:
            offset, self._committable = self._committable, None
            return offset

    @property
    def outstanding(self) -> int:
        with self._lock:
            return len(self._pending)
