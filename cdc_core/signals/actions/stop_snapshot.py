"""`stop-snapshot`: stop the running incremental snapshot, whole or for some tables."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cdc_core.signals.actions.base import SignalError, SignalTarget, table_patterns


@dataclass(frozen=True)
class StopSnapshot:
    id: str
    collections: tuple[re.Pattern[str], ...] = ()  # empty: the whole snapshot


class _Stop:
    name = "stop-snapshot"
    action_type = StopSnapshot

    def parse(self, signal_id: str, data: dict[str, Any]) -> StopSnapshot:
        snapshot_type = str(data.get("type", "")).lower()
        if snapshot_type != "incremental":
            raise SignalError(
                f"stop-snapshot needs data.type 'incremental' (got {data.get('type')!r}); only incremental "
                "snapshots can be stopped"
            )
        collections = data.get("data-collections")
        if collections is None:  # absent: the whole snapshot
            return StopSnapshot(signal_id, ())
        return StopSnapshot(signal_id, table_patterns(collections, "data-collections"))

    def apply(self, action: StopSnapshot, target: SignalTarget, item: Any) -> None:
        target.stop_snapshot(action)


ACTION = _Stop()
