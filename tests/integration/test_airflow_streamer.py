"""The streamer DAG: its `stream` task supervises the streamer, restarts it after a
kill -9 with nothing lost, refuses to start a second streamer while one holds the lease,
and its health check reports running and lag, or the reason it is unhealthy."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import orjson
import pytest

from tests.support.airflow_dags import airflow_connector, load_dag, task_states
from tests.support.snapshots import seed
from tests.support.streamer import admin, payloads, start_process, stop_process, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def streamer_pid(connector) -> int | None:
    try:
        doc = orjson.loads((connector.state / "status.json").read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None
    return doc["pid"] if doc.get("state") == "running" else None


def test_a_killed_streamer_is_restarted_by_its_dag_and_loses_nothing(
    tmp_path, monkeypatch, mariadb_admin_params, scratch_db
):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 0)
    # One-minute slots: the run supervises the streamer for 40 s.
    connector = airflow_connector(tmp_path, scratch_db, monkeypatch, {"airflow.streamer.interval.minutes": 1})
    dag = load_dag("tidemark_streamers.py", f"tidemark_stream_test-{scratch_db}")
    killed: list[int] = []
    written = {"rows": 0}

    def workload_and_kill() -> None:
        wait_for(lambda: streamer_pid(connector) is not None, 60, message="streamer running")
        conn = admin(mariadb_admin_params, scratch_db)
        with conn.cursor() as cur:
            for i in range(1, 301):
                cur.execute("INSERT INTO t VALUES (%s, 0, 'x')", (i,))
                written["rows"] = i
                if i == 150:
                    pid = streamer_pid(connector)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    wait_for(
                        lambda pid=pid: streamer_pid(connector) not in (None, pid),
                        30,
                        message="a restarted streamer",
                    )
                time.sleep(0.01)
        conn.close()

    worker = threading.Thread(target=workload_and_kill, daemon=True)
    worker.start()
    run = dag.test(mark_success_pattern="^health$")
    worker.join(60)
    assert killed, "the workload did not get to kill the streamer"
    states = task_states(run)
    assert run.state == "success", states
    inserted = sorted(e["after"]["id"] for e in payloads(connector, f"{connector.prefix}.{scratch_db}.t"))
    # Every row arrived (the restarted streamer resumed from the committed offsets).
    assert sorted(set(inserted)) == list(range(1, written["rows"] + 1))
    assert len(inserted) >= written["rows"]  # at-least-once across the kill: nothing lost


def test_the_lease_stops_a_second_streamer(tmp_path, monkeypatch, mariadb_admin_params, scratch_db):
    from airflow.sdk.exceptions import AirflowException

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 5)
    connector = airflow_connector(tmp_path, scratch_db, monkeypatch)
    monkeypatch.setenv("TIDEMARK_TEST_SOURCE_PASSWORD", os.environ["TIDEMARK_DB_PASSWORD"])
    first = start_process(connector)
    try:
        wait_for(lambda: streamer_pid(connector) is not None, 30, message="first streamer")
        dag = load_dag("tidemark_streamers.py", f"tidemark_stream_test-{scratch_db}")
        task = dag.get_task("stream")
        started = time.monotonic()
        with pytest.raises(AirflowException, match="another streamer holds the lease"):
            task.execute(context={})
        assert time.monotonic() - started < 60, "the second streamer must be refused at once"
        assert first.poll() is None, "the first streamer must keep running"
        assert streamer_pid(connector) == first.pid
    finally:
        stop_process(first)


def test_health_reports_a_running_streamer_and_the_reason_for_a_stopped_one(
    tmp_path, monkeypatch, mariadb_admin_params, scratch_db
):
    from tidemark_airflow.triggers.streamer import StreamerHealthTrigger

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 5)
    connector = airflow_connector(tmp_path, scratch_db, monkeypatch)
    monkeypatch.setenv("TIDEMARK_TEST_SOURCE_PASSWORD", os.environ["TIDEMARK_DB_PASSWORD"])

    async def first_event(timeout: float):
        trigger = StreamerHealthTrigger(str(connector.path), 60, timeout, poll_seconds=0.2, settle_seconds=0)
        async for event in trigger.run():
            return event.payload

    stopped = asyncio.run(first_event(1))
    assert stopped["healthy"] is False and "never started" in stopped["problems"][0]

    proc = start_process(connector)
    try:
        wait_for(lambda: streamer_pid(connector) is not None, 30, message="streamer")
        dag = load_dag("tidemark_streamers.py", f"tidemark_stream_test-{scratch_db}")
        run = dag.test(mark_success_pattern="^stream$")
        assert task_states(run)["health"] == "success"
    finally:
        stop_process(proc)
    after = asyncio.run(first_event(1))
    assert after["healthy"] is False and after["state"] == "stopped"
