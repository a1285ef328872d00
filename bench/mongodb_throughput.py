"""MongoDB's streamer and Spark snapshot against their Python floors, in one run.

Streaming: CHANGES (default 1,000,000: 60% inserts, 30% updates, 10% deletes of a
10-field document) are written to the MongoDB test server (jvm/mongo) while no streamer
runs, after a streamer's first start has committed its start; then, from that start,
  (a) a bare pymongo loop iterates the same change stream (updateLookup), counting events,
  (b) `tidemark stream` (capture.mode change_streams_update_full) writes the embedded log.
Snapshot: DOCS documents (default 5,000,000) in another collection, read by
  (c) a plain parallel find(): the `_id` range cut in PARALLELISM parts, one process each,
  (d) an incremental snapshot through the Spark chunk job (lakehouse release, the same
      parallelism), from the signal to the streamer's last release: in a Spark of the
      job's own (JVM start included), then attached to a Spark Connect server started
      just before (`spark_jobs.connect_server`: no JVM starts for the job; the server's
      first job after the service's warm-up, then its second).
Figures side by side, (b) as a ratio of (a) and (d) of (c), with peak RSS.

    python -m bench mongodb [--changes N] [--docs N] [--parallelism P] [--log-format parquet|json]
                            [--parts stream,snapshot] [--heap H] [--spark own,connect]

The test server keeps its data and change history in its JVM's memory (`--heap`, 12 GiB by
default). Its history is forgotten as the snapshot's collection loads (`load`); with it
kept, 5,000,000 of these documents took about 2.8 GB a million and filled a 12 GiB heap
until its collector stalled (2026-11-25). The chunk job's log lines (windows planned, Spark
ready, windows read) are printed with its figures. The benchmark runs on the test server
only; a real replica set keeps its data on disk and has no such limit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.snapshot_throughput import spark_env, wait_finished
from bench.streamer_throughput import peak_rss_mb

DB = "bench_mg"
SPARK_MODES = {"own": "own Spark", "connect": "Spark Connect"}


def document(i: int) -> dict[str, Any]:
    return {
        "_id": i, "counter": i % 97, "name": f"name-{i}", "city": f"city-{i % 50}", "amount": i * 1.5,
        "at": f"2024-01-01T00:00:{i % 60:02d}", "flag": i % 2 == 0, "note": f"note {i}", "big": i * 7,
        "tag": f"x{i % 13}",
    }  # fmt: skip


def insert(collection: Any, count: int, start: int = 0) -> None:
    """Documents `start` to `start + count` (their `_id`s)."""
    for lo in range(start, start + count, 1000):
        collection.insert_many([document(i) for i in range(lo, min(start + count, lo + 1000))], ordered=False)


def load(server: Any, collection: Any, docs: int, step: int = 500_000) -> None:
    """`docs` documents inserted, the test server forgetting the change history of each
    `step` of them (`forget_history`, as an oplog rolls over): it keeps that history in
    its heap beside the documents, which a real MongoDB keeps on disk, and a snapshot
    reads the documents, not their history. The streamer starts after the load."""
    for lo in range(0, docs, step):
        insert(collection, min(step, docs - lo), lo)
        server.forget_history()


def write_changes(collection: Any, changes: int) -> int:
    inserts, updates = int(changes * 0.6), int(changes * 0.3)
    deletes = changes - inserts - updates
    insert(collection, inserts)
    for lo in range(0, updates, 1000):
        collection.update_many(
            {"_id": {"$gte": lo, "$lt": min(updates, lo + 1000)}},
            {"$inc": {"big": 1}, "$set": {"note": "updated"}},
        )
    collection.delete_many({"_id": {"$gte": inserts - deletes}})
    return inserts + updates + deletes


def streamer(config: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "cdc_core.cli",
        "stream",
        "--config",
        str(config),
        "--status-line",
        "never",
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log.open("ab"))


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)


def committed(state: Path) -> dict[str, Any] | None:
    try:
        return orjson.loads((state / "offsets.json").read_bytes())["offset"]["source"]
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError):
        return None


def bare(*args: Any) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bare_change_stream_loop", *map(str, args)],
        capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    n, seconds, rss = out.stdout.split()
    return {"count": int(n), "seconds": float(seconds), "rss_mb": float(rss)}


def stream_part(server: Any, work: Path, changes: int, log_format: str) -> dict[str, dict[str, float]]:
    from tests.support.streamer import connector_file

    c = connector_file(work / "stream", DB, {
        "connector.class": "mongodb", "mongodb.connection.string": server.uri, "database.user": None,
        "capture.scope": "collection", "capture.target": f"{DB}.t",
        "capture.mode": "change_streams_update_full", "offset.flush.interval.ms": 500,
        "sink.local.format": log_format,
    }, prefix="benchmg")  # fmt: skip
    log = work / "streamer.log"
    proc = streamer(c.path, log)
    while committed(c.state) is None:  # the first start commits its start
        if proc.poll() is not None:
            raise SystemExit(f"the streamer exited; see {log}")
        time.sleep(0.1)
    stop(proc)
    start = committed(c.state)
    assert start is not None
    client = server.client()
    print(f"writing {changes:,} changes ...", flush=True)
    t = time.perf_counter()
    written = write_changes(client[DB]["t"], changes)
    end = client.admin.command("ping")["operationTime"]
    print(f"written {written:,} in {time.perf_counter() - t:.1f}s", flush=True)
    floor = bare("stream", server.uri, DB, "t", start["sec"], start["ord"], written)
    t = time.perf_counter()
    proc, rss = streamer(c.path, log), 0.0
    while True:
        rss = max(rss, peak_rss_mb(proc.pid))
        at = committed(c.state) or {}
        if (at.get("sec", 0), at.get("ord", 0)) >= (end.time, end.inc) or _all_written(c.state, written):
            break
        if proc.poll() is not None:
            raise SystemExit(f"the streamer exited early; see {log}")
        time.sleep(0.05)
    seconds = time.perf_counter() - t
    rss = max(rss, peak_rss_mb(proc.pid))
    stop(proc)
    events = orjson.loads((c.state / "status.json").read_bytes())["events_total"]
    if events != written or floor["count"] != written:
        print(
            f"WARNING: the streamer emitted {events:,} and the loop read {floor['count']:,} of {written:,} events"
        )
    client.drop_database(DB)
    return {"floor": floor, "streamer": {"count": written, "seconds": seconds, "rss_mb": rss}}


def _all_written(state: Path, written: int) -> bool:
    try:
        return orjson.loads((state / "status.json").read_bytes())["events_total"] >= written
    except (FileNotFoundError, orjson.JSONDecodeError, KeyError):
        return False


def snapshot_part(
    server: Any, work: Path, docs: int, parallelism: int, modes: list[str]
) -> dict[str, dict[str, float]]:
    from scripts.services.spark_connect import SparkConnect
    from tests.support.streamer import connector_file

    client = server.client()
    client[DB].create_collection("debezium_signal")
    print(f"loading {docs:,} documents ...", flush=True)
    t = time.perf_counter()
    load(server, client[DB]["s"], docs)
    print(f"loaded in {time.perf_counter() - t:.1f}s", flush=True)
    # The scan runs on both sides of the job and its faster run counts: right after the
    # load the server may still be collecting its garbage, which would slow the scan alone.
    scans = [bare("scan", server.uri, DB, "s", parallelism)]
    c = connector_file(work / "snapshot", DB, {
        "connector.class": "mongodb", "mongodb.connection.string": server.uri, "database.user": None,
        "capture.scope": "database", "capture.target": DB, "signal.data.collection": f"{DB}.debezium_signal",
        "offset.flush.interval.ms": 500,
    }, prefix="benchmgs")  # fmt: skip
    log = work / "snapshot-streamer.log"
    proc, rss = streamer(c.path, log), [0.0]
    figures: dict[str, dict[str, float]] = {}
    connect_server = None
    try:
        while committed(c.state) is None:
            time.sleep(0.1)
        for run, mode in enumerate(modes):
            if mode == "connect" and connect_server is None:
                connect_server = SparkConnect()
                t = time.perf_counter()
                connect_server.start()  # for the jobs that follow, as a long-lived server would be
                print(f"    Spark Connect server up in {time.perf_counter() - t:.1f}s", flush=True)
            url = connect_server.url if mode == "connect" and connect_server else None
            figures[run_name(modes, run)] = snapshot_run(
                c, work, f"{mode}-{run}", url, docs, parallelism, proc, rss
            )
    finally:
        stop(proc)
        if connect_server is not None:
            connect_server.stop()
    scans.append(bare("scan", server.uri, DB, "s", parallelism))
    print("    scan before the job {:.1f}s, after it {:.1f}s".format(*(s["seconds"] for s in scans)))
    scan = min(scans, key=lambda s: s["seconds"])
    if scan["count"] != docs:
        print(f"WARNING: the scan read {scan['count']:,} of {docs:,} documents")
    return {"scan": scan, **figures}


def run_name(modes: list[str], run: int) -> str:
    """`own`, `connect`, and `connect-2` for the server's second job."""
    mode = modes[run]
    nth = modes[: run + 1].count(mode)
    return mode if nth == 1 else f"{mode}-{nth}"


def snapshot_run(
    c: Any,
    work: Path,
    name: str,
    remote: str | None,
    docs: int,
    parallelism: int,
    proc: subprocess.Popen[bytes],
    rss: list[float],
) -> dict[str, float]:
    """One incremental snapshot of the collection through the chunk job, from its signal to
    the streamer's last release: in a Spark of the job's own (JVM start included) or
    attached to the Spark Connect server at `remote`."""
    from cdc_core.connectors.registry import connector_of
    from cdc_core.signals.sending import send_signal

    signal_id = f"bench-mg-{name}"
    started = time.perf_counter()
    config = c.config()
    data = {"data-collections": [f"{DB}.s"], "tidemark.reader": "spark",
            "tidemark.release": "lakehouse", "tidemark.chunk-size": 65536}  # fmt: skip
    send_signal(connector_of(config), config, signal_id, "execute-snapshot", data)
    job = [sys.executable, "-m", "spark_jobs.incremental_snapshot", "--config", str(c.path),
           "--signal", signal_id, "--staging", str(work / f"staging-{name}"), "--parallelism", str(parallelism),
           *(["--remote", remote] if remote else ["--master", f"local[{parallelism}]"])]  # fmt: skip
    result = subprocess.run(
        job, env=spark_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if result.returncode:
        raise SystemExit(f"the Spark chunk job ({name}) failed:\n{result.stderr[-8000:]}")
    job_seconds = time.perf_counter() - started
    for line in result.stderr.splitlines():
        # where the job's time went: plan, Spark, the executor tasks' windows
        if " INFO __main__: " in line or " INFO spark_jobs." in line:
            print("   ", line, flush=True)
    summary = wait_finished(c.state, signal_id, proc, rss)
    seconds = time.perf_counter() - started
    print(
        f"    chunk job ({name}) exited after {job_seconds:.1f}s, the streamer released all at {seconds:.1f}s"
    )
    rows = sum(t.get("rows_released", 0) for t in summary.get("tables", []))
    if rows != docs:
        print(f"WARNING: the snapshot ({name}) released {rows:,} of {docs:,} documents")
    return {"count": docs, "seconds": seconds, "rss_mb": rss[0]}


def main(argv: list[str] | None = None) -> int:
    from tests.support.mongo.server import MongoTestServer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--docs", type=int, default=5_000_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--log-format", choices=("parquet", "json"), default="parquet", help="the streamer's embedded log"
    )
    parser.add_argument("--heap", default="12g", help="the test server's JVM heap (it holds every document)")
    parser.add_argument(
        "--parts", default="stream,snapshot", help="which parts to run: stream, snapshot or both"
    )
    parser.add_argument(
        "--spark",
        default="own,connect,connect",
        help="where each chunk job runs, in turn: own (a Spark of its own) or connect (one Spark "
        "Connect server, started before its first job and kept for the next)",
    )
    args = parser.parse_args(argv)
    if not set(args.spark.split(",")) <= set(SPARK_MODES):
        parser.error(f"--spark takes {', '.join(SPARK_MODES)}")
    os.environ.setdefault("TIDEMARK_DB_USER", "tidemark")
    work = Path(tempfile.mkdtemp(prefix="tidemark-bench-mongodb-"))
    results: dict[str, dict[str, float]] = {}

    def line(name: str, key: str, base: str, unit: str) -> None:
        r, b = results[key], results[base]
        ratio = (r["count"] / r["seconds"]) / (b["count"] / b["seconds"])
        print(
            f"{name:64s} {r['count'] / r['seconds']:10,.0f} {unit:9s} {r['seconds']:8.1f} {r['rss_mb']:10.0f} {ratio:8.0%}",
            flush=True,
        )

    header = f"\n{'reader':64s} {'rate':>10s} {'':9s} {'seconds':>8s} {'peak RSS':>10s} {'vs floor':>8s}"
    for part in [p for p in ("stream", "snapshot") if p in args.parts.split(",")]:
        # one server per part, each starting with an empty memory; each part's figures are
        # printed as soon as it ends
        server = MongoTestServer(work, heap=args.heap)
        server.start()
        try:
            if part == "stream":
                results.update(stream_part(server, work, args.changes, args.log_format))
                print(header)
                line("bare pymongo change stream loop (floor)", "floor", "floor", "events/s")
                line(
                    f"tidemark stream (mongodb) -> local log ({args.log_format})",
                    "streamer",
                    "floor",
                    "events/s",
                )
            else:
                modes = args.spark.split(",")
                results.update(snapshot_part(server, work, args.docs, args.parallelism, modes))
                print(header)
                line(
                    f"plain parallel find() scan, {args.parallelism} processes (floor)",
                    "scan",
                    "scan",
                    "docs/s",
                )
                for run, mode in enumerate(modes):
                    name = run_name(modes, run)
                    label = SPARK_MODES[mode] + name.removeprefix(mode).replace("-", ", job ")
                    line(f"Spark chunk job snapshot, lakehouse release ({label})", name, "scan", "docs/s")
        finally:
            server.stop()
    print("\ntargets: the streamer and the snapshot each reach at least 70% of their floor")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
