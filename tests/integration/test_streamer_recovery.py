"""Nothing is lost across stops: SIGTERM (no duplicates at all), the database going away
and coming back, a killed decoder, and a Kafka broker that goes away mid-stream. (`kill -9` inside a large transaction: the
conformance suite, tests/conformance/test_streaming.py.)"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.support.kafka import read_topic
from tests.support.streamer import (
    admin,
    kafka_connector,
    payloads,
    start_process,
    stop_process,
    wait_for,
    write_connector,
)

pytestmark = pytest.mark.integration


def decoder_processes(proc) -> list[int]:
    """The binlog decoder child processes of a streamer process."""
    try:
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except FileNotFoundError:
        return []
    pids = []
    for pid in children:
        with contextlib.suppress(FileNotFoundError):
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(int(pid))
    return pids


def status(connector) -> dict:
    return orjson.loads((connector.state / "status.json").read_bytes())


def table_t(params, database):
    """A connection to `database`, in which it made table t (an integer key alone)."""
    db = admin(params, database)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    return db


def insert(db, first: int, n: int) -> int:
    """Insert rows `first`..`first + n - 1` into t, one transaction each; the next id."""
    with db.cursor() as cur:
        for i in range(first, first + n):
            cur.execute("INSERT INTO t VALUES (%s)", (i,))
    return first + n


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def identity(event):
    """What must be identical between a delivery and its repeat (not the processing time)."""
    return (
        event["op"],
        repr(event["before"]),
        repr(event["after"]),
        event["transaction"]["id"],
        event["transaction"]["total_order"],
        event["transaction"]["transaction_rank"],
        event["source"]["pos"],
        event["source"]["row"],
    )


def test_sigterm_stops_cleanly_and_resumes_without_duplicates(tmp_path, mariadb_admin_params, scratch_db):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    c = write_connector(tmp_path, scratch_db)
    topic = f"{c.prefix}.{scratch_db}.t"
    for round_ in range(3):
        proc = start_process(c)
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        with db.cursor() as cur:
            for i in range(100):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (round_ * 1000 + i, i))
        wait_for(lambda r=round_: len(payloads(c, topic)) >= (r + 1) * 100, 60)
        assert stop_process(proc, signal.SIGTERM) == 0
        (c.state / "status.json").unlink()
    events = payloads(c, topic)
    assert len(events) == 300
    assert len({identity(e) for e in events}) == 300


@pytest.mark.exclusive  # stops the MariaDB every other test uses
def test_the_database_going_away_and_coming_back_loses_and_repeats_nothing(
    tmp_path, mariadb_admin_params, scratch_db
):
    """The server stops mid-stream (a restart, a failover): the streamer says it lost the
    connection, retries until the server is back and resumes from its committed offset,
    in a new binlog file where table ids are handed out again."""
    from scripts import services

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.execute("CREATE TABLE u (id INT PRIMARY KEY, w VARCHAR(10))")
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6319})
    log = tmp_path / "streamer.log"
    proc = start_process(c, log=log)
    server = services.SERVICES["mariadb"]
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        with db.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(50)])
            cur.execute("INSERT INTO u VALUES (1, 'one')")
        server.stop()
        try:
            wait_for(lambda: "cannot connect to" in log.read_text(), 30, message="the streamer retrying")
            assert proc.poll() is None
        finally:
            server.start()
        db = admin(mariadb_admin_params, scratch_db)
        with db.cursor() as cur:
            cur.execute("INSERT INTO u VALUES (2, 'two')")  # u first now: its table id differs
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, i) for i in range(50, 100)])
        wait_for(lambda: len(payloads(c, f"{c.prefix}.{scratch_db}.t")) >= 100, 60)
        assert stop_process(proc, signal.SIGTERM) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    t = payloads(c, f"{c.prefix}.{scratch_db}.t")
    assert sorted(e["after"]["id"] for e in t) == list(range(100))
    assert [e["after"] for e in payloads(c, f"{c.prefix}.{scratch_db}.u")] == [
        {"id": 1, "w": "one"},
        {"id": 2, "w": "two"},
    ]
    assert "lost the binlog connection" in log.read_text()


def test_a_killed_decoder_process_is_restarted_from_the_committed_offset(
    tmp_path, mariadb_admin_params, scratch_db
):
    """The binlog is decoded in a child process; if it dies the streamer does not: it
    restarts reading from its committed offset and nothing is lost."""
    db = table_t(mariadb_admin_params, scratch_db)
    c = write_connector(tmp_path, scratch_db)
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)

    def decoder_pids():
        return decoder_processes(proc)

    try:
        wait_for(lambda: (c.state / "status.json").exists() and decoder_pids(), 30)
        with db.cursor() as cur:
            for i in range(100):
                cur.execute("INSERT INTO t VALUES (%s)", (i,))
        (first,) = decoder_pids()
        os.kill(first, signal.SIGKILL)
        with db.cursor() as cur:
            for i in range(100, 200):
                cur.execute("INSERT INTO t VALUES (%s)", (i,))
        wait_for(lambda: len({e["after"]["id"] for e in payloads(c, topic)}) >= 200, 60)
        assert proc.poll() is None, "the streamer survives its decoder"
        assert decoder_pids() and decoder_pids() != [first], "a new decoder process reads on"
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    ids = [e["after"]["id"] for e in payloads(c, topic)]
    assert sorted(set(ids)) == list(range(200))
    assert "decoder process exited" in c.path.with_suffix(".log").read_text()


@pytest.mark.parametrize("when", ["streaming", "decoder starting"])
def test_sigterm_to_the_process_group_is_a_clean_stop(tmp_path, mariadb_admin_params, scratch_db, when):
    """Airflow may signal the streamer's whole process group, decoder included: that is a
    deliberate stop (status stopped, exit 0, offsets committed), not a decoder failure."""
    db = table_t(mariadb_admin_params, scratch_db)
    c = write_connector(tmp_path, scratch_db)
    topic = f"{c.prefix}.{scratch_db}.t"
    # A first run fixes the start position in the offsets.
    proc = start_process(c)
    wait_for(lambda: (c.state / "status.json").exists(), 30)
    assert stop_process(proc) == 0
    written = 0
    for _ in range(2):
        written = insert(db, written, 100)  # read by the next run, from the committed offset
        proc = start_process(c, new_session=True)
        try:
            if when == "decoder starting":  # the decoder is still importing and connecting
                wait_for(lambda p=proc: decoder_processes(p), 30, interval=0.005, message="a decoder")
            else:
                wait_for(lambda p=proc: (c.state / "status.json").exists() and decoder_processes(p), 30)
                written = insert(db, written, 100)  # stopped while these stream
            decoders = decoder_processes(proc)
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        doc = status(c)
        assert doc["state"] == "stopped" and "error" not in doc, doc
        assert decoders and not any(alive(pid) for pid in decoders), "the decoder was shut down"
        (c.state / "status.json").unlink()
    assert "decoder process exited" not in c.path.with_suffix(".log").read_text()
    # Nothing lost, nothing repeated: each start resumed exactly where the stop committed.
    proc = start_process(c)
    try:
        wait_for(lambda: len(payloads(c, topic)) >= written, 60)
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert sorted(e["after"]["id"] for e in payloads(c, topic)) == list(range(written))


def test_a_decoder_killed_on_its_own_is_a_failure(tmp_path, mariadb_admin_params, scratch_db):
    """Only a stop the streamer was asked for is clean: a decoder that dies by itself
    (here kill -9, with no retries allowed) fails the streamer and says why."""
    c = write_connector(tmp_path, scratch_db, {"errors.max.retries": 0})
    proc = start_process(c, new_session=True)
    try:
        wait_for(lambda: (c.state / "status.json").exists() and decoder_processes(proc), 30)
        (decoder,) = decoder_processes(proc)
        os.kill(decoder, signal.SIGKILL)
        assert proc.wait(60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    doc = status(c)
    assert doc["state"] == "failed", doc
    assert "the binlog decoder process exited unexpectedly" in doc["error"]


LEAVE_SOURCE_OPEN = """
import sys
from cdc_core.config.connector_config import load_config
from cdc_core.pipeline.streamer import Streamer

source = Streamer(load_config(sys.argv[1]))._new_source()
source.open(None)
print(source._decoder.pid, flush=True)
# Exits without source.close(), as after an unexpected error.
"""


def test_a_source_left_open_does_not_keep_its_process_from_exiting(tmp_path, scratch_db):
    """multiprocessing's exit handler SIGTERMs a daemonic child and waits for it; the
    decoder ignores SIGTERM, so it is killed first instead."""
    c = write_connector(tmp_path, scratch_db)
    proc = subprocess.Popen(
        [sys.executable, "-c", LEAVE_SOURCE_OPEN, str(c.path)], stdout=subprocess.PIPE, env=os.environ.copy()
    )
    try:
        assert proc.stdout is not None
        decoder = int(proc.stdout.readline())
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not alive(decoder)


@pytest.mark.exclusive  # stops the Kafka broker every other test uses
def test_kafka_broker_outage_blocks_and_loses_nothing(
    tmp_path, mariadb_admin_params, scratch_db, kafka_bootstrap
):
    from scripts.services import Kafka

    db = table_t(mariadb_admin_params, scratch_db)
    c = kafka_connector(tmp_path, scratch_db, kafka_bootstrap, "outage")
    topic = f"{c.prefix}.{scratch_db}.t"
    proc = start_process(c)
    broker = Kafka()
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        with db.cursor() as cur:
            for i in range(50):
                cur.execute("INSERT INTO t VALUES (%s)", (i,))
        time.sleep(2)
        broker.stop()
        with db.cursor() as cur:
            for i in range(50, 150):
                cur.execute("INSERT INTO t VALUES (%s)", (i,))
        time.sleep(3)
        assert proc.poll() is None, "the streamer must wait for the broker, not exit"
    finally:
        broker.start()

    def ids():
        return [value["payload"]["after"]["id"] for _, value in read_topic(kafka_bootstrap, topic) if value]

    try:
        wait_for(lambda: len(set(ids())) >= 150, 120, interval=1)
        assert stop_process(proc) == 0
        assert sorted(set(ids())) == list(range(150))
    finally:
        if proc.poll() is None:
            proc.kill()
