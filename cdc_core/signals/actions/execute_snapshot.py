"""`execute-snapshot`: start an incremental (or blocking) snapshot of the tables the
data-collections name, with optional filters, surrogate key and Tidemark's extensions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from cdc_core.schema.model import TableId
from cdc_core.signals.actions.base import SignalError, SignalTarget, table_patterns

# Tidemark's own execute-snapshot fields (Debezium ignores what it does not know).
EXTENSIONS = ("tidemark.reader", "tidemark.release", "tidemark.chunk-size")


@dataclass(frozen=True)
class TableCondition:
    pattern: re.Pattern[str]
    filter: str  # the grammar's text, or a JSON query document's (`cdc_core.signals.conditions`)


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

    def unmatched_conditions(self, tables: Iterable[TableId]) -> list[str]:
        """A problem for each condition naming none of `tables`: a misspelt data-collection
        would leave its filter unused and its table read whole."""
        names = [str(t) for t in tables]
        return [
            f"additional-conditions data-collection {c.pattern.pattern!r} matches none of the tables to "
            f"snapshot ({', '.join(names) or 'none'}): its filter would apply to nothing"
            for c in self.conditions
            if not any(c.pattern.fullmatch(name) for name in names)
        ]

    def condition_for(self, table: TableId) -> str | None:
        """The filter of the first condition whose data-collection matches the table."""
        for condition in self.conditions:
            if condition.pattern.fullmatch(str(table)):
                return condition.filter
        return None


def parse_execute(signal_id: str, data: dict[str, Any]) -> ExecuteSnapshot:
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
        if isinstance(text, dict):  # Debezium's MongoDB form as an object: kept as its JSON text
            text = orjson.dumps(text).decode()
        if not isinstance(collection, str) or not isinstance(text, str) or not text.strip():
            raise SignalError(
                "each additional condition needs a data-collection and a non-empty filter (text in the filter "
                "grammar, or for a document collection a JSON query document)"
            )
        (pattern,) = table_patterns([collection], "additional-conditions.data-collection")
        conditions.append(TableCondition(pattern, text))
    surrogate = data.get("surrogate-key")
    if surrogate is not None and (not isinstance(surrogate, str) or not surrogate.strip()):
        raise SignalError("surrogate-key must be a column name")
    return ExecuteSnapshot(
        signal_id,
        table_patterns(collections, "data-collections"),
        snapshot_type,
        tuple(conditions),
        surrogate.strip() if surrogate else None,
        reader,
        release,
        chunk_size,
    )


class _Execute:
    name = "execute-snapshot"
    action_type = ExecuteSnapshot

    def parse(self, signal_id: str, data: dict[str, Any]) -> ExecuteSnapshot:
        return parse_execute(signal_id, data)

    def apply(self, action: ExecuteSnapshot, target: SignalTarget, item: Any) -> None:
        target.execute_snapshot(action, item)


ACTION = _Execute()
