"""Production state: events to Kafka, offsets in a compacted Kafka topic, heartbeats, and
`tidemark status` reading the committed position back; a restart resumes from the Kafka
offsets with no duplicates."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cdc_core.offsets.store import KafkaOffsetStore
from tests.support.kafka import read_topic
from tests.support.snapshots import reached
from tests.support.streamer import admin, kafka_connector, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration


def status(connector, *flags):
    out = subprocess.run(
        [sys.executable, "-m", "cdc_core.cli", "status", "--config", str(connector.path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout


def test_kafka_offsets_heartbeats_status_and_resume(
    tmp_path, mariadb_admin_params, scratch_db, kafka_bootstrap
):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    c = kafka_connector(
        tmp_path,
        scratch_db,
        kafka_bootstrap,
        "kstate",
        {"offset.storage": "kafka", "heartbeat.interval.ms": 200},
    )
    prefix = c.prefix
    topic = f"{prefix}.{scratch_db}.t"

    def ids():
        return [v["payload"]["after"]["id"] for _, v in read_topic(kafka_bootstrap, topic) if v]

    def gtid_now():
        with db.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            return cur.fetchone()[0]

    def committed_gtids():
        store = KafkaOffsetStore(kafka_bootstrap, f"{prefix}.offsets", c.config().name)
        try:
            offset = store.load()
        finally:
            store.close()
        return offset and offset["source"].get("gtids")

    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="streamer start")
        with db.cursor() as cur:
            for i in range(20):
                cur.execute("INSERT INTO t VALUES (%s, 'a')", (i,))
        head = gtid_now()
        wait_for(lambda: reached(committed_gtids(), head), 60, interval=0.5, message="offsets in Kafka")
        time.sleep(1)  # a few heartbeat intervals
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

    assert ids() == list(range(20))
    assert not (c.state / "offsets.json").exists(), "offsets belong in Kafka with offset.storage=kafka"
    beats = read_topic(kafka_bootstrap, f"__debezium-heartbeat.{prefix}")
    assert len(beats) >= 3
    assert all(k == {"serverName": prefix} and v["ts_ms"] > 0 for k, v in beats)

    committed = committed_gtids()  # (at or past `head`: other tests write to the server too)
    doc = json.loads(status(c, "--json"))
    assert doc["committed_offset"]["source"]["gtids"] == committed and reached(committed, head)
    assert doc["source_head"]  # it asked the server
    assert f"gtids={committed}" in status(c, "--offline")

    with db.cursor() as cur:
        for i in range(20, 30):
            cur.execute("INSERT INTO t VALUES (%s, 'b')", (i,))
    head = gtid_now()
    proc = start_process(c)
    try:
        wait_for(lambda: reached(committed_gtids(), head), 60, interval=0.5, message="resumed offsets")
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert ids() == list(range(30)), (
        "a restart resumes from the Kafka offsets: nothing repeated, nothing lost"
    )
