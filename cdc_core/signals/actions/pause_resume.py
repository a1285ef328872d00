"""`pause-snapshot` and `resume-snapshot`: the running incremental snapshot waits (streaming
goes on) or goes on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_core.signals.actions.base import SignalTarget


@dataclass(frozen=True)
class PauseSnapshot:
    id: str


@dataclass(frozen=True)
class ResumeSnapshot:
    id: str


class _SetPaused:
    def __init__(self, name: str, action_type: type, paused: bool) -> None:
        self.name, self.action_type, self.paused = name, action_type, paused

    def parse(self, signal_id: str, data: dict[str, Any]) -> Any:
        return self.action_type(signal_id)

    def apply(self, action: Any, target: SignalTarget, item: Any) -> None:
        target.set_paused(self.paused)


ACTIONS = (
    _SetPaused("pause-snapshot", PauseSnapshot, True),
    _SetPaused("resume-snapshot", ResumeSnapshot, False),
)
