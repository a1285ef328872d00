"""The Vitess streamer against its floor, in one run, on the same VStream.

1,000,000 row changes (60% inserts, 30% updates, 10% deletes on the 10-column table of
every benchmark) are written over the two shards of a keyspace behind the VTGate test
double (tests/support/vtgate); then the same VGTID range is read by
  (a) a bare grpcio loop that only iterates VStream's responses and counts the row
      changes (the Python floor: the double's own cost is in both),
  (b) `tidemark stream` (Vitess connector) into the embedded local event log,
and events/s and peak RSS are printed side by side, (b) as a ratio of (a).

    python -m bench vitess [--changes N]
"""

from __future__ import annotations

import argparse
import json
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

from bench import table
from bench.streamer_throughput import peak_rss_mb

KEYSPACE = "bench_vt"


def write_workload(cluster: Any, changes: int) -> int:
    """The workload, each statement on the shards its rows live on."""
    inserts, updates = int(changes * 0.6), int(changes * 0.3)
    deletes = changes - inserts - updates
    by_shard: dict[str, list[int]] = {"-80": [], "80-": []}
    for i in range(1, inserts + 1):
        by_shard[cluster.shard_of(KEYSPACE, i)].append(i)
    for shard, ids in by_shard.items():
        with cluster.on_shard(KEYSPACE, shard) as conn, conn.cursor() as cur:
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                values = ",".join(
                    f"({i},{i % 97},'name-{i}','city-{i % 50}',{i * 1.5},'2024-01-01 00:00:{i % 60:02d}',{i % 2},"
                    f"'note {i}',{i * 7},'x{i % 13}')"
                    for i in chunk
                )
                cur.execute(f"INSERT INTO t VALUES {values}")
            # the same id ranges on every shard: each updates and deletes its own rows
            for lo in range(1, updates + 1, 1000):
                cur.execute(
                    f"UPDATE t SET counter = counter + 1, note = 'updated' WHERE id BETWEEN {lo} AND {lo + 999}"
                )
            cur.execute(f"DELETE FROM t WHERE id > {inserts - deletes}")
    return inserts + updates + deletes


def start_vgtid(cluster: Any) -> str:
    return json.dumps(
        [{"keyspace": KEYSPACE, "shard": s, "gtid": cluster.position(KEYSPACE, s)} for s in ("-80", "80-")]
    )


def run_bare_loop(cluster: Any, vgtid: str, expected: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bare_vstream_loop", cluster.grpc_address, vgtid, str(expected)],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    n, seconds, rss = out.stdout.split()
    return {"events": int(n), "seconds": float(seconds), "rss_mb": float(rss)}


def run_streamer(cluster: Any, work: Path, vgtid: str, end: dict[str, str], expected: int) -> dict[str, Any]:
    from tests.support.vtgate.cluster import vitess_connector

    extra = {"vitess.shard": "-80,80-", "vitess.gtid": vgtid, "table.include.list": f"{KEYSPACE}\\.t"}
    connector = vitess_connector(cluster, work / "streamer", KEYSPACE, extra, prefix="bench")
    t = time.perf_counter()
    log = open(work / "streamer.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cdc_core.cli",
            "stream",
            "--config",
            str(connector.path),
            "--status-line",
            "never",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    offsets = connector.state / "offsets.json"
    rss = 0.0
    while True:
        rss = max(rss, peak_rss_mb(proc.pid))
        if offsets.exists():
            source = orjson.loads(offsets.read_bytes())["offset"]["source"]
            reached = {s["shard"]: s["gtid"] for s in json.loads(source["vgtid"])}
            if reached == end:
                break
        if proc.poll() is not None:
            raise SystemExit(f"the streamer exited early; see {work / 'streamer.log'}")
        time.sleep(0.05)
    seconds = time.perf_counter() - t
    rss = max(rss, peak_rss_mb(proc.pid))
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    log.close()
    status = orjson.loads((connector.state / "status.json").read_bytes())
    return {"seconds": seconds, "rss_mb": rss, "events": status["events_total"], "expected": expected}


def main(argv: list[str] | None = None) -> int:
    from tests.support.vtgate.cluster import VitessCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tidemark-bench-vitess-"))
    base = int(os.environ.get("TIDEMARK_VITESS_SHARD_PORT", "3311"))
    admin = {"user": os.environ["TIDEMARK_ADMIN_USER"], "password": os.environ["TIDEMARK_ADMIN_PASSWORD"]}
    cluster = VitessCluster(work, [base + i for i in range(4)], admin)
    cluster.start()
    try:
        cluster.create_keyspace(KEYSPACE, {"-80": 0, "80-": 1})
        cluster.execute(KEYSPACE, table.DDL.format(db=KEYSPACE))
        vgtid = start_vgtid(cluster)
        print(f"writing {args.changes:,} row changes over two shards ...", flush=True)
        t = time.perf_counter()
        written = write_workload(cluster, args.changes)
        end = {s: cluster.position(KEYSPACE, s) for s in ("-80", "80-")}
        print(f"written {written:,} in {time.perf_counter() - t:.1f}s", flush=True)
        bare = run_bare_loop(cluster, vgtid, written)
        streamer = run_streamer(cluster, work, vgtid, end, written)
    finally:
        cluster.drop_keyspace(KEYSPACE)
        cluster.stop()

    def rate(result: dict[str, Any]) -> float:
        return written / result["seconds"]

    print(f"\n{'reader':44s} {'events/s':>10s} {'seconds':>8s} {'peak RSS MB':>12s} {'vs bare loop':>13s}")
    for name, result in (
        ("bare grpcio VStream loop (floor)", bare),
        ("tidemark stream (vitess) -> local log", streamer),
    ):
        ratio = rate(result) / rate(bare)
        print(
            f"{name:44s} {rate(result):10,.0f} {result['seconds']:8.1f} {result['rss_mb']:12.0f} {ratio:12.0%}"
        )
    if streamer["events"] != written:
        print(f"WARNING: the streamer emitted {streamer['events']} events for {written} changes")
    print("\ntarget: the streamer reaches at least 70% of the bare loop with bounded memory")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
