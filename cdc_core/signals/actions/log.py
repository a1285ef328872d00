"""`log`: write the signal's message to the streamer's log (a marker an operator can
find there, e.g. before a maintenance step)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cdc_core.signals.actions.base import SignalError, SignalTarget

log = logging.getLogger("tidemark.snapshot")


@dataclass(frozen=True)
class LogSignal:
    id: str
    message: str


class _Log:
    name = "log"
    action_type = LogSignal

    def parse(self, signal_id: str, data: dict[str, Any]) -> LogSignal:
        message = data.get("message")
        if not isinstance(message, str) or not message:
            raise SignalError("a log signal needs data.message (a non-empty string)")
        return LogSignal(signal_id, message[:2048])

    def apply(self, action: LogSignal, target: SignalTarget, item: Any) -> None:
        log.info("signal %s: %s", action.id, action.message)


ACTION = _Log()
