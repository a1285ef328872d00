"""Merge settings: per table SCD type 2, partitioning, clustering, promoted document
fields; for every table the largest batch sent whole to the MERGE's tasks (broadcast)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc_core.connector import DocumentIds, DocumentPatches
from cdc_core.errors import TidemarkError
from spark_jobs.merge.promoted import Promoted
from spark_jobs.merge.table_pool import DEFAULT_PARALLEL_TABLES

# Without --broadcast-mb, a batch is broadcast in its MERGE when estimated at most this
# share of the memory of the JVMs that hold it (the driver builds it, every executor
# keeps a copy).
BROADCAST_SHARE = 8
_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def memory_mb(setting: str) -> float:
    """A Spark memory setting (`2g`, `512m`, `1024k`; a bare number is MiB) in MiB."""
    text = setting.strip().lower().removesuffix("b")
    if text and text[-1] in _UNITS:
        return float(text[:-1]) * _UNITS[text[-1]]
    return float(text)


def default_broadcast_mb(conf: Callable[[str, str], str], local: bool) -> int:
    """The broadcast limit for a session: an eighth of the driver's memory, and of an
    executor's unless the session is local (its executors are the driver)."""
    budget = memory_mb(conf("spark.driver.memory", "1g"))
    if not local:
        budget = min(budget, memory_mb(conf("spark.executor.memory", "1g")))
    return int(budget / BROADCAST_SHARE)


@dataclass(frozen=True)
class TableOptions:
    scd2: bool = False
    partition_by: tuple[str, ...] = ()
    cluster_by: tuple[str, ...] = ()
    broadcast_bytes: int = 0
    promoted: tuple[Promoted, ...] = ()


@dataclass(frozen=True)
class MergeOptions:
    """`scd2`: a regex over `db.table` names; `partition_by`/`cluster_by`: per table name;
    `broadcast_mb`: a table's batch estimated at most this size is broadcast in its MERGE
    (0: never; None: `default_broadcast_mb` of the session). Each task then holds the
    batch in memory, so this bounds the memory a merge adds per executor (and on the
    driver, which builds it). `promoted`: per collection, the document fields promoted to
    columns (`spark_jobs.merge.promoted`, from the connector's configuration).
    `parallel_tables`: how many of a batch's tables are MERGEd at once."""

    scd2: str | None = None
    partition_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    cluster_by: dict[str, tuple[str, ...]] = field(default_factory=dict)
    broadcast_mb: int | None = None
    promoted: dict[str, tuple[Promoted, ...]] = field(default_factory=dict)
    patches: DocumentPatches | None = None  # the source's change-only updates (`merge.patches`)
    document_ids: DocumentIds | None = None  # its record keys as `_id` (`merge.document_ids`)
    parallel_tables: int = DEFAULT_PARALLEL_TABLES  # tables MERGEd at once (`merge.table_pool`)
    key_columns: str | None = None  # the connector's `message.key.columns`: keyless events' key

    def for_table(self, name: str, session_broadcast_mb: int = 0) -> TableOptions:
        """`session_broadcast_mb`: the limit when `broadcast_mb` is None."""
        limit = session_broadcast_mb if self.broadcast_mb is None else self.broadcast_mb
        return TableOptions(
            bool(self.scd2 and re.fullmatch(self.scd2, name)),
            self.partition_by.get(name, ()),
            self.cluster_by.get(name, ()),
            limit * 1024 * 1024,
            self.promoted.get(name, ()),
        )

    @classmethod
    def from_args(
        cls,
        scd2: str | None,
        partition_by: Sequence[str] = (),
        cluster_by: Sequence[str] = (),
        broadcast_mb: int | None = None,
        parallel_tables: int = DEFAULT_PARALLEL_TABLES,
    ) -> MergeOptions:
        if scd2:
            try:
                re.compile(scd2)
            except re.error as exc:
                raise TidemarkError(f"--scd2 is not a regular expression: {exc}") from None
        if broadcast_mb is not None and broadcast_mb < 0:
            raise TidemarkError(f"--broadcast-mb must be 0 (never) or more, not {broadcast_mb}")
        if parallel_tables < 1:
            raise TidemarkError(f"--parallel-tables must be 1 or more, not {parallel_tables}")
        return cls(
            scd2,
            _per_table(partition_by, "--partition-by"),
            _per_table(cluster_by, "--cluster-by"),
            broadcast_mb,
            parallel_tables=parallel_tables,
        )


def _per_table(specs: Sequence[str], flag: str) -> dict[str, tuple[str, ...]]:
    """`db.table=col1,col2` specs."""
    out = {}
    for spec in specs:
        name, _, columns = spec.partition("=")
        cols = tuple(c.strip() for c in columns.split(",") if c.strip())
        if not name or not cols:
            raise TidemarkError(f"{flag} {spec!r}: expected db.table=column[,column...]")
        out[name.strip()] = cols
    return out


def session_broadcast_mb(spark: Any) -> int:
    """`default_broadcast_mb` for a running session."""
    master = spark.sparkContext.master
    return default_broadcast_mb(lambda k, d: spark.conf.get(k, d) or d, master.startswith("local"))
