"""What Tidemark's triggers share: they poll the connector's state files, are serialised as
their constructor arguments, and never fire within their first `SETTLE_SECONDS`.

Why the settling time: Airflow 3.3's scheduler fails a deferred task whose trigger fires
before it has processed the executor's "success" event of the worker that deferred it
(the resumed task is queued by then, and the stale event reads as a state mismatch:
apache/airflow#67287, #71580, #72716). Seen after a clean `make demo`: a streamer health
check whose trigger fired two seconds after deferral ended `failed`, with nothing in its
log. The deferring worker's event arrives within a few seconds, so a trigger that waits
longer never meets the race. So a deferral costs at least that long: the sensors watch
the condition in the worker for `INLINE_SECONDS` before they defer (`watch_inline`), and
a condition that holds by then (a small snapshot released just after its chunk job, a
streamer that reports within seconds) costs no deferral and no settling time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

from airflow.triggers.base import BaseTrigger

SETTLE_SECONDS = 15.0
# A sensor's wait in its worker before it defers: about what a deferral costs at least.
INLINE_SECONDS = SETTLE_SECONDS + 5
T = TypeVar("T")


def watch_inline(
    check: Callable[[], T | None], seconds: float = INLINE_SECONDS, poll: float = 1.0
) -> T | None:
    """`check()`'s first result that is not None, polled for up to `seconds`; None after."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result is not None or time.monotonic() >= deadline:
            return result
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))


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
