"""`make demo`'s main job end to end through a running Airflow: the demo's streamer DAG
captures a live workload, an ad-hoc snapshot triggered through the REST API (the trigger
form's fields as conf) brings the rows that existed before capture, the merge lands
everything in Delta, and every Delta table equals its source table (rows and checksum).
Run twice in a row, the demo starts over cleanly (it stops its earlier streamer first)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from cdc_core.config.connector_config import load_config
from demo import run, streamer_dag

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

TABLES = ("customers", "order_lines", "orders", "products")


def run_demo(history: int, orders: int) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "demo.run", "--history", str(history), "--orders", str(orders)],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result.stdout


def side_by_side(out: str) -> dict[str, list[str]]:
    """Each table's line of the printed comparison, split into its fields."""
    return {m[1]: m[0].split() for m in re.finditer(r"^demo_shop\.(\w+)\s.*$", out, re.MULTILINE)}


def test_the_demo_runs_the_main_job_through_airflow_and_delta_equals_the_source(
    airflow_server, mariadb_params
):
    config = load_config(run.CONNECTOR_FILE)
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
        stream_dag = streamer_dag.stream_dag(config)
        assert airflow_server.api("GET", f"/dags/{stream_dag}")["is_paused"] is False
        assert airflow_server.runs(stream_dag, states=("running",))
        with airflow_server.client() as client:
            status = client.get("/tidemark/status.json").json()
        demo = next(c for c in status["connectors"] if c["name"] == "demo")
        assert demo["streamer"]["state"] == "running"
        finished = next(s for s in demo["snapshots"] if s["state"] == "finished")
        assert sorted(t["table"] for t in finished["tables"]) == [f"demo_shop.{t}" for t in TABLES]
        assert all(t["windows_done"] == t["windows_total"] > 0 for t in finished["tables"])
        assert sorted(d["table"] for d in demo["delta_tables"]) == [f"demo_shop.{t}" for t in TABLES]
    finally:
        streamer_dag.stop(airflow_server, config)  # leave no streamer running
