"""Reading several merged tables as of one source position.

Every Delta commit of the merge records, in its user metadata, order keys (epoch, rank):
`upto` — every source transaction at or below it that the merge had seen is merged into
every table — and `first`/`last` — the lowest and highest transaction it merged into this
table. Batches never split a transaction, but one can merge a transaction while an older
one is still held back, so a table's versions do not always fall on a given position.

For position P, table version v is exact when every commit up to v merged only
transactions at or below P, and every later commit only transactions above P: then v
holds exactly the transactions at or below P. `common_versions` looks for the highest
recorded `upto` at which every table has such a version.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdc_core.errors import TidemarkError

Key = tuple[int, ...]


def merge_commits(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """The merge's commits of one table, oldest first: `version`, `upto`, `first`, `last`."""
    from delta.tables import DeltaTable

    out = []
    for row in DeltaTable.forPath(spark, path).history().select("version", "userMetadata").collect():
        try:
            meta = json.loads(row.userMetadata or "{}").get("tidemark") or {}
        except json.JSONDecodeError:
            meta = {}
        if meta.get("first") is not None:
            out.append({"version": row.version, **{k: _key(meta.get(k)) for k in ("upto", "first", "last")}})
    return sorted(out, key=lambda c: c["version"])


def _key(value: Any) -> Key | None:
    return tuple(value) if value is not None else None


def exact_version(commits: Sequence[dict[str, Any]], position: Key) -> int | None:
    """The version holding exactly the transactions at or below `position` (-1: before the
    table's first merge), or None when no version does."""
    for cut in range(len(commits), -1, -1):
        before, after = commits[:cut], commits[cut:]
        if all(c["last"] <= position for c in before) and all(c["first"] > position for c in after):
            return commits[cut - 1]["version"] if cut else -1
    return None


def common_versions(tables: dict[str, Sequence[dict[str, Any]]]) -> tuple[Key, dict[str, int]] | None:
    """The highest recorded position every table has an exact version for, and those
    versions; None when there is none."""
    candidates = sorted(
        {c["upto"] for commits in tables.values() for c in commits if c["upto"]}, reverse=True
    )
    for position in candidates:
        versions = {name: exact_version(commits, position) for name, commits in tables.items()}
        if all(v is not None for v in versions.values()):
            return position, versions  # type: ignore[return-value]
    return None


def read_at_common_position(
    spark: SparkSession, paths: Sequence[str]
) -> tuple[Key, dict[str, DataFrame | None]]:
    """Each table as of the same source position (None for a table not yet created by
    then); a clear error when the tables' histories share no exact position."""
    found = common_versions({p: merge_commits(spark, p) for p in paths})
    if found is None:
        raise TidemarkError(f"the tables {list(paths)} have no recorded source position in common")
    position, versions = found
    frames = {
        p: spark.read.format("delta").option("versionAsOf", v).load(p) if v >= 0 else None
        for p, v in versions.items()
    }
    return position, frames
