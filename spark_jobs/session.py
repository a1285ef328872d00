"""One way to build a SparkSession with Delta Lake and the project's local jars.

Used by every job and test so the Delta extension, catalog and classpath are set in one
place. Under `spark-submit` the JVM already exists; the submitter must pass the same jars
with `--jars` (see `spark_jobs.classpath.spark_jars_csv`), and `getOrCreate` reuses the
submitted context.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from cdc_core.errors import TidemarkError
from spark_jobs.classpath import SPARK_SCRATCH, spark_jars_csv
from spark_jobs.connect_server import DEFAULT_PORT
from spark_jobs.driver_jvm import driver_java_options

DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# PySpark records the Python call site of every DataFrame and Column call, for the
# "== DataFrame ==" part of its error messages, at 10 to 20 round trips to the JVM per
# call. A merge batch builds its plans from thousands of such calls: at 1,000,000 events
# the batch spent 0.5 s less outside Spark's jobs without it (README: "Changed on
# 2026-12-07"). The merge's own errors name what is wrong; PySpark reads this once per
# process, with the first session.
DRIVER_CONF = {"spark.python.sql.dataFrameDebugging.enabled": "false"}


def local_defaults() -> dict[str, str]:
    """Settings that suit a small machine and keep every Spark file under `.local/`."""
    scratch = SPARK_SCRATCH
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": os.environ.get("TIDEMARK_SPARK_UI", "false"),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": os.environ.get("TIDEMARK_SPARK_SHUFFLE_PARTITIONS", "4"),
        # Delta rebuilds a table's state from its log in this many tasks (Delta's default:
        # 50). For the logs of a CDC table on a small machine, 50 tasks made every read of
        # a table's state cost seconds: a MERGE into a small table took 3.5 s, with 4 it
        # takes 1.4 s (reading one back: 3.1 s and 0.9 s).
        "spark.databricks.delta.snapshotPartitions": os.environ.get(
            "TIDEMARK_DELTA_SNAPSHOT_PARTITIONS", "4"
        ),
        # VACUUM lists and deletes a table's files in this many tasks (Spark's default:
        # 10,000). On local[2], a VACUUM of a two-file table took 35-56 s; with 4, 5-10 s.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": os.environ.get(
            "TIDEMARK_SPARK_LISTING_PARALLELISM", "4"
        ),
        # Spark keeps the classes it generates for a query's code in a cache of 100 by
        # default. One merge batch generates more than that (the parse, census, alignment
        # and Delta's MERGE, log reads and checkpoints), so every batch of a long-running
        # merge compiled its code again and the JVM warmed the new classes up from
        # scratch. Kept, a warm batch compiles nothing. A static setting: read at start-up.
        "spark.sql.codegen.cache.maxEntries": os.environ.get("TIDEMARK_SPARK_CODEGEN_CACHE", "2000"),
        # Spark plans a rank = 1 filter (`changes.newest_per_key`) with a partial top-1 per
        # key before the shuffle, which sorts the batch a second time. A batch of changes
        # holds few events per key, so that sort costs more than the rows it drops.
        "spark.sql.optimizer.windowGroupLimitThreshold": "-1",
        "spark.driver.memory": os.environ.get("TIDEMARK_SPARK_DRIVER_MEMORY", "2g"),
        "spark.local.dir": str(scratch / "tmp"),
        "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        "spark.driver.extraJavaOptions": driver_java_options(),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.sql.session.timeZone": "UTC",
    }


def build_session(
    app_name: str,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A Delta-enabled session; `master` defaults to `local[*]` unless spark-submit set one."""
    builder = SparkSession.builder.appName(app_name)
    settings = {
        **local_defaults(),
        **DELTA_CONF,
        **DRIVER_CONF,
        "spark.jars": spark_jars_csv(),
        **(conf or {}),
    }
    if master:
        builder = builder.master(master)
    elif "SPARK_MASTER" in os.environ:
        builder = builder.master(os.environ["SPARK_MASTER"])
    elif not _submitted():
        builder = builder.master("local[*]")
    if (master or os.environ.get("SPARK_MASTER", "local")).startswith("local") and not _submitted():
        # Python workers of a local session run the driver's interpreter (the project's
        # virtualenv), not whatever `python3` is first on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("TIDEMARK_SPARK_LOG_LEVEL", "WARN"))
    return session


def remote_session(url: str) -> SparkSession:
    """A session on a running Spark Connect server (`spark_jobs.connect_server`): no JVM
    starts in this process. The server is reached first, since the client retries an
    unreachable one for minutes before it fails. The URL may carry a token, so only its
    host and port are ever shown."""
    import socket

    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        raise TidemarkError(
            f"no Spark Connect server at {host}:{port} ({exc.strerror or exc}); start one with "
            "`python -m spark_jobs.connect_server` (locally: `python -m scripts.services up spark-connect`)"
        ) from None
    session = SparkSession.builder.remote(url).getOrCreate()
    session.conf.set("spark.sql.session.timeZone", "UTC")
    return session


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL, `sc://HOST[:PORT][/;param=value...]`."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "sc" or not parts.hostname:
        raise TidemarkError("a Spark Connect URL looks like sc://HOST:PORT")
    return parts.hostname, parts.port or DEFAULT_PORT


def _submitted() -> bool:
    """True inside a driver started by spark-submit (it passes the master to the JVM)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ or os.environ.get("SPARK_ENV_LOADED") == "1"


@contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """`settings` on the session for the block; its own values (or none) come back after."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def empty_frame(spark: SparkSession, schema: str) -> DataFrame:
    """A frame of no rows that Spark's optimizer knows is empty (it becomes an empty local
    relation, where `createDataFrame([], ...)` is an RDD it must run): a plan over it, a
    union with it, or a sample of it costs no Spark job."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = T.DataType.fromDDL(schema)
    assert isinstance(fields, T.StructType), schema
    columns = [F.lit(None).cast(f.dataType).alias(f.name) for f in fields.fields]
    return spark.range(1).select(*columns).where(F.lit(False))
