"""What every signal action shares: the raw signal, its error, the data parsing helpers
and the two protocols an action module implements (`SignalAction`) and acts on
(`SignalTarget`, the snapshot stage)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from cdc_core.errors import TidemarkError

MAX_COLLECTIONS = 1000


class SignalError(TidemarkError):
    """A signal that is malformed, unknown or not allowed; it is logged and recorded as failed."""


@dataclass(frozen=True)
class RawSignal:
    """A signal as read from a channel, before validation."""

    id: str
    type: str
    data: Any
    channel: str
    extra: dict[str, Any] = field(default_factory=dict)


class SignalTarget(Protocol):
    """What an action may do to the snapshot stage it arrives at."""

    def execute_snapshot(self, action: Any, item: Any) -> None: ...

    def stop_snapshot(self, action: Any) -> None: ...

    def set_paused(self, paused: bool) -> None: ...


class SignalAction(Protocol):
    """One signal type (Debezium's `signal/actions/`): a module of this package with an
    `ACTION` object (or `ACTIONS`). Adding a signal is adding a module."""

    name: str  # the signal's `type`, e.g. "execute-snapshot"
    action_type: type  # the validated action `parse` returns

    def parse(self, signal_id: str, data: dict[str, Any]) -> Any:
        """The validated action, or a SignalError saying what is wrong."""
        ...

    def apply(self, action: Any, target: SignalTarget, item: Any) -> None:
        """Act on the stage; `item` is the signal-table row change that carried it, if any."""
        ...


def signal_data(data: Any) -> dict[str, Any]:
    if data is None or data == "":
        return {}
    if isinstance(data, (str, bytes)):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SignalError(f"signal data is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SignalError(f"signal data must be a JSON object, not {type(data).__name__}")
    return data


def table_patterns(values: Any, name: str) -> tuple[re.Pattern[str], ...]:
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise SignalError(f"{name} must be an array of table-name regexes")
    if not values:  # "", ",", []: a malformed field; stop-snapshot stops everything only without one
        raise SignalError(f"{name} names no table")
    if len(values) > MAX_COLLECTIONS:
        raise SignalError(f"{name} lists more than {MAX_COLLECTIONS} entries")
    patterns = []
    for value in values:
        try:
            patterns.append(re.compile(unquote_table(value), re.IGNORECASE))
        except (re.error, OverflowError, RecursionError) as exc:  # `a{99999999999}`, `((((...`
            raise SignalError(f"{name}: {value[:200]!r} is not a valid regex: {exc}") from None
    return tuple(patterns)


def unquote_table(value: str) -> str:
    """`db."My.Table"` names a table with a dot in it (seed 001): match it literally."""
    parts = re.findall(r'"((?:[^"]|"")*)"|([^."]+)', value)
    if '"' not in value:
        return value
    return r"\.".join(re.escape(q.replace('""', '"')) if q else p for q, p in parts)
