"""Helpers for snapshot tests: signals, the streamer's status, catching up, cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import orjson

from tests.support.streamer import wait_for

SIGNALS = "tidemark.debezium_signal"


class _Ids(dict):
    """Signal ids unique to this run (the signal table outlives test databases)."""

    def __missing__(self, name: str) -> str:
        self[name] = f"{name}-{uuid.uuid4().hex[:16]}"
        return self[name]


ids = _Ids()


def run_chunk_job_remotely(url: str, args: list[str], through_env: bool = False) -> dict:
    """The Spark chunk job as its own process attached to the Spark Connect server at
    `url` (no Spark in the process), given with `--remote` or, as Airflow's operator
    gives it, in TIDEMARK_SPARK_REMOTE; its summary."""
    from spark_jobs.connect_server import REMOTE_ENV

    env = {**os.environ, REMOTE_ENV: url} if through_env else dict(os.environ)
    remote = [] if through_env else ["--remote", url]
    job = [sys.executable, "-m", "spark_jobs.incremental_snapshot", *args, *remote]
    done = subprocess.run(job, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, f"the chunk job failed:\n{done.stderr[-6000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def send_signal(db, signal_id: str, kind: str, data: dict) -> None:
    with db.cursor() as cur:
        cur.execute(
            f"INSERT INTO {SIGNALS} (id, type, data) VALUES (%s, %s, %s)", (signal_id, kind, json.dumps(data))
        )


def status(connector) -> dict:
    try:
        return orjson.loads((connector.state / "status.json").read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}


def finished(connector, signal_id: str) -> dict | None:
    snapshots = (status(connector).get("snapshots") or {}).get("finished", [])
    return next(
        (s for s in snapshots if s.get("signal_id", s.get("id")) == signal_id or s["id"] == signal_id), None
    )


def gtid(db) -> str:
    with db.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        return cur.fetchone()[0]


def reached(committed: str | None, head: str) -> bool:
    """Whether a committed GTID position holds every transaction of `head`. Not equality:
    other tests write to the same server meanwhile (`make test` runs two lanes at once),
    and a streamer's position moves on with their transactions too."""
    from cdc_core.connectors.mysql.positions import MariaDbGtidState, MySqlGtidSet

    if committed is None:
        return False
    try:
        return MariaDbGtidState.parse(committed).succeeds(MariaDbGtidState.parse(head))
    except ValueError:  # MySQL's GTID sets
        return MySqlGtidSet.parse(committed).succeeds(MySqlGtidSet.parse(head))


def wait_caught_up(connector, db, timeout: float, message: str = "streamer to catch up") -> None:
    """Until the streamer has committed every transaction the server had when this was
    called. The head is read once: read again at each poll it would move on with the
    other lane's writes, and a streamer slower than them would never be seen to arrive."""
    head = gtid(db)

    def arrived() -> bool:
        committed = (status(connector).get("committed") or {}).get("source", {})
        return reached(committed.get("gtids"), head)

    wait_for(arrived, timeout, interval=0.2, message=message)


def cleanup(proc, writer=None) -> None:
    """Whatever happened, leave no writer and no streamer behind."""
    if writer is not None:
        writer.stop_flag.set()
    if proc.poll() is None:
        proc.kill()


def wait_finished(connector, signal_id: str, timeout: float, what: str) -> None:
    wait_for(lambda: finished(connector, signal_id) is not None, timeout, interval=0.3, message=what)


def seed(cur, name: str, rows: int, note=None) -> None:
    """Table `name` (id, v, note) with ids 1..rows at version 0."""
    cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(20))")
    notes = (lambda i: f"row {i}") if note is None else note if callable(note) else (lambda _i: note)
    cur.executemany(f"INSERT INTO {name} VALUES (%s, 0, %s)", [(i, notes(i)) for i in range(1, rows + 1)])


def read_signal(db, signal_id: str) -> tuple[str, dict]:
    """The type and data of a signal in the signal table."""
    with db.cursor() as cur:
        cur.execute(f"SELECT type, data FROM {SIGNALS} WHERE id = %s", (signal_id,))
        row = cur.fetchone()
    assert row is not None, f"no signal {signal_id} in {SIGNALS}"
    return row[0], json.loads(row[1])
