"""Where the project's Spark-side JVM artifacts are, without importing pyspark.

The jars (Delta Lake, Spark's Kafka source, the MariaDB JDBC driver) are fetched from
Maven Central by `make install` (jvm/pom.xml, profile `spark`). Both an in-process
SparkSession and a `spark-submit` (e.g. Airflow's SparkSubmitOperator) use this list,
so nothing is ever downloaded when a job starts.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Every local Spark file (scratch, warehouse, Derby) lives under here.
SPARK_SCRATCH = PROJECT_ROOT / ".local" / "spark"


class MissingJarsError(RuntimeError):
    """The Spark jars folder is empty or missing."""


def spark_jars_dir() -> Path:
    return Path(os.environ.get("TIDEMARK_SPARK_JARS_DIR", PROJECT_ROOT / ".jars" / "spark"))


def spark_jars() -> list[str]:
    """Absolute paths of every jar Spark needs beyond pyspark's own, sorted."""
    folder = spark_jars_dir()
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not any("delta-spark" in Path(j).name for j in jars):
        raise MissingJarsError(
            f"Delta Lake jars not found in {folder}: run `make install` "
            "(or set TIDEMARK_SPARK_JARS_DIR to a folder holding them)"
        )
    return jars


def spark_jars_csv() -> str:
    """The jar list in the comma-separated form of `--jars` and `spark.jars`."""
    return ",".join(spark_jars())
