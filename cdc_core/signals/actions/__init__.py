"""Signals, as Debezium defines them: `{id, type, data}` from any channel, validated into
actions the snapshot coordinator can trust.

Every problem is a `SignalError` with the reason; the channel records the signal as
failed and streaming goes on. Formats (seeds 001, 002):

    execute-snapshot  {"data-collections": [regex, ...], "type": "incremental"|"blocking",
                       "additional-conditions": [{"data-collection": regex, "filter": text}],
                       (a document collection's filter may be a JSON query document,
                       as text or as an object: Debezium's MongoDB form)
                       "surrogate-key": column,
                       Tidemark's extensions: "tidemark.reader": "inprocess"|"spark",
                       "tidemark.release": "stream"|"lakehouse", "tidemark.chunk-size": n}
    stop-snapshot     {"data-collections": [regex, ...] (optional: all), "type": "incremental"}
    pause-snapshot    {} (or {"type": "incremental"})
    resume-snapshot   {}
    log               {"message": text}

Each signal type is a module of this package with an `ACTION` (`base.SignalAction`; or
`ACTIONS` for a few alike),
found by name when the package is imported; `parse_signal` validates a raw signal with
its type's action and `apply_signal` hands the result to it.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable
from typing import Any

from cdc_core.schema.model import TableId
from cdc_core.signals.actions.base import (
    MAX_COLLECTIONS,
    RawSignal,
    SignalAction,
    SignalError,
    SignalTarget,
    signal_data,
)
from cdc_core.signals.actions.execute_snapshot import EXTENSIONS, ExecuteSnapshot, TableCondition
from cdc_core.signals.actions.log import LogSignal
from cdc_core.signals.actions.pause_resume import PauseSnapshot, ResumeSnapshot
from cdc_core.signals.actions.stop_snapshot import StopSnapshot

__all__ = [
    "EXTENSIONS", "INTERNAL_TYPES", "MAX_COLLECTIONS", "WINDOW_CLOSE", "WINDOW_OPEN", "Action", "ExecuteSnapshot",
    "LogSignal", "PauseSnapshot", "RawSignal", "ResumeSnapshot", "SignalAction", "SignalError", "SignalTarget",
    "StopSnapshot", "TableCondition", "apply_signal", "matching_tables", "parse_signal", "registered",
]  # fmt: skip

Action = Any  # the action object of one of the registered signal types

# Rows the chunk readers write to the signal table as watermarks; not user signals.
WINDOW_OPEN = "snapshot-window-open"
WINDOW_CLOSE = "snapshot-window-close"
INTERNAL_TYPES = (WINDOW_OPEN, WINDOW_CLOSE)


def _discover() -> dict[str, SignalAction]:
    found: dict[str, SignalAction] = {}
    for module in pkgutil.iter_modules(__path__):
        loaded = importlib.import_module(f"{__name__}.{module.name}")
        for action in getattr(loaded, "ACTIONS", ()) or (getattr(loaded, "ACTION", None),):
            if action is not None:
                found[action.name] = action
    return dict(sorted(found.items()))


_BY_NAME = _discover()
_BY_TYPE = {a.action_type: a for a in _BY_NAME.values()}


def registered() -> list[str]:
    """The signal types this Tidemark acts on."""
    return list(_BY_NAME)


def parse_signal(raw: RawSignal) -> Action:
    name = (raw.type or "").strip().lower()
    if not name:
        raise SignalError(f"the signal has no type: set type to one of {', '.join(_BY_NAME)}")
    action = _BY_NAME.get(name)
    if action is None:
        raise SignalError(f"unknown signal type {raw.type!r}; known: {', '.join(_BY_NAME)}")
    return action.parse(raw.id, signal_data(raw.data))


def apply_signal(action: Action, target: SignalTarget, item: Any = None) -> None:
    """Hand a parsed signal to its action, which acts on `target`."""
    _BY_TYPE[type(action)].apply(action, target, item)


def matching_tables(
    patterns: Iterable[re.Pattern[str]],
    known: Iterable[TableId],
    captured: Any,
    existing: Callable[[], Iterable[TableId]] | None = None,
    excluded_by: Callable[[TableId], str] | None = None,
) -> tuple[list[TableId], list[str]]:
    """Tables the patterns name, and the reasons for any pattern that names nothing allowed.

    A pattern matching only tables outside the capture list is refused: a signal cannot
    make the connector read tables it was not configured to read. `known`: the tables the
    caller knows (the streamer knows only captured ones for some sources); `existing`,
    asked only when a pattern names none of them, lists the source's tables now, so the
    refusal says whether the table is missing or left out by the filters
    (`excluded_by`: which filter, for people)."""
    known = sorted(set(known))
    chosen: list[TableId] = []
    problems: list[str] = []
    listed: list[TableId] | None = None
    for pattern in patterns:
        hits = [t for t in known if pattern.fullmatch(str(t))]
        allowed = [t for t in hits if captured(t)]
        if not hits and existing is not None:
            if listed is None:
                listed = _listed(existing)
            hits = [t for t in listed if pattern.fullmatch(str(t))]
        if not hits:
            problems.append(f"{pattern.pattern!r} matches no known table")
        elif not allowed:
            outside = [t for t in hits if not captured(t)]
            if outside:
                problems.append(_outside(pattern, outside, excluded_by))
            else:  # captured, but not yet in the streamer's schemas
                names = ", ".join(map(str, hits[:5]))
                problems.append(
                    f"{pattern.pattern!r} matches {names}, which the streamer has not seen yet (created since "
                    f"it started, with no change captured): write to it or restart the streamer, then signal again"
                )
        chosen.extend(t for t in allowed if t not in chosen)
    return chosen, problems


def _listed(existing: Callable[[], Iterable[TableId]]) -> list[TableId]:
    try:
        return sorted(set(existing()))
    except Exception:  # the source away: the refusal keeps its shorter reason
        return []


def _outside(pattern: re.Pattern[str], tables: list[TableId], excluded_by: Any) -> str:
    shown = tables[:5]
    why = [f"{t}: {excluded_by(t)}" if excluded_by and excluded_by(t) else str(t) for t in shown]
    more = f" and {len(tables) - len(shown)} more" if len(tables) > len(shown) else ""
    filters = "database.include.list/exclude.list, table.include.list/exclude.list"
    return (
        f"{pattern.pattern!r} matches only tables outside the capture list: they exist, but the connector's "
        f"capture filters leave them out ({'; '.join(why)}{more}), and a snapshot reads captured tables only; "
        f"add them to the filters ({filters}; for MongoDB also collection.include.list/exclude.list) to "
        f"snapshot them"
    )
