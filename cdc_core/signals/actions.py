"""Signals, as Debezium defines them: `{id, type, data}` from any channel, validated into
actions the snapshot coordinator can trust.

Every problem is a `SignalError` with the reason; the channel records the signal as
failed and streaming goes on. Formats (seeds 001, 002):

    execute-snapshot  {"data-collections": [regex, ...], "type": "incremental"|"blocking",
                       "additional-conditions": [{"data-collection": regex, "filter": text}],
                       "surrogate-key": column,
                       Tidemark's extensions: "tidemark.reader": "inprocess"|"spark",
                       "tidemark.release": "stream"|"lakehouse", "tidemark.chunk-size": n}
    stop-snapshot     {"data-collections": [regex, ...] (optional: all), "type": "incremental"}
    pause-snapshot    {} (or {"type": "incremental"})
    resume-snapshot   {}
    log               {"message": text}
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId

MAX_COLLECTIONS = 1000
# Tidemark's own execute-snapshot fields (Debezium ignores what it does not know).
EXTENSIONS = ("tidemark.reader", "tidemark.release", "tidemark.chunk-size")


class SignalError(TidemarkError):
    """A signal that is malformed, unknown or not allowed; it is logged and recorded as failed."""


@dataclass(frozen=True)
class TableCondition:
    pattern: re.Pattern[str]
    filter: str


@dataclass(frozen=True)
class ExecuteSnapshot:
    id: str
    collections: tuple[re.Pattern[str], ...]
    snapshot_type: str = "incremental"
    conditions: tuple[TableCondition, ...] = ()
    surrogate_key: str | None = None
    reader: str = "inprocess"  # "inprocess" | "spark" (windows written by spark_jobs/incremental_snapshot.py)
    release: str = "stream"  # "stream": op=r events | "lakehouse": release records for the Delta merge
    chunk_size: int | None = None

    def condition_for(self, table: TableId) -> str | None:
        """The filter of the first condition whose data-collection matches the table."""
        for condition in self.conditions:
            if condition.pattern.fullmatch(str(table)):
                return condition.filter
        return None


@dataclass(frozen=True)
class StopSnapshot:
    id: str
    collections: tuple[re.Pattern[str], ...] = ()  # empty: the whole snapshot


@dataclass(frozen=True)
class PauseSnapshot:
    id: str


@dataclass(frozen=True)
class ResumeSnapshot:
    id: str


@dataclass(frozen=True)
class LogSignal:
    id: str
    message: str


Action = ExecuteSnapshot | StopSnapshot | PauseSnapshot | ResumeSnapshot | LogSignal

# Rows the chunk readers write to the signal table as watermarks; not user signals.
WINDOW_OPEN = "snapshot-window-open"
WINDOW_CLOSE = "snapshot-window-close"
INTERNAL_TYPES = (WINDOW_OPEN, WINDOW_CLOSE)


@dataclass(frozen=True)
class RawSignal:
    """A signal as read from a channel, before validation."""

    id: str
    type: str
    data: Any
    channel: str
    extra: dict[str, Any] = field(default_factory=dict)


def parse_signal(raw: RawSignal) -> Action:
    kind = (raw.type or "").strip().lower()
    data = _data(raw.data)
    if kind == "execute-snapshot":
        return _execute(raw.id, data)
    if kind == "stop-snapshot":
        snapshot_type = str(data.get("type", "")).lower()
        if snapshot_type != "incremental":
            raise SignalError(
                f"stop-snapshot needs data.type 'incremental' (got {data.get('type')!r}); only incremental "
                "snapshots can be stopped"
            )
        collections = data.get("data-collections") or []
        return StopSnapshot(raw.id, _patterns(collections, "data-collections"))
    if kind == "pause-snapshot":
        return PauseSnapshot(raw.id)
    if kind == "resume-snapshot":
        return ResumeSnapshot(raw.id)
    if kind == "log":
        message = data.get("message")
        if not isinstance(message, str) or not message:
            raise SignalError("a log signal needs data.message (a non-empty string)")
        return LogSignal(raw.id, message[:2048])
    raise SignalError(
        f"unknown signal type {raw.type!r}; known: execute-snapshot, stop-snapshot, pause-snapshot, "
        "resume-snapshot, log"
    )


def _data(data: Any) -> dict[str, Any]:
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


def _patterns(values: Any, name: str) -> tuple[re.Pattern[str], ...]:
    if isinstance(values, str):
        values = [v.strip() for v in values.split(",") if v.strip()]
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise SignalError(f"{name} must be an array of table-name regexes")
    if len(values) > MAX_COLLECTIONS:
        raise SignalError(f"{name} lists more than {MAX_COLLECTIONS} entries")
    patterns = []
    for value in values:
        try:
            patterns.append(re.compile(_unquote(value), re.IGNORECASE))
        except re.error as exc:
            raise SignalError(f"{name}: {value!r} is not a valid regex: {exc}") from None
    return tuple(patterns)


def _unquote(value: str) -> str:
    """`db."My.Table"` names a table with a dot in it (seed 001): match it literally."""
    parts = re.findall(r'"((?:[^"]|"")*)"|([^."]+)', value)
    if '"' not in value:
        return value
    return r"\.".join(re.escape(q.replace('""', '"')) if q else p for q, p in parts)


def _execute(signal_id: str, data: dict[str, Any]) -> ExecuteSnapshot:
    unknown = set(data) - {"data-collections", "type", "additional-conditions", "surrogate-key", *EXTENSIONS}
    if unknown:
        raise SignalError(f"execute-snapshot: unknown field(s) {sorted(unknown)}")
    reader = str(data.get("tidemark.reader", "inprocess"))
    if reader not in ("inprocess", "spark"):
        raise SignalError(f"tidemark.reader must be inprocess or spark, not {reader!r}")
    release = str(data.get("tidemark.release", "stream"))
    if release not in ("stream", "lakehouse"):
        raise SignalError(f"tidemark.release must be stream or lakehouse, not {release!r}")
    chunk_size = data.get("tidemark.chunk-size")
    if chunk_size is not None and (
        not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or not 1 <= chunk_size <= 1_000_000
    ):
        raise SignalError("tidemark.chunk-size must be an integer between 1 and 1000000")
    collections = data.get("data-collections")
    if not collections:
        raise SignalError("execute-snapshot needs data.data-collections (a non-empty array of regexes)")
    snapshot_type = str(data.get("type") or "incremental").lower()
    if snapshot_type not in ("incremental", "blocking"):
        raise SignalError(f"execute-snapshot: type must be incremental or blocking, not {data.get('type')!r}")
    conditions = []
    raw_conditions = data.get("additional-conditions") or []
    if not isinstance(raw_conditions, list):
        raise SignalError("additional-conditions must be an array of {data-collection, filter} objects")
    for entry in raw_conditions:
        if not isinstance(entry, dict) or set(entry) - {"data-collection", "filter"}:
            raise SignalError("each additional condition is an object with data-collection and filter only")
        collection, text = entry.get("data-collection"), entry.get("filter")
        if not isinstance(collection, str) or not isinstance(text, str) or not text.strip():
            raise SignalError("each additional condition needs a data-collection and a non-empty filter")
        (pattern,) = _patterns([collection], "additional-conditions.data-collection")
        conditions.append(TableCondition(pattern, text))
    surrogate = data.get("surrogate-key")
    if surrogate is not None and (not isinstance(surrogate, str) or not surrogate.strip()):
        raise SignalError("surrogate-key must be a column name")
    return ExecuteSnapshot(
        signal_id,
        _patterns(collections, "data-collections"),
        snapshot_type,
        tuple(conditions),
        surrogate.strip() if surrogate else None,
        reader,
        release,
        chunk_size,
    )


def matching_tables(
    patterns: Iterable[re.Pattern[str]], known: Iterable[TableId], captured: Any
) -> tuple[list[TableId], list[str]]:
    """Tables the patterns name, and the reasons for any pattern that names nothing allowed.

    A pattern matching only tables outside the capture list is refused: a signal cannot
    make the connector read tables it was not configured to read."""
    known = sorted(set(known))
    chosen: list[TableId] = []
    problems: list[str] = []
    for pattern in patterns:
        hits = [t for t in known if pattern.fullmatch(str(t))]
        allowed = [t for t in hits if captured(t)]
        if not hits:
            problems.append(f"{pattern.pattern!r} matches no known table")
        elif not allowed:
            problems.append(f"{pattern.pattern!r} matches only tables outside the capture list")
        chosen.extend(t for t in allowed if t not in chosen)
    return chosen, problems
