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
from tidemark_airflow.triggers.polling import SETTLE_SECONDS, StatePollingTrigger


class SnapshotReleasedTrigger(StatePollingTrigger):
    def __init__(
        self,
        config_file: str,
        signal_id: str,
        timeout_seconds: float,
        poll_seconds: float = 2.0,
        stall_seconds: float = DEFAULT_STALL_SECONDS,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        super().__init__(
            config_file=config_file,
            signal_id=signal_id,
            timeout_seconds=timeout_seconds,
            poll_seconds=poll_seconds,
            stall_seconds=stall_seconds,
            settle_seconds=settle_seconds,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        started = time.monotonic()
        deadline = started + self.timeout_seconds
        last: dict[str, Any] | None = None
        while True:
            try:
                doc = await asyncio.to_thread(state.status_of_file, self.config_file)
            except (
                Exception
            ) as exc:  # a state the trigger cannot read is the task's failure, not the triggerer's
                event = {"status": "error", "message": str(exc)}
            else:
                where, snap = state.snapshot_progress(doc, self.signal_id)
                if snap is not None and snap != last and where != "finished":
                    self.log.info("snapshot %s: %s", self.signal_id, describe(snap))
                    last = snap
                event = self._outcome(doc, where, snap, time.monotonic() > deadline)
            if event is not None:
                await self.settled(started)
                yield TriggerEvent({"signal_id": self.signal_id, **event})
                return
            await asyncio.sleep(self.poll_seconds)

    def _outcome(
        self, doc: dict[str, Any], where: str, snap: dict[str, Any] | None, past_deadline: bool
    ) -> dict[str, Any] | None:
        """The event to fire for this state of the connector, or None to wait on."""
        if where == "finished":
            return {"status": "released", "snapshot": snap}
        if where == "refused":
            assert snap is not None
            return {"status": "refused", "message": state.refusal_message(self.signal_id, snap)}
        if snap is not None:
            live = live_entry((doc.get("streamer") or {}).get("snapshots"), snap)
            health = snapshot_health(snap, live, self.stall_seconds)
            if health["state"] == "stalled":
                return {"status": "stalled", "snapshot": snap, "message": health["problem"]}
        if past_deadline:
            progress = "not started: is the streamer running?" if snap is None else describe(snap)
            return {
                "status": "timeout",
                "message": f"snapshot of signal {self.signal_id} not released after "
                f"{self.timeout_seconds:.0f}s ({progress})",
            }
        return None


def describe(snap: dict[str, Any]) -> str:
    return ", ".join(
        f"{t['table']} {t.get('windows_done', 0)}/{t.get('windows_total') or '?'} windows"
        for t in snap.get("tables", [])
    )
