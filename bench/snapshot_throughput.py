"""Incremental-snapshot throughput against a Debezium-like baseline and the raw read limits.

A table of N rows (default 5,000,000; 10 columns) is snapshotted while a writer applies
about 500 changes/s. In one run, rows/s for:
  (a) the in-process reader, chunk size 1024, rows released as op=r events (the baseline:
      one window at a time, as Debezium does);
  (b) the Spark chunk job (spark_jobs/incremental_snapshot.py), windows in parallel,
      lakehouse release (staged Parquet plus a release record per window);
  (c) the raw limits: `SELECT *` streamed to /dev/null by the mariadb client, and Spark
      `read.jdbc` with the same parallelism writing Parquet, under the same writer load
      (and the streamer following it) as (a) and (b), then again on an idle machine;
with (b) as a ratio of (a) and of Spark JDBC. Both Spark figures count the whole job as a
user runs it, JVM start included (Spark JDBC is also shown without it). The streamer's
memory is sampled during an in-process snapshot of a table a tenth the size and during
the full-size one: it should not grow with the table.

    python -m bench snapshot [--rows N] [--parallelism P]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from bench import table
from bench.streamer_throughput import admin, cdc_params, peak_rss_mb

DB = "bench_snapshot"
SMALL_DB = "bench_snapshot_small"
SIGNALS = "tidemark.debezium_signal"


def load_table(db: str, rows: int) -> None:
    conn = admin()
    with conn.cursor() as cur:
        table.create(cur, db)
        table.insert_rows(cur, db, 1, rows, batch=5000)
    conn.close()


class Writer(threading.Thread):
    """About `rate` single-row updates per second."""

    def __init__(self, rows: int, rate: float = 500.0) -> None:
        super().__init__(daemon=True)
        self.rows, self.rate = rows, rate
        self.stop_flag = threading.Event()
        self.changes = 0

    def run(self) -> None:
        import random

        rng = random.Random(5)
        conn = admin()
        with conn.cursor() as cur:
            started = time.monotonic()
            while not self.stop_flag.is_set():
                cur.execute(
                    f"UPDATE {DB}.t SET counter = counter + 1 WHERE id = %s", (rng.randint(1, self.rows),)
                )
                self.changes += 1
                ahead = self.changes / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        conn.close()


def connector(work: Path) -> Path:
    props = {
        "name": "bench-snapshot",
        "connector.class": "mysql",
        "topic.prefix": "benchsnap",
        "database.hostname": "127.0.0.1",
        "database.port": int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307")),
        "database.user": os.environ.get("TIDEMARK_DB_USER", "tidemark"),
        "database.server.id": 9913,
        "table.include.list": f"({DB}|{SMALL_DB})\\.t",
        "signal.data.collection": SIGNALS,
        "incremental.snapshot.chunk.size": 1024,
        "state.directory": str(work / "state"),
        "sink.local.directory": str(work / "log"),
        "offset.flush.interval.ms": 500,
    }
    path = work / "connector.yaml"
    path.write_text(yaml.safe_dump(props))
    return path


def signal(signal_id: str, data: dict[str, Any]) -> None:
    conn = admin()
    with conn.cursor() as cur:
        cur.execute(
            f"INSERT INTO {SIGNALS} (id, type, data) VALUES (%s, 'execute-snapshot', %s)",
            (signal_id, json.dumps(data)),
        )
    conn.close()


def finished(state: Path, signal_id: str) -> dict[str, Any] | None:
    try:
        offset = json.loads((state / "offsets.json").read_text())["offset"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None
    done = (offset.get("snapshot") or {}).get("finished", [])
    return next((s for s in done if s["signal_id"] == signal_id), None)


def wait_finished(
    state: Path, signal_id: str, streamer: subprocess.Popen[bytes], rss: list[float]
) -> dict[str, Any]:
    """Waits for the snapshot; `rss[0]` becomes the largest streamer RSS sampled meanwhile."""
    while True:
        rss[0] = max(rss[0], peak_rss_mb(streamer.pid, now=True))
        summary = finished(state, signal_id)
        if summary is not None:
            return summary
        if streamer.poll() is not None:
            raise SystemExit("the streamer exited during the benchmark")
        time.sleep(0.2)


def raw_select(rows: int) -> float:
    tool = shutil.which("mariadb") or shutil.which("mysql")
    if tool is None:
        raise SystemExit("the mariadb client is not installed (make install)")
    p = cdc_params()
    cmd = [tool, "--quick", "--batch", f"--host={p['host']}", f"--port={p['port']}", f"--user={p['user']}",
           "-e", f"SELECT * FROM {DB}.t"]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(cmd, env={**os.environ, "MYSQL_PWD": p["password"]}, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def spark_env() -> dict[str, str]:
    """A Spark process's environment: the database password, quiet logs."""
    return {
        **os.environ,
        "TIDEMARK_DB_PASSWORD": cdc_params()["password"],
        "TIDEMARK_SPARK_LOG_LEVEL": "ERROR",
    }


def spark_jdbc(rows: int, parallelism: int, out: Path) -> tuple[float, float]:
    """Spark's own JDBC reader (MariaDB driver), partitioned on the key, writing Parquet:
    seconds for the whole process (JVM start included) and for the read and write alone."""
    code = f"""
import time, os
from spark_jobs.session import build_session
spark = build_session("bench-jdbc", master="local[{parallelism}]")
p = {json.dumps({k: v for k, v in cdc_params().items() if k != "password"})}
started = time.perf_counter()
df = spark.read.jdbc(
    f"jdbc:mysql://{{p['host']}}:{{p['port']}}/{DB}?permitMysqlScheme", "t", column="id", lowerBound=1, upperBound={rows},
    numPartitions={parallelism}, properties={{"user": p["user"], "password": os.environ["TIDEMARK_DB_PASSWORD"],
    "driver": "org.mariadb.jdbc.Driver"}})
df.write.mode("overwrite").parquet({str(out)!r})
print(time.perf_counter() - started)
"""
    env = spark_env()
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    whole = time.perf_counter() - started
    if result.returncode:
        raise SystemExit(f"Spark read.jdbc failed:\n{result.stderr[-8000:]}")
    return whole, float(result.stdout.strip().splitlines()[-1])


def spark_chunk_job(
    config: Path,
    work: Path,
    signal_id: str,
    parallelism: int,
    streamer: subprocess.Popen[bytes],
    rss: list[float],
) -> tuple[float, float]:
    """Seconds until the job exits, and until the streamer has released every window."""
    started = time.perf_counter()
    signal(signal_id, {"data-collections": [f"{DB}.t"], "tidemark.reader": "spark",
                       "tidemark.release": "lakehouse", "tidemark.chunk-size": 65536})  # fmt: skip
    job = [sys.executable, "-m", "spark_jobs.incremental_snapshot", "--config", str(config), "--signal",
           signal_id, "--staging", str(work / "staging"), "--parallelism", str(parallelism),
           "--master", f"local[{parallelism}]"]  # fmt: skip
    env = spark_env()
    result = subprocess.run(job, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    exited = time.perf_counter() - started
    if result.returncode:
        raise SystemExit(f"the Spark chunk job failed:\n{result.stderr[-8000:]}")
    for line in result.stderr.splitlines():
        if " INFO __main__: " in line:  # the job's plan and per-batch timings
            print("   ", line, flush=True)
    wait_finished(work / "state", signal_id, streamer, rss)
    shutil.rmtree(work / "staging", ignore_errors=True)
    return exited, time.perf_counter() - started


def best(results: dict[str, float], name: str, seconds: float) -> None:
    results[name] = min(seconds, results.get(name, seconds))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--parallelism", type=int, default=4)
    parser.add_argument(
        "--skip-baseline",
        action="store_true",
        help="leave out the in-process runs (while tuning the Spark job)",
    )
    parser.add_argument("--rounds", type=int, default=2, help="Spark runs of each kind; the best counts")
    args = parser.parse_args(argv)
    small = max(1, args.rows // 10)
    work = Path(tempfile.mkdtemp(prefix="tidemark-snapbench-"))
    print(f"loading {args.rows:,} + {small:,} rows ...", flush=True)
    started = time.perf_counter()
    load_table(DB, args.rows)
    load_table(SMALL_DB, small)
    print(f"loaded in {time.perf_counter() - started:.0f}s", flush=True)
    config = connector(work)
    env = {**os.environ, "TIDEMARK_DB_PASSWORD": cdc_params()["password"]}
    streamer = subprocess.Popen(
        [sys.executable, "-m", "cdc_core.cli", "stream", "--config", str(config), "--status-line", "never"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(work / "streamer.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    writer = Writer(args.rows)
    rss = {"small": [0.0], "full": [0.0], "spark": [0.0]}
    results: dict[str, float] = {}
    released = 0
    try:
        time.sleep(3)
        writer.start()
        suffix = int(time.time())
        if not args.skip_baseline:
            print(f"in-process reader, {small:,}-row table ...", flush=True)
            signal(f"bench-small-{suffix}", {"data-collections": [f"{SMALL_DB}.t"]})
            wait_finished(work / "state", f"bench-small-{suffix}", streamer, rss["small"])
            print("in-process reader (baseline) ...", flush=True)
            t = time.perf_counter()
            signal(f"bench-inproc-{suffix}", {"data-collections": [f"{DB}.t"]})
            summary = wait_finished(work / "state", f"bench-inproc-{suffix}", streamer, rss["full"])
            results["inprocess"] = time.perf_counter() - t
            released = summary["tables"][0]["rows_released"] + summary["tables"][0]["rows_dropped"]
        # This machine's speed drifts between minutes; the Spark job and Spark read.jdbc run
        # alternately and each keeps its best round.
        for round_ in range(1, args.rounds + 1):
            print(f"Spark chunk job, round {round_} ...", flush=True)
            job, released_at = spark_chunk_job(
                config, work, f"bench-spark-{suffix}-{round_}", args.parallelism, streamer, rss["spark"]
            )
            best(results, "spark-job", job)
            best(results, "spark", released_at)
            print(f"Spark read.jdbc, round {round_} ...", flush=True)
            whole, read = spark_jdbc(args.rows, args.parallelism, work / "jdbc-parquet")
            best(results, "jdbc", whole)
            best(results, "jdbc-read", read)
        print("SELECT * ...", flush=True)
        results["select"] = raw_select(args.rows)
    finally:
        writer.stop_flag.set()
        writer.join(10)
        streamer.terminate()
        streamer.wait(60)
    print("raw limits, idle ...", flush=True)
    results["select-idle"] = raw_select(args.rows)
    results["jdbc-idle"], results["jdbc-read-idle"] = spark_jdbc(
        args.rows, args.parallelism, work / "jdbc-parquet"
    )

    def rate(name: str) -> float:
        return args.rows / results[name]

    def ratio(name: str, base: str, form: str) -> str:
        return format(rate(name) / rate(base), form) if base in results else "n/a"

    rows = [
        ("in-process reader, chunk 1024, op=r (baseline)", "inprocess"),
        (f"Spark chunk job, {args.parallelism} parallel, lakehouse (incl. JVM)", "spark"),
        ("  of which the job itself, to its exit", "spark-job"),
        ("SELECT * to /dev/null (mariadb client)", "select"),
        (f"Spark read.jdbc, {args.parallelism} parts, Parquet (incl. JVM)", "jdbc"),
        (f"Spark read.jdbc, {args.parallelism} parts, Parquet (excl. JVM)", "jdbc-read"),
        ("idle machine: SELECT * to /dev/null", "select-idle"),
        (f"idle machine: Spark read.jdbc, {args.parallelism} parts (incl. JVM)", "jdbc-idle"),
        (f"idle machine: Spark read.jdbc, {args.parallelism} parts (excl. JVM)", "jdbc-read-idle"),
    ]
    print(
        f"\n{args.rows:,} rows; the writer (~500 changes/s, {writer.changes} changes) and the streamer run "
        f"during every row but the idle ones; Spark rows: best of {args.rounds}; baseline released {released:,}"
    )
    print(f"{'reader':58s} {'rows/s':>10s} {'seconds':>8s} {'vs baseline':>12s} {'vs Spark JDBC':>14s}")
    for label, name in rows:
        if name in results:
            print(
                f"{label:58s} {rate(name):10,.0f} {results[name]:8.1f} {ratio(name, 'inprocess', '11.1f')}x "
                f"{ratio(name, 'jdbc', '13.0%')}"
            )
    print(
        f"Spark chunk job vs Spark read.jdbc: {ratio('spark', 'jdbc', '.0%')} under the same load "
        f"({ratio('spark', 'jdbc-read', '.0%')} of it without its JVM start), "
        f"{ratio('spark', 'jdbc-idle', '.0%')} of it on an idle machine"
    )
    print(
        f"streamer RSS (with its decoder process), largest sampled: {small:,}-row snapshot {rss['small'][0]:.0f} MB, "
        f"{args.rows:,}-row snapshot {rss['full'][0]:.0f} MB, Spark-read snapshot {rss['spark'][0]:.0f} MB"
    )
    if released > args.rows:
        print(f"WARNING: the baseline released {released:,} rows for a {args.rows:,}-row table")
    print(
        "target: Spark reader >= 5x the baseline and >= 70% of Spark JDBC; streamer memory independent of size"
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
