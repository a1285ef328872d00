"""Row count and an order-independent checksum of a Delta table, written as JSON.

The demo and the end-to-end tests compare a source table with its Delta copy; a count
plus a checksum that does not depend on row order or file layout makes that comparison
one line. Bookkeeping columns (prefix `_cdc_`) are left out so the checksum describes the
user's data only.

    spark-submit --jars ... spark_jobs/table_checksum.py --delta PATH [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.sql_names import column

BOOKKEEPING_PREFIX = "_cdc_"


def table_checksum(df: DataFrame) -> dict[str, int]:
    """`rows` and `checksum`: the sum of a 64-bit hash of each row's canonical JSON.

    Columns are taken in name order and rendered with `to_json`, so two tables with the
    same rows and column types agree whatever their column order or partitioning.
    """
    columns = sorted(c for c in df.columns if not c.startswith(BOOKKEEPING_PREFIX))
    row_json = F.to_json(F.struct(*[column(c) for c in columns]))
    result = df.agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum(F.xxhash64(row_json).cast("decimal(38,0)")), F.lit(0)).alias("checksum"),
    ).first()
    return {"rows": int(result["rows"]), "checksum": int(result["checksum"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delta", required=True, help="path or URI of the Delta table")
    parser.add_argument("--out", help="write the JSON result here (default: stdout)")
    args = parser.parse_args(argv)

    from spark_jobs.session import build_session

    spark = build_session("tidemark-table-checksum")
    result = {"table": args.delta, **table_checksum(spark.read.format("delta").load(args.delta))}
    text = json.dumps(result, sort_keys=True)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
