"""`make demo`: stream a live MariaDB workload into the embedded event log and show it.

Steps: reset the demo database and the demo connector's state; start `tidemark stream`
(a child process, exactly as a user would run it); run a write workload (transactions
over four tables, a schema change and a primary-key change in the middle); wait until
the streamer has caught up; stop it with SIGTERM; then print what was captured — counts
per table and operation, transaction boundaries, the committed position, a few sample
events — and check that replaying the events gives exactly the source tables.

    python -m demo.run [--sink local|kafka] [--orders N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pymysql

from cdc_core.config.connector_config import ConnectorConfig, load_config
from demo.workload import create_schema, run_workload

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "demo_shop"


def demo_config(sink: str) -> tuple[ConnectorConfig, dict[str, Any]]:
    overrides: dict[str, Any] = {"database.port": int(os.environ.get("TIDEMARK_MARIADB_PORT", "3307"))}
    if sink == "kafka":
        overrides["sink.type"] = "kafka"
        overrides["sink.kafka.bootstrap.servers"] = os.environ.get(
            "TIDEMARK_KAFKA_BOOTSTRAP", "127.0.0.1:9092"
        )
    return load_config(ROOT / "connectors" / "demo.yaml", overrides=overrides), overrides


def write_effective_config(overrides: dict[str, Any]) -> Path:
    import yaml

    base = yaml.safe_load((ROOT / "connectors" / "demo.yaml").read_text())
    path = ROOT / ".local" / "demo" / "connector.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({**base, **overrides}, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    from scripts.services import environment

    for key, value in environment().items():  # the local stack's ports and dev credentials
        os.environ.setdefault(key, value)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sink", choices=("local", "kafka"), default=os.environ.get("DEMO_SINK", "local"))
    parser.add_argument("--orders", type=int, default=300)
    args = parser.parse_args(argv)

    config, overrides = demo_config(args.sink)
    from cdc_core.pipeline.streamer import StateLayout, local_log_directory

    layout = StateLayout(config)
    eventlog = local_log_directory(config)
    step("resetting the demo database and the demo connector's state")
    shutil.rmtree(layout.root, ignore_errors=True)
    shutil.rmtree(eventlog, ignore_errors=True)
    from scripts.services import admin_connection

    conn = admin_connection()
    create_schema(conn, DATABASE)

    config_path = write_effective_config(overrides)
    log_path = ROOT / ".local" / "demo" / "streamer.log"
    step(
        f"starting: tidemark stream --config {config_path.relative_to(ROOT)}   (log: {log_path.relative_to(ROOT)})"
    )
    with open(log_path, "wb") as log:
        streamer = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdc_core.cli",
                "stream",
                "--config",
                str(config_path),
                "--status-line",
                "never",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait(lambda: layout.status.exists(), 60, "the streamer to start", streamer, log_path)
        step(f"running the workload: {args.orders} orders in transactions, an ALTER TABLE and a key change")
        started = time.monotonic()
        stats = run_workload(conn, DATABASE, orders=args.orders)
        step(f"workload done: {stats['transactions']} transactions in {time.monotonic() - started:.1f}s")
        target = head_position(conn)
        wait(lambda: caught_up(layout, target), 120, "the streamer to catch up", streamer, log_path)
    finally:
        streamer.send_signal(signal.SIGTERM)
        code = streamer.wait(60)
    step(f"streamer stopped with SIGTERM (exit code {code})")
    if code != 0:
        print((log_path.read_text())[-3000:])
        return 1
    return report(config, conn, eventlog, args.sink)


def step(text: str) -> None:
    print(f"==> {text}", flush=True)


def wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise SystemExit(
                f"the streamer exited ({proc.returncode}) while waiting for {what}:\n{log.read_text()[-3000:]}"
            )
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}; see {log}")


def head_position(conn: pymysql.Connection) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT @@gtid_binlog_pos")
        return cur.fetchone()[0]


def caught_up(layout: Any, target_gtids: str) -> bool:
    if not layout.offsets.exists():
        return False
    doc = orjson.loads(layout.offsets.read_bytes())
    source = doc.get("offset", {}).get("source", {})
    return source.get("gtids") == target_gtids


def report(config: ConnectorConfig, conn: pymysql.Connection, eventlog: Path, sink: str) -> int:
    from cdc_core.cli import status_document
    from demo.verify import events_by_topic, replay_matches_source

    topics = events_by_topic(config, eventlog, sink)
    prefix = config.topic_prefix
    print()
    print(f"{'topic':38s} {'c':>6s} {'u':>6s} {'d':>6s} {'tombstones':>10s}")
    for topic in sorted(t for t in topics if t.startswith(f"{prefix}.{DATABASE}.")):
        ops = Counter("tombstone" if v is None else v["op"] for _, v, _ in topics[topic])
        print(f"{topic:38s} {ops['c']:6d} {ops['u']:6d} {ops['d']:6d} {ops['tombstone']:10d}")
    txn = [v for _, v, _ in topics.get(f"{prefix}.transaction", [])]
    ends = [v for v in txn if v["status"] == "END"]
    print(
        f"\ntransactions: {sum(v['status'] == 'BEGIN' for v in txn)} BEGIN / {len(ends)} END events, "
        f"{sum(v['event_count'] for v in ends)} change events inside them"
    )
    schema_changes = [v for _, v, _ in topics.get(prefix, [])]
    for change in schema_changes:
        print(f"schema change: {change['ddl'].split(chr(10))[0][:90]}")
    status = status_document(config)
    print(f"committed position: {status['committed_position']}")
    print(f"source head:        {status.get('source_head')}")

    samples(topics, prefix)
    ok = replay_matches_source(config, conn, topics, DATABASE)
    print()
    print(
        "replaying the events gives the source tables exactly" if ok else "MISMATCH between events and source"
    )
    print(
        f"\nEvents are in {eventlog.relative_to(ROOT) if sink == 'local' else 'Kafka'}; "
        f"`.venv/bin/tidemark status --config .local/demo/connector.yaml` shows the state."
    )
    return 0 if ok else 1


def samples(topics: dict[str, list[Any]], prefix: str) -> None:
    orders = topics.get(f"{prefix}.{DATABASE}.orders", [])
    products = topics.get(f"{prefix}.{DATABASE}.products", [])
    update = next((v for _, v, _ in orders if v and v["op"] == "u"), None)
    key_change = next(((k, v, h) for k, v, h in products if h), None)
    print("\nsample update event (orders):")
    if update:
        shown = {k: update[k] for k in ("before", "after", "op", "transaction")}
        shown["source"] = {k: update["source"][k] for k in ("db", "table", "gtid", "file", "pos", "row")}
        print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    if key_change:
        key, _, headers = key_change
        new_key = orjson.loads(headers["__debezium.newkey"])
        new_key = new_key.get("payload", new_key)
        print(
            f"\nprimary-key change (products): delete of {key} with header __debezium.newkey={new_key}, "
            "its tombstone, then a create of the new key"
        )


if __name__ == "__main__":
    sys.exit(main())
