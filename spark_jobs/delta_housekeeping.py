"""Housekeeping of the merged Delta tables: tombstones past their retention, OPTIMIZE, VACUUM.

    spark-submit spark_jobs/delta_housekeeping.py --delta-root PATH_OR_S3A \\
        [--tombstone-retention-hours 168] [--vacuum-retention-hours 168] [--tables REGEX]

Tombstones stop late, older events from bringing a deleted row back; once no event can
arrive that late, they only cost space. A merge running meanwhile is safe: Delta's
optimistic concurrency fails a conflicting commit, and a merge that is run again after a
failure changes nothing it already applied.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from typing import Any

from pyspark.sql import SparkSession

from spark_jobs.hadoop_files import subfolders
from spark_jobs.merge.delta_apply import collect_tombstones, table_exists

log = logging.getLogger("spark_jobs.delta_housekeeping")


def delta_tables(spark: SparkSession, root: str, pattern: str = ".*") -> list[str]:
    """The Delta tables directly under `root`."""
    wanted = re.compile(pattern)
    paths = [f"{root.rstrip('/')}/{n}" for n in subfolders(spark, root) if wanted.fullmatch(n)]
    return [p for p in paths if table_exists(spark, p)]


def housekeep(
    spark: SparkSession, path: str, tombstone_hours: float, vacuum_hours: float, optimize: bool = True
) -> dict[str, Any]:
    from delta.tables import DeltaTable

    collected = collect_tombstones(spark, path, tombstone_hours)
    table = DeltaTable.forPath(spark, path)
    if optimize:
        table.optimize().executeCompaction()
    if vacuum_hours < 168:  # Delta refuses a shorter retention unless told it was meant
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    table.vacuum(vacuum_hours)
    return {"table": path, "tombstones_collected": collected}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delta-root", required=True)
    parser.add_argument("--tables", default=".*", help="regex over the table folder names (db.table)")
    parser.add_argument("--tombstone-retention-hours", type=float, default=168.0)
    parser.add_argument("--vacuum-retention-hours", type=float, default=168.0)
    parser.add_argument("--no-optimize", action="store_true")
    parser.add_argument("--master")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    spark = build_session("tidemark-delta-housekeeping", args.master)
    for path in delta_tables(spark, args.delta_root, args.tables):
        summary = housekeep(
            spark, path, args.tombstone_retention_hours, args.vacuum_retention_hours, not args.no_optimize
        )
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sys.exit(main())
