"""The form of a snapshot window's staged rows: the table's rows shaped by the column rules.

The Spark chunk job stages each window as Parquet, and in the lakehouse fast path the
Delta merge applies those files as they are. So they hold only what the window's `op=r`
events would carry: a column the rules drop is left out, and a column a truncation, mask
or hash applies to holds its event value with those rules applied (a string). In stream
mode every other column keeps the reader's value, and the streamer converts it when it
makes the events (`RowShaper` with `staged`); in lakehouse mode the chunk job stages it as
the merge would land its event, in the Delta type of its events' field (`mappings`; see
`spark_jobs/staged_types.py`).

Key columns (the message key and the snapshot's chunk key) stay as read in stream mode:
the streamer compares them with the keys the stream changed inside the window.
Rules are `ColumnRules`' own (`cdc_core/filters.py`); `spark_jobs/staged_rules.py` turns
the same rule objects into Spark expressions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import Any

import orjson

from cdc_core.errors import TidemarkError
from cdc_core.filters import ColumnRules, ValueRule
from cdc_core.schema.model import TableSchema
from cdc_core.source import ColumnMapping, TypeMapper


@dataclass(frozen=True)
class ShapedColumn:
    """A column staged as its event value with `rules` applied, in their order."""

    name: str
    mapping: ColumnMapping
    rules: tuple[ValueRule, ...]

    def shape(self, value: Any) -> Any:
        if value is None:
            return None
        value = self.mapping.convert(value)
        for rule in self.rules:
            value = rule.apply(value)
        return value


class StagedForm:
    """Which columns of `schema` are staged, in table order, and which hold shaped values.

    `digest` names the form (columns, rules, event types): the window-close watermark
    carries it, and the streamer releases a window only if its own form for the table is
    the same, so rows staged under other rules are read again rather than released."""

    def __init__(
        self, schema: TableSchema, rules: ColumnRules, types: TypeMapper, snapshot_key: Sequence[str]
    ) -> None:
        self.schema = schema
        message_key = set(rules.key_for(schema))
        keys = message_key | set(snapshot_key)
        columns: list[str] = []
        shaped: dict[str, ShapedColumn] = {}
        mappings: dict[str, ColumnMapping] = {}
        positions: list[int] = []
        # Key columns staged as read although the events drop or change them.
        self.raw_but_shaped: list[str] = []
        for position, column in enumerate(schema.columns):
            in_events = rules.keeps(schema.id, column.name) or column.name in message_key
            if not in_events and column.name not in keys:
                continue
            columns.append(column.name)
            positions.append(position)
            mapping = mappings[column.name] = types.map_column(column)
            applying = tuple(rules.value_rules(schema.id, column.name, mapping))
            if column.name in keys:
                if applying or not in_events:
                    self.raw_but_shaped.append(column.name)
            elif applying:
                shaped[column.name] = ShapedColumn(column.name, mapping, applying)
        self.columns = tuple(columns)
        self.shaped = shaped
        self.mappings = mappings  # each staged column's type mapping (its events' field)
        self._index = {name: i for i, name in enumerate(columns)}
        self._plan = [
            (p, shaped[c].shape if c in shaped else None) for p, c in zip(positions, columns, strict=True)
        ]
        described = [
            [c.name, c.mapping.schema, [[type(r).__name__, *astuple(r)] for r in c.rules]]
            for c in shaped.values()
        ]
        text = orjson.dumps([columns, described, types.staged_digest(schema.id)], option=orjson.OPT_SORT_KEYS)
        self.digest = hashlib.sha256(text).hexdigest()[:16]

    def position(self, column: str) -> int:
        return self._index[column]

    def positions(self, columns: Sequence[str]) -> tuple[int, ...]:
        return tuple(self._index[c] for c in columns)

    def shape(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """A row of the table (its columns in order, as read) in staged form."""
        return tuple(row[p] if f is None else f(row[p]) for p, f in self._plan)

    def check_mergeable(self) -> None:
        """Lakehouse releases are merged as staged: refuse a key column the rules would
        drop or change in the events, which the staged rows must keep as read."""
        if self.raw_but_shaped:
            raise TidemarkError(
                f"{self.schema.id}: key column(s) {', '.join(self.raw_but_shaped)} are excluded, masked, "
                "hashed or truncated by the column rules; a lakehouse release merges the staged rows, "
                'whose keys stay as read: use "tidemark.release": "stream" or another key'
            )
