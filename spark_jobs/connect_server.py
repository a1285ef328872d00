"""A Spark Connect server that outlives the jobs sent to it.

    python -m spark_jobs.connect_server [--port 15002] [--master local[2]]

A chunk job started with `spark-submit` pays a driver JVM's start (seconds even with the
class archive) and its executors' Python workers importing the project before its first
window; a job that attaches to a running Spark Connect server (`--remote sc://HOST:PORT`)
pays no JVM start: the server's JVM and its Delta settings serve one job after another
(each job's Python workers are new processes, started for its client session). The
server is Spark's own (`SparkConnectServer`, shipped in pyspark's jars) started by
spark-submit with the project's jars and the same driver settings as an in-process
session. Its Python workers run this interpreter with the project on their path, and
read a connector's password from the server's environment, not the client's. Started
through the `spark-connect` service it runs the warm-up job before it is handed over;
started with this command, run `python -m spark_jobs.connect_server --warm-up URL` once
it listens (a process of its own: a Python process that has opened a Spark Connect
session cannot open a Spark of its own afterwards).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from spark_jobs.classpath import PROJECT_ROOT, spark_jars_csv
from spark_jobs.driver_jvm import spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark's own, which its client assumes when a URL names none
# A remote session's URL; a job given none starts its own Spark.
REMOTE_ENV = "TIDEMARK_SPARK_REMOTE"


def server_settings(port: int) -> dict[str, str]:
    """The server's Spark settings: an in-process session's (Delta, UTC, scratch under
    `.local/`, the driver's class archive) plus where it listens (loopback only)."""
    from spark_jobs.session import DELTA_CONF, local_defaults

    return {
        **local_defaults(),
        **DELTA_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }


def server_command(port: int = DEFAULT_PORT, master: str = "local[2]") -> list[str]:
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--class", SERVER_CLASS]
    command += ["--name", "tidemark-spark-connect", "--jars", spark_jars_csv()]
    for key, value in server_settings(port).items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]  # spark-submit's name for "no application jar"


def server_env() -> dict[str, str]:
    """Python workers of the server run this interpreter (the project's virtualenv) with
    the project importable: a job's functions are pickled by reference to its modules."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT_ROOT), path) if p),
    }


def warm_up(url: str, tasks: int = 8) -> list[str]:
    """Run one small Python job on a server that has just started, so that the first chunk
    job sent to it does not pay for the code paths no job has taken yet (the plan's
    conversion, Arrow's hand-over to Python, the Python workers' daemon): on local[2], a
    first job's executor code ran 5.8-6.4 s after its action on a cold server and 2.4-2.6
    s after this warm-up, which itself took 6.8-7.1 s (2026-11-30). Each task imports the
    chunk job's executor code, as a job's would. Returns what each task imported."""
    from pyspark.sql import SparkSession

    def imports(batches: Any) -> Any:
        import pyarrow as pa

        import spark_jobs.snapshot_windows

        for batch in batches:
            names = [spark_jobs.snapshot_windows.__name__] * batch.num_rows
            yield pa.RecordBatch.from_pydict({"imported": names})

    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        rows = spark.range(0, tasks, 1, tasks).mapInArrow(imports, "imported string").collect()
    finally:
        spark.stop()
    return [row.imported for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--master", default=os.environ.get("TIDEMARK_SPARK_CONNECT_MASTER", "local[2]"))
    parser.add_argument(
        "--warm-up",
        metavar="URL",
        help="instead of starting a server, run the warm-up job on the one at URL (sc://HOST:PORT) "
        "and print what its tasks imported",
    )
    args = parser.parse_args(argv)
    if args.warm_up:
        print(json.dumps(warm_up(args.warm_up)))
        return 0
    command = server_command(args.port, args.master)
    os.execve(command[0], command, {**os.environ, **server_env()})


if __name__ == "__main__":
    sys.exit(main())
