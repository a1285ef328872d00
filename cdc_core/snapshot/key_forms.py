"""Chunk keys in one canonical form, from any row image.

The snapshot stage meets a table's key values in three places: the log's row images, the
chunk reader's staged rows (Python values from a database driver, or read back from a
Parquet file Spark wrote) and the window bounds in the watermark rows. A source's readers
give one stored value in different Python forms (see the MySQL connector's
`key_values.py`), so every key is passed through the connector's `key_value` before it is
compared, recorded, persisted or released.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cdc_core.schema.model import Column, TableSchema

KeyValue = Callable[[Any], Any]
KeyOf = Callable[[Sequence[Any]], tuple[Any, ...]]


class KeyForms:
    """`key_of(schema, key_columns, columns)`: a function from a row (its values in
    `columns` order, the schema's own columns by default) to its canonical key; None
    when a key column is not among them."""

    def __init__(self, key_value: Callable[[Column], KeyValue]) -> None:
        self.key_value = key_value
        self._cache: dict[
            tuple[int, tuple[str, ...], tuple[str, ...] | None], tuple[TableSchema, KeyOf | None]
        ] = {}

    def key_of(
        self, schema: TableSchema, key_columns: tuple[str, ...], columns: Sequence[str] | None = None
    ) -> KeyOf | None:
        names = tuple(columns) if columns is not None else None
        cache_key = (id(schema), key_columns, names)
        cached = self._cache.get(cache_key)
        if cached is not None and cached[0] is schema:
            return cached[1]
        built = self._build(schema, key_columns, names)
        self._cache[cache_key] = (schema, built)
        return built

    def canonical(
        self, schema: TableSchema, key_columns: tuple[str, ...], key: tuple[Any, ...] | None
    ) -> Any:
        """A key already cut to `key_columns` (a window bound) in the canonical form."""
        if key is None:
            return None
        convert = self._converters(schema, key_columns)
        if convert is None:
            return key
        return tuple(f(v) for f, v in zip(convert, key, strict=True))

    def _converters(self, schema: TableSchema, key_columns: tuple[str, ...]) -> list[KeyValue] | None:
        converters = []
        for name in key_columns:
            column = schema.column(name)
            if column is None:
                return None
            converters.append(self.key_value(column))
        return converters

    def _build(
        self, schema: TableSchema, key_columns: tuple[str, ...], names: tuple[str, ...] | None
    ) -> KeyOf | None:
        order = names if names is not None else schema.column_names
        index = {name: i for i, name in enumerate(order)}
        if not key_columns or any(k not in index for k in key_columns):
            return None
        positions = tuple(index[k] for k in key_columns)
        converters = self._converters(schema, key_columns)
        if converters is None:
            return None
        plan = tuple(zip(positions, converters, strict=True))
        if len(plan) == 1:
            ((p, f),) = plan
            return lambda row: (f(row[p]),)
        return lambda row: tuple(f(row[p]) for p, f in plan)
