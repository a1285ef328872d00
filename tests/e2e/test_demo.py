"""`make demo`'s main job end to end through a running Airflow: the demo's streamer DAG
captures a live workload, an ad-hoc snapshot triggered through the REST API (the trigger
form's fields as conf) brings the rows that existed before capture, the merge lands
everything in Delta, and every Delta table equals its source table (rows and checksum).
Run twice in a row, the demo starts over cleanly (it stops its earlier streamer first)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cdc_core.config.connector_config import load_config
from demo import run, sources, streamer_dag
from scripts import services
from tests.support.streamer import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

TABLES = ("customers", "order_lines", "orders", "products")


def run_demo(history: int, orders: int, source: str = "mysql") -> str:
    """What a user sees of the demo: its output and its errors as they come, in one stream."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "demo.run",
            "--history",
            str(history),
            "--orders",
            str(orders),
            "--source",
            source,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-6000:]
    return result.stdout


def side_by_side(out: str) -> dict[str, list[str]]:
    """Each table's line of the printed comparison, split into its fields."""
    return {m[1]: m[0].split() for m in re.finditer(r"^demo_shop\.(\w+)\s.*$", out, re.MULTILINE)}


def test_the_vitess_demo_runs_beside_the_mysql_one_and_delta_equals_the_union_of_the_shards(
    airflow_server, mariadb_params
):
    """`make demo DEMO=vitess`: the same job on connectors/demo_vitess.yaml, its streamer
    DAG generated from that file, the snapshot form naming it, the shop's rows spread over
    two shards behind the VTGate double (the `vtgate` service)."""
    vtgate = services.SERVICES["vtgate"]
    started = vtgate.start()
    config = load_config(sources.VitessDemo.connector_file)
    try:
        out = run_demo(20, 40, "vitess")
        compared = side_by_side(out)
        assert sorted(compared) == sorted(TABLES), out[-3000:]
        for table, (_name, source_rows, source_sum, delta_rows, delta_sum, equal) in compared.items():
            assert (source_rows, source_sum) == (delta_rows, delta_sum) and equal == "yes", table
            assert int(source_rows) > 0
        assert "Delta equals the source: every table has the same rows and checksum" in out
        per_shard = dict(re.findall(r"(-80|80-) ([\d,]+)", re.search(r"events per shard: (.*)", out)[1]))
        assert sorted(per_shard) == ["-80", "80-"] and all(
            int(n.replace(",", "")) > 0 for n in per_shard.values()
        )
        assert "schema change: ALTER TABLE customers ADD COLUMN phone" in out
        assert "__debezium.newkey={'sku': 'SKU-RENAMED'}" in out
        [snapshot] = [
            r
            for r in airflow_server.runs("tidemark_snapshot", states=("success",))
            if r["dag_run_id"] in out and r["conf"].get("connector") == "demo_vitess"
        ]
        assert snapshot["conf"] == run.snapshot_form(config)
        # (at a slot's handover the streamer is stopped for a moment)
        demo = wait_for(lambda: demo_status(airflow_server, "running", "demo_vitess"), 120, 1, "its streamer")
        assert demo["alerts"] == []
        finished = next(s for s in demo["snapshots"] if s["state"] == "finished")
        # one window sequence per table and shard
        assert sorted(t["table"] for t in finished["tables"]) == sorted(
            f"demo_shop.{t}@{shard}" for t in TABLES for shard in ("-80", "80-")
        )
    finally:
        if services.Airflow().running():
            streamer_dag.stop(airflow_server, config)
        if started:
            vtgate.stop()


def test_the_demo_runs_the_main_job_through_airflow_and_delta_equals_the_source(
    airflow_server, mariadb_params
):
    config = load_config(run.CONNECTOR_FILE)
    stream_dag = streamer_dag.stream_dag(config)
    began = datetime.now(UTC)
    try:
        run_demo(20, 30)  # a first run leaves its streamer running under Airflow, as a user's would
        out = run_demo(60, 120)
        compared = side_by_side(out)
        assert sorted(compared) == sorted(TABLES), out[-3000:]
        for table, (_name, source_rows, source_sum, delta_rows, delta_sum, equal) in compared.items():
            assert (source_rows, source_sum) == (delta_rows, delta_sum) and equal == "yes", table
            assert int(source_rows) > 0
        assert "Delta equals the source: every table has the same rows and checksum" in out
        assert "schema change: ALTER TABLE customers ADD COLUMN phone" in out
        assert "__debezium.newkey={'sku': 'SKU-RENAMED'}" in out
        assert f"Airflow UI:   {airflow_server.url}  (login admin / " in out

        # It went through Airflow: the snapshot run carries the form, the streamer DAG runs.
        [snapshot] = [
            r
            for r in airflow_server.runs("tidemark_snapshot", states=("success",))
            if r["dag_run_id"] in out and r["conf"].get("connector") == "demo"
        ]
        assert snapshot["conf"] == run.snapshot_form(config)
        assert airflow_server.api("GET", f"/dags/{stream_dag}")["is_paused"] is False
        # The run the demo names is the one running the streamer, and none waits queued
        # behind it; or, when the demo outlasted that run's slot (a slow machine), the run
        # ended with its slot, cleanly, and the next slot's scheduled run took the streamer.
        [printed] = re.findall(rf"streamer running: {stream_dag} run (\S+)", out)
        running = streaming_run(airflow_server, stream_dag)
        if running["dag_run_id"] != printed:
            named = airflow_server.api("GET", f"/dags/{stream_dag}/dagRuns/{printed}")
            assert named["state"] == "success", named
            assert running["run_type"] == "scheduled" and running["start_date"] >= named["end_date"], running
        # (a scheduled run queues behind it at its slot's boundary, as every slot does)
        assert not [
            r for r in airflow_server.runs(stream_dag, states=("queued",)) if r["run_type"] != "scheduled"
        ]
        # Two demos in a row leave no failed task (the first demo's runs ended cleanly) and no alert.
        runs = [
            r
            for r in airflow_server.runs(stream_dag, states=("success", "failed", "running"))
            # (queued_at: a scheduled run's run_after is its interval's end, before the test)
            if datetime.fromisoformat(r["queued_at"]) >= began
        ]
        assert len(runs) >= 2
        failed = {r["dag_run_id"]: airflow_server.task_states(stream_dag, r["dag_run_id"]) for r in runs}
        assert not [f for f in failed.values() if "failed" in f.values()], failed
        demo = wait_for(lambda: demo_status(airflow_server, "running"), 120, 1, "the streamer running")
        assert demo["alerts"] == []
        # Every figure is said with what it counts, and they agree: the transactions the
        # workload ran, the change events the streamer counted, the records in the log.
        workload = int(re.search(r"workload: (\d+) transactions", out)[1])
        begins, ends, source, marks = map(int, re.search(
            r"transactions: (\d+) BEGIN / (\d+) END events: (\d+) source transactions with captured "
            r"changes and (\d+) snapshot high watermarks", out).groups())  # fmt: skip
        inside, changes, releases = (
            int(n.replace(",", ""))
            for n in re.search(
                r"records inside them: ([\d,]+) = ([\d,]+) change events \+ (\d+) snapshot release", out
            ).groups()
        )
        assert begins == ends == source + marks and source == workload
        assert inside == changes + releases and releases == marks
        # (the status counts the events of the streamer running now; one whose slot ended
        # said its count in its task's log)
        assert changes == demo["streamer"]["events_total"] + counted_before(
            airflow_server, stream_dag, printed, running
        )
        windows = sum(
            t["windows_total"]
            for t in next(s for s in demo["snapshots"] if s["state"] == "finished")["tables"]
        )
        assert marks == windows
        assert "no table has `r` events" in out
        # Spark's JVM logs to a file, not the terminal; progress advances with time stamps.
        assert "WARN" not in out and "log4j" not in out
        assert re.search(
            r"^\d\d:\d\d:\d\d     snapshot: \d+/\d+ windows, [\d,]+ rows released", out, re.MULTILINE
        )
        finished = next(s for s in demo["snapshots"] if s["state"] == "finished")
        assert sorted(t["table"] for t in finished["tables"]) == [f"demo_shop.{t}" for t in TABLES]
        assert all(t["windows_done"] == t["windows_total"] > 0 for t in finished["tables"])
        assert sorted(d["table"] for d in demo["delta_tables"]) == [f"demo_shop.{t}" for t in TABLES]
        assert_make_down_waits_for_every_process(airflow_server)
    finally:
        if services.Airflow().running():
            streamer_dag.stop(airflow_server, config)  # leave no streamer running


def streaming_run(airflow_server, dag_id: str) -> dict:
    """The DAG's one running run whose `stream` task runs the streamer."""

    def running() -> dict | None:
        runs = airflow_server.runs(dag_id, states=("running",))
        assert len(runs) <= 1, runs  # the streamer DAG runs one run at a time
        if runs and airflow_server.task_states(dag_id, runs[0]["dag_run_id"]).get("stream") == "running":
            return runs[0]
        return None

    # (at a slot's handover no run is running for a moment: the next starts when one ends)
    return wait_for(running, 180, 1, f"a run of {dag_id} streaming")


def counted_before(airflow_server, dag_id: str, printed: str, running: dict) -> int:
    """The change events the streamers of the runs from `printed` up to `running` (not
    included) said they had sent when their slots ended: none when `printed` runs still."""
    if running["dag_run_id"] == printed:
        return 0
    began = airflow_server.api("GET", f"/dags/{dag_id}/dagRuns/{printed}")["start_date"]
    ended = [
        r["dag_run_id"] for r in airflow_server.runs(dag_id, states=("success",)) if r["start_date"] >= began
    ]
    logs = Path(os.environ["AIRFLOW_HOME"]) / "logs" / f"dag_id={dag_id}"
    counts = {
        run_id: re.findall(
            r"stopped: (\d+) events",
            "".join(
                p.read_text(errors="replace")
                for p in logs.glob(f"run_id={run_id}/task_id=stream/attempt=*.log")
            ),
        )
        for run_id in ended
    }
    assert printed in counts and all(len(c) == 1 for c in counts.values()), counts
    return sum(int(c[0]) for c in counts.values())


def demo_status(airflow_server, state: str, name: str = "demo") -> dict | None:
    """A demo connector on the status page, when its streamer is in `state`."""
    with airflow_server.client() as client:
        status = client.get("/tidemark/status.json").json()
    demo = next(c for c in status["connectors"] if c["name"] == name)
    return demo if demo["streamer"]["state"] == state else None


def assert_make_down_waits_for_every_process(airflow_server):
    """`make down` (scripts.services down) with the demo's streamer running under a worker:
    when it returns, no process Airflow started lives any more (a worker and its streamer
    used to outlive it by a minute)."""
    airflow = services.Airflow()
    pid = airflow.pid()
    assert pid is not None
    tree = {pid, *services._descendants(pid)}
    assert any("cdc_core.cli" in _cmdline(p) for p in tree), "no streamer under Airflow to stop"
    subprocess.run([sys.executable, "-m", "scripts.services", "down", "airflow"], check=True, timeout=300)
    alive = {p: _cmdline(p) for p in tree if services._pid_alive(p)}
    assert not alive, f"still running after `make down`: {alive}"


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
