"""Events a source left out under `event.processing.failure.handling.mode` `warn` or
`skip`, as the streamer's status shows them: how many, and the last few with where they
were and why (the row's key when it could be read, never its contents).

The count is carried from one streamer to the next through `status.json`, so a
connector restarted after a skip (a bounded Airflow run, a crash) still shows it; it is a
count for people, not state: a crash before the skip's position was committed reads the
event again and counts it again.
"""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from cdc_core.source import SkippedEvent

KEPT = 20  # the last skipped events listed


class SkippedEvents:
    def __init__(self, total: int = 0, recent: list[dict[str, Any]] | None = None) -> None:
        self.total = total
        self.recent: deque[dict[str, Any]] = deque(recent or [], maxlen=KEPT)

    @classmethod
    def carried_from(cls, status: Path) -> SkippedEvents:
        """What the connector's previous streamer reported (nothing when there is no
        readable status)."""
        try:
            previous = orjson.loads(status.read_bytes()).get("skipped_events") or {}
            return cls(int(previous.get("total", 0)), list(previous.get("recent") or []))
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def add(self, event: SkippedEvent) -> None:
        self.total += 1
        self.recent.append(
            {
                "table": None if event.table is None else str(event.table),
                "key": event.key,
                "where": event.where,
                "reason": event.reason,
                "source_ts_ms": event.ts_ms,
                "at_ms": int(time.time() * 1000),
            }
        )

    def as_json(self) -> dict[str, Any]:
        return {"total": self.total, "recent": list(self.recent)}
