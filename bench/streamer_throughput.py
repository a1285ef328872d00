"""Streamer throughput against its floors, measured in one run on the same binlog.

1,000,000 row changes (60% inserts, 30% updates, 10% deletes on a 10-column table) are
written once; then the same binlog range is read by
  (a) a bare python-mysql-replication loop that only iterates the rows (the Python floor),
  (b) `mariadb-binlog --read-from-remote-server` to /dev/null (the raw read limit),
  (c) `tidemark stream` into the embedded local event log in JSON lines,
  (d) the same into the embedded log in Parquet (`sink.local.format: parquet`),
  (e) `tidemark stream` into Kafka,
and events/s and peak RSS (processes and their children) are printed side by side, with
(c), (d) and (e) as ratios of (a), and (d) as a ratio of (c) (issue 22: no lower). (c) and
(d) alternate for `--rounds` rounds and each keeps its best, as this machine's speed drifts.

    python -m bench streamer [--changes N] [--rounds R]
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
import pymysql

from bench import table

DB = "bench_stream"


def admin() -> pymysql.Connection:
    from scripts.services import admin_connection

    return admin_connection()


def cdc_params() -> dict[str, Any]:
    return {
        "host": "127.0.0.1",
        "port": int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307")),
        "user": os.environ.get("TIDEMARK_DB_USER", "tidemark"),
        "password": os.environ.get("TIDEMARK_DB_PASSWORD", "tidemark-dev"),
    }


def position(cur: Any) -> tuple[str, int, str]:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    cur.execute("SELECT @@gtid_binlog_pos")
    return file, int(pos), cur.fetchone()[0]


def write_workload(changes: int) -> int:
    """Returns the number of row changes written."""
    inserts, updates = int(changes * 0.6), int(changes * 0.3)
    deletes = changes - inserts - updates
    conn = admin()
    with conn.cursor() as cur:
        batch = 1000
        table.insert_rows(cur, DB, 1, inserts, batch)
        step = max(1, inserts // max(updates, 1))
        done = 0
        lo = 1
        while done < updates:
            n = min(batch, updates - done)
            cur.execute(
                f"UPDATE {DB}.t SET counter = counter + 1, note = 'updated' WHERE id BETWEEN {lo} AND {lo + n - 1}"
            )
            done += n
            lo += n * step if lo + n * step < inserts else n
        cur.execute(f"DELETE FROM {DB}.t WHERE id > {inserts - deletes}")
    return inserts + updates + deletes


def peak_rss_mb(pid: int, now: bool = False) -> float:
    """Peak RSS of a process plus its children (the streamer's binlog decoder process), or
    with `now` their resident memory at this moment."""
    field = "VmRSS:" if now else "VmHWM:"
    total = 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field):
                total += int(line.split()[1]) / 1024
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return total
    return total + sum(peak_rss_mb(int(child), now) for child in children)


def run_bare_loop(start: tuple[str, int, str], expected: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.bare_binlog_loop", start[2], DB, str(expected)],
        env={**os.environ, "TIDEMARK_DB_PASSWORD": cdc_params()["password"]},
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    n, seconds, rss = out.stdout.split()
    return {"events": int(n), "seconds": float(seconds), "rss_mb": float(rss)}


def binlog_files(start: tuple[str, int, str], end: tuple[str, int, str]) -> list[str]:
    with admin().cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        names = [row[0] for row in cur.fetchall()]
    return [n for n in names if start[0] <= n <= end[0]]


def run_mysqlbinlog(start: tuple[str, int, str], end: tuple[str, int, str]) -> dict[str, Any]:
    """Reads the whole range; --stop-position applies to the last file. The password goes
    through MYSQL_PWD, never the command line."""
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if tool is None:
        raise SystemExit("mariadb-binlog not installed (make install)")
    p = cdc_params()
    cmd = [
        tool,
        "--read-from-remote-server",
        f"--host={p['host']}",
        f"--port={p['port']}",
        f"--user={p['user']}",
        f"--start-position={start[1]}",
        f"--stop-position={end[1]}",
        *binlog_files(start, end),
    ]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env={**os.environ, "MYSQL_PWD": p["password"]}, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{tool} failed with exit code {proc.returncode}")
    return {"seconds": seconds, "rss_mb": usage.ru_maxrss / 1024}


def run_streamer(
    seed_state: Path, work: Path, sink: str, end: tuple[str, int, str], expected: int, round_: int = 0
) -> dict[str, Any]:
    state = work / f"state-{sink}-{round_}"
    shutil.copytree(seed_state, state)
    config = work / f"connector-{sink}.yaml"
    props = connector_props(state, work / f"log-{sink}-{round_}")
    if sink in ("local", "parquet"):  # each named: the default is one of them
        props["sink.local.format"] = "json" if sink == "local" else "parquet"
    if sink == "kafka":
        props["sink.type"] = "kafka"
        props["sink.kafka.bootstrap.servers"] = os.environ.get("TIDEMARK_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        props["topic.prefix"] = f"bench{int(time.time())}"
    import yaml

    config.write_text(yaml.safe_dump(props))
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cdc_core.cli", "stream", "--config", str(config), "--status-line", "never"],
        stdout=subprocess.DEVNULL,
        stderr=open(work / f"streamer-{sink}.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    offsets = state / "offsets.json"
    rss = 0.0
    while True:
        rss = max(rss, peak_rss_mb(proc.pid))
        if offsets.exists():
            source = orjson.loads(offsets.read_bytes())["offset"]["source"]
            if source.get("gtids") == end[2]:
                break
        if proc.poll() is not None:
            raise SystemExit(f"streamer ({sink}) exited early; see {work / f'streamer-{sink}.log'}")
        time.sleep(0.05)
    seconds = time.perf_counter() - t
    rss = max(rss, peak_rss_mb(proc.pid))
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    status = orjson.loads((state / "status.json").read_bytes())
    return {"seconds": seconds, "rss_mb": rss, "events": status["events_total"], "expected": expected}


def connector_props(state: Path, log: Path) -> dict[str, Any]:
    return {
        "name": "bench",
        "connector.class": "mysql",
        "topic.prefix": "bench",
        "database.hostname": "127.0.0.1",
        "database.port": int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307")),
        "database.user": os.environ.get("TIDEMARK_DB_USER", "tidemark"),
        "database.server.id": 9912,
        "table.include.list": f"{DB}\\..*",
        "state.directory": str(state),
        "sink.local.directory": str(log),
        "offset.flush.interval.ms": 200,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the two local formats")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tidemark-bench-"))
    conn = admin()
    with conn.cursor() as cur:
        table.create(cur, DB)
        cur.execute("FLUSH BINARY LOGS")
    # First start of the streamer records the schema and the position before the workload.
    seed = work / "seed-state"
    seed_config = work / "seed.yaml"
    import yaml

    seed_config.write_text(yaml.safe_dump(connector_props(seed, work / "seed-log")))
    subprocess.run(
        [sys.executable, "-m", "cdc_core.cli", "stream", "--config", str(seed_config), "--max-seconds", "3"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with conn.cursor() as cur:
        start = position(cur)
    print(f"writing {args.changes:,} row changes ...", flush=True)
    t = time.perf_counter()
    written = write_workload(args.changes)
    with conn.cursor() as cur:
        end = position(cur)
        cur.execute("FLUSH BINARY LOGS")
    print(
        f"written {written:,} in {time.perf_counter() - t:.1f}s; binlog {start[0]}:{start[1]} .. {end[0]}:{end[1]}"
    )
    bare = run_bare_loop(start, written)
    raw = run_mysqlbinlog(start, end)
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "parquet": []}
    for n in range(args.rounds):
        for sink in runs:
            runs[sink].append(run_streamer(seed, work, sink, end, written, n))
    local, parquet = (min(runs[sink], key=lambda r: r["seconds"]) for sink in runs)
    kafka = run_streamer(seed, work, "kafka", end, written)

    def rate(result: dict[str, Any]) -> float:
        return written / result["seconds"]

    rows = [
        ("mariadb-binlog to /dev/null (raw read)", raw),
        ("bare python-mysql-replication loop", bare),
        ("tidemark stream -> local log, JSON lines", local),
        ("tidemark stream -> local log, Parquet", parquet),
        ("tidemark stream -> Kafka", kafka),
    ]
    print(f"\n{'reader':42s} {'events/s':>10s} {'seconds':>8s} {'peak RSS MB':>12s} {'vs bare loop':>13s}")
    for name, result in rows:
        ratio = rate(result) / rate(bare)
        print(
            f"{name:42s} {rate(result):10,.0f} {result['seconds']:8.1f} {result['rss_mb']:12.0f} {ratio:12.0%}"
        )
    print(
        f"\nParquet log / JSON-lines log: {rate(parquet) / rate(local):.2f}x "
        f"(rounds: JSON lines {[round(written / r['seconds']) for r in runs['local']]}, "
        f"Parquet {[round(written / r['seconds']) for r in runs['parquet']]} events/s)"
    )
    for name, result in (("local", local), ("parquet", parquet), ("kafka", kafka)):
        if result["events"] != written:
            print(f"WARNING: the {name} streamer emitted {result['events']} events for {written} changes")
    print("\ntargets: the streamer reaches at least 60% of the bare loop with bounded memory; into Parquet")
    print("no lower than into JSON lines")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
