"""Deferrable wait for a snapshot: fires when every window of the snapshot a signal
started has been released by the streamer (as recorded in its committed offsets), or
when the snapshot has stalled: windows left that nothing is reading
(`cdc_core.snapshot.health`), so the task can run the chunk job again.

Importable by the triggerer from the plugins folder (outside the DAG bundle).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import TriggerEvent

from cdc_core.snapshot.health import DEFAULT_STALL_SECONDS, live_entry, snapshot_health
from tidemark_airflow.hooks import state
from tidemark_airflow.triggers.polling import StatePollingTrigger


class SnapshotReleasedTrigger(StatePollingTrigger):
    def __init__(
        self,
        config_file: str,
        signal_id: str,
        timeout_seconds: float,
        poll_seconds: float = 2.0,
        stall_seconds: float = DEFAULT_STALL_SECONDS,
    ) -> None:
        super().__init__(
            config_file=config_file,
            signal_id=signal_id,
            timeout_seconds=timeout_seconds,
            poll_seconds=poll_seconds,
            stall_seconds=stall_seconds,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_seconds
        last: dict[str, Any] | None = None
        while True:
            try:
                doc = await asyncio.to_thread(state.status_of_file, self.config_file)
            except (
                Exception
            ) as exc:  # a state the trigger cannot read is the task's failure, not the triggerer's
                yield TriggerEvent({"status": "error", "signal_id": self.signal_id, "message": str(exc)})
                return
            where, snap = state.snapshot_progress(doc, self.signal_id)
            if where == "finished":
                yield TriggerEvent({"status": "released", "signal_id": self.signal_id, "snapshot": snap})
                return
            if snap is not None and snap != last:
                self.log.info("snapshot %s: %s", self.signal_id, describe(snap))
                last = snap
            if snap is not None:
                live = live_entry((doc.get("streamer") or {}).get("snapshots"), snap)
                health = snapshot_health(snap, live, self.stall_seconds)
                if health["state"] == "stalled":
                    yield TriggerEvent(
                        {
                            "status": "stalled",
                            "signal_id": self.signal_id,
                            "snapshot": snap,
                            "message": health["problem"],
                        }
                    )
                    return
            if time.monotonic() > deadline:
                yield TriggerEvent(
                    {
                        "status": "timeout",
                        "signal_id": self.signal_id,
                        "message": f"snapshot of signal {self.signal_id} not released after "
                        f"{self.timeout_seconds:.0f}s ({'not started: is the streamer running?' if snap is None else describe(snap)})",
                    }
                )
                return
            await asyncio.sleep(self.poll_seconds)


def describe(snap: dict[str, Any]) -> str:
    return ", ".join(
        f"{t['table']} {t.get('windows_done', 0)}/{t.get('windows_total') or '?'} windows"
        for t in snap.get("tables", [])
    )
