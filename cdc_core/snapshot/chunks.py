"""What the generic snapshot machinery needs from a source to read chunks.

A connector provides a `ChunkSource`; the coordinator (in-process) and the Spark job
(parallel) drive it. The database computes chunk boundaries in its own key order and
collation; Python never sorts keys. Identifiers come from the schema timeline and are
quoted by the connector; filters are `cdc_core.signals.conditions` trees, rendered by the
connector with bound parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableSchema
from cdc_core.signals.conditions import Condition

Key = tuple[Any, ...]


class SnapshotError(TidemarkError):
    """A snapshot request that cannot be carried out (no key, unknown column, ...)."""


@dataclass(frozen=True)
class ChunkPlan:
    """One table's chunk query parameters. `partition` is the part of a partitioned source
    the chunks are read from (a Vitess shard), None for a source with one log."""

    table: TableSchema
    key: tuple[str, ...]
    condition: Condition | None = None
    partition: str | None = None


class ChunkSource(Protocol):
    def partitions(self, table: TableSchema) -> tuple[str | None, ...]:
        """The parts a table is read from, each with a log of its own: `(None,)` for a
        source with one log; a sharded source's shards (Vitess), so each window reads one
        shard between watermarks written into that shard's log, and its released rows
        carry that log's order key (the only one comparable with its rows' other events)."""
        ...

    def next_boundary(self, plan: ChunkPlan, lo: Key | None, size: int) -> Key | None:
        """The key of the `size`-th row after `lo`, or None when fewer rows remain."""
        ...

    def boundaries(self, plan: ChunkPlan, size: int) -> list[Key]:
        """Every `size`-th key of the table, for parallel readers (`chained_boundaries`, or one
        pass where no index orders the key)."""
        ...

    def read_chunk(self, plan: ChunkPlan, lo: Key | None, hi: Key | None) -> list[tuple[Any, ...]]:
        """All columns (schema order) of the rows with key in `(lo, hi]`, in key order."""
        ...

    def write_watermark(
        self, kind: str, signal_id: str, data: dict[str, Any], partition: str | None = None
    ) -> None:
        """Insert and commit one watermark (or signal) row into the signal table, in
        `partition`'s log (None: the source's one log, or any partition for a signal)."""
        ...

    def delete_watermark(self, signal_id: str, partition: str | None = None) -> None:
        """Delete and commit the watermark row `signal_id` (a window's open row, which
        `incremental.snapshot.watermarking.strategy: insert_delete` deletes as the window's
        high watermark), in `partition`'s log as `write_watermark` wrote it."""
        ...

    def exact_key_order(self, plan: ChunkPlan) -> bool:
        """Whether Python compares this table's keys exactly as the database orders them."""
        ...

    def position_marker(self) -> str:
        """The source's log position now, for read-only watermarks."""
        ...

    def read_chunk_seeing(
        self, plan: ChunkPlan, lo: Key | None, hi: Key | None, position: Mapping[str, Any] | None
    ) -> list[tuple[Any, ...]]:
        """Read-only snapshots: `read_chunk`, once the database shows other sessions every
        transaction of the log up to `position` (an offset's source part, where the
        streamer stood as the window opened; None: nothing read yet). Only connectors with
        read-only snapshots (a `position_marker`) have it."""
        ...

    def close(self) -> None: ...


def snapshot_key(
    table: TableSchema, surrogate: str | None, key_override: Sequence[str] = ()
) -> tuple[str, ...]:
    """The columns that order a table's chunks: the surrogate key if given, else the
    configured message key, else the primary key; a table with none is refused."""
    if surrogate:
        column = table.column(surrogate)
        if column is None:
            raise SnapshotError(f"surrogate-key {surrogate!r} is not a column of {table.id}")
        return (column.name,)
    if key_override:
        return tuple(key_override)
    if table.primary_key:
        return tuple(table.primary_key)
    raise SnapshotError(
        f"{table.id} has no primary key: give a surrogate-key in the signal or message.key.columns for the table"
    )


def chained_boundaries(source: ChunkSource, plan: ChunkPlan, size: int) -> list[Key]:
    """Every `size`-th key as a chain of `next_boundary` queries, each walking `size`
    entries of the key's index from the boundary before: the database reads the index
    once in all and sends one key per window, where a single pass sends every key."""
    found: list[Key] = []
    while (bound := source.next_boundary(plan, found[-1] if found else None, size)) is not None:
        found.append(bound)
    return found
