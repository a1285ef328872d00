"""Deferrable health check of a streamer: fires once the streamer reports running within
its lag bound, or with the reason when it does not within the timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from airflow.triggers.base import TriggerEvent

from tidemark_airflow.hooks import state
from tidemark_airflow.triggers.polling import SETTLE_SECONDS, StatePollingTrigger


class StreamerHealthTrigger(StatePollingTrigger):
    def __init__(
        self,
        config_file: str,
        max_lag_seconds: float,
        timeout_seconds: float,
        poll_seconds: float = 2.0,
        settle_seconds: float = SETTLE_SECONDS,
    ) -> None:
        super().__init__(
            config_file=config_file,
            max_lag_seconds=max_lag_seconds,
            timeout_seconds=timeout_seconds,
            poll_seconds=poll_seconds,
            settle_seconds=settle_seconds,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        started = time.monotonic()
        deadline = started + self.timeout_seconds
        while True:
            try:
                doc = await asyncio.to_thread(state.status_of_file, self.config_file)
                health = state.streamer_health(doc, self.max_lag_seconds)
            except Exception as exc:
                health = {"healthy": False, "problems": [f"cannot read the streamer's state: {exc}"]}
            if health["healthy"] or time.monotonic() > deadline:
                await self.settled(started)
                yield TriggerEvent(health)
                return
            await asyncio.sleep(self.poll_seconds)
