"""What Tidemark's triggers share: they poll the connector's state files, are serialised as
their constructor arguments, and never fire within their first `SETTLE_SECONDS`.

Why the settling time: Airflow 3.3's scheduler fails a deferred task whose trigger fires
before it has processed the executor's "success" event of the worker that deferred it
(the resumed task is queued by then, and the stale event reads as a state mismatch:
apache/airflow#67287, #71580, #72716). Seen after a clean `make demo`: a streamer health
check whose trigger fired two seconds after deferral ended `failed`, with nothing in its
log. The deferring worker's event arrives within a few seconds, so a trigger that waits
longer never meets the race. The sensors check once before deferring, so a condition
that already holds costs no deferral and no wait at all."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.triggers.base import BaseTrigger

SETTLE_SECONDS = 15.0


class StatePollingTrigger(BaseTrigger):
    """A trigger whose constructor takes only keyword arguments, kept as `self.kwargs`
    (and readable as attributes) and handed back by `serialize`, so the triggerer rebuilds
    it exactly."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs

    def __getattr__(self, name: str) -> Any:
        kwargs = self.__dict__.get("kwargs", {})
        if name in kwargs:
            return kwargs[name]
        raise AttributeError(name)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", dict(self.kwargs)

    async def settled(self, started: float) -> None:
        """Wait until the trigger has run `settle_seconds` (see the module's docstring)."""
        remaining = started + self.kwargs.get("settle_seconds", SETTLE_SECONDS) - time.monotonic()
        if remaining > 0:
            await asyncio.sleep(remaining)
