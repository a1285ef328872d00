"""Tidemark through a running Airflow (`airflow standalone`): DAG runs triggered through
the REST API as the UI does, executed by the scheduler's real workers, and the status
page served by the api-server.

- The status page (HTML and JSON) shows a connector with real state: its streamer
  running then stopped, its committed position, the windows done/total of a snapshot the
  snapshot DAG ran (Spark chunk job, deferred wait, merge), and its Delta table's last
  commit; it refuses anonymous callers; Chromium renders it, alone and inside Airflow's
  UI as the "Tidemark" view (screenshots in .local/screenshots/).
- A task that writes a connector's source password into its log, three ways, leaves ***
  in the log the worker stored and the UI shows (the masking `dag.test()` cannot show),
  whether the password came from the Airflow connection or from the worker's
  environment (a connector without `airflow.conn.id`: only Tidemark's hook masks it).
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pytest

from cdc_core.cli import status_document
from scripts import services
from tests.support.chromium import Chromium
from tests.support.snapshots import seed
from tests.support.streamer import Connector, admin, start_process, stop_process, wait_for, write_connector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

SCREENSHOTS = services.LOCAL / "screenshots"


@pytest.fixture
def served_connector(airflow_server, tmp_path, scratch_db):
    """A connector of `scratch_db` in the running Airflow's connectors folder, its source
    password from the local stack's Airflow connection; removed afterwards."""
    connector = write_connector(
        tmp_path,
        scratch_db,
        {
            "signal.data.collection": "tidemark.debezium_signal",
            "airflow.conn.id": "tidemark_demo_mariadb",
            "lakehouse.delta.root": str(tmp_path / "delta"),
            "lakehouse.merge.checkpoint": str(tmp_path / "merge-checkpoint"),
            "lakehouse.snapshot.staging": str(tmp_path / "staging"),
        },
    )
    served = airflow_server.connectors / f"{connector.config().name}.yaml"
    connector.path.rename(served)
    connector.path = served
    yield connector
    served.unlink(missing_ok=True)


def connector_entry(airflow_server, name: str) -> dict:
    with airflow_server.client() as client:
        response = client.get("/tidemark/status.json")
    assert response.status_code == 200, response.text
    return next(c for c in response.json()["connectors"] if c["name"] == name)


def test_the_status_page_shows_streamer_position_snapshot_windows_and_last_merge(
    airflow_server, served_connector: Connector, mariadb_admin_params, scratch_db
):
    name = served_connector.config().name
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 300)
    streamer = start_process(served_connector)
    try:
        wait_for(
            lambda: (served_connector.state / "status.json").exists(), 60, message="the streamer to start"
        )
        with db.cursor() as cur:  # change events the streamer counts
            cur.execute("UPDATE t SET v = v + 1 WHERE id <= 10")
        running = connector_entry(airflow_server, name)
        assert running["streamer"]["state"] == "running"
        assert running["streamer"]["pid"] == streamer.pid

        # The ad-hoc snapshot exactly as the UI's trigger form sends it, once the
        # dag-processor has put the new connector into the form's choices.
        airflow_server.wait_for_details(
            "tidemark_snapshot",
            lambda details: name in details["params"]["connector"]["schema"]["enum"],
            300,
            f"the snapshot form to offer {name}",
        )
        airflow_server.unpause("tidemark_snapshot")
        form = {
            "connector": name,
            "data_collections": [f"{scratch_db}\\.t"],
            "snapshot_type": "incremental",
            "additional_conditions": [],
            "surrogate_key": None,
            "chunk_size": 100,
            "parallelism": 2,
            "release_mode": "lakehouse",
        }
        run_id = airflow_server.trigger("tidemark_snapshot", form)
        state = airflow_server.wait_for_run("tidemark_snapshot", run_id, timeout=900)
        assert state == "success", airflow_server.task_states("tidemark_snapshot", run_id)
    finally:
        stop_process(streamer)

    entry = connector_entry(airflow_server, name)
    expected = status_document(served_connector.config(), check_source=False)
    assert entry["streamer"]["state"] == "stopped"
    assert entry["streamer"]["events_total"] == expected["streamer"]["events_total"] >= 10
    assert entry["committed_position"] == expected["committed_position"]
    assert "gtids=" in entry["committed_position"]
    [snapshot] = [s for s in entry["snapshots"] if s["state"] == "finished"]
    [table] = snapshot["tables"]
    assert table["table"] == f"{scratch_db}.t"
    # 300 rows in chunks of 100: at least three windows, every one of them done, as
    # the committed offsets say.
    [offsets_table] = expected["snapshots"]["finished"][-1]["tables"]
    windows = offsets_table["windows_total"]
    assert windows >= 3 and table["windows_total"] == windows and table["windows_done"] == windows
    assert table["rows_released"] == 300
    [delta] = entry["delta_tables"]
    log = Path(delta["path"]) / "_delta_log"
    newest = max(log.glob("[0-9]*.json"))
    commit = next(
        json.loads(line)["commitInfo"] for line in newest.read_text().splitlines() if "commitInfo" in line
    )
    assert delta["table"] == f"{scratch_db}.t"
    assert delta["last_commit"]["version"] == int(newest.stem)
    assert delta["last_commit"]["operation"] == commit["operation"]

    with airflow_server.client() as client:
        page = client.get("/tidemark/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    for shown in (
        name,
        expected["committed_position"],
        f"{windows}/{windows}",
        f"{scratch_db}.t",
        commit["operation"],
    ):
        assert html.escape(shown) in text, f"{shown!r} is not on the page"
    password = os.environ[services.CDC_PASSWORD_ENV]
    leaked = password in text or password in json.dumps(entry)
    assert not leaked, "the source password appears on the status page"

    # In a browser: the page alone, then inside Airflow's UI as the Tidemark view.
    with Chromium() as browser:
        browser.open(f"{airflow_server.url}/tidemark/", cookies={"_token": airflow_server.token})
        rendered = browser.text()
        assert name in rendered and f"{windows}/{windows}" in rendered and f"{scratch_db}.t" in rendered
        browser.screenshot(SCREENSHOTS / "status-page.png")
        browser.open(f"{airflow_server.url}/plugin/tidemark", cookies={"_token": airflow_server.token})
        wait_for(
            lambda: browser.evaluate("document.querySelector('iframe') !== null"),
            60,
            interval=1,
            message="Airflow's UI to show the Tidemark view",
        )
        assert browser.evaluate("new URL(document.querySelector('iframe').src).pathname") == "/tidemark/"
        wait_for(lambda: "Tidemark" in browser.text(), 60, interval=1, message="the UI's navigation")
        browser.screenshot(SCREENSHOTS / "status-page-in-airflow.png")


def test_the_status_page_refuses_anonymous_callers(airflow_server):
    with airflow_server.client(authenticated=False) as client:
        assert client.get("/tidemark/status.json").status_code == 401
        browser = client.get("/tidemark/", headers={"Accept": "text/html"})
        assert browser.status_code == 303
        assert browser.headers["location"].startswith("/auth/login")
        with_bad_token = client.get("/tidemark/status.json", headers={"Authorization": "Bearer not-a-token"})
        assert with_bad_token.status_code in (401, 403)


@pytest.mark.parametrize("password_from", ["connection", "environment"])
def test_a_task_log_written_by_a_real_worker_masks_the_source_password(
    airflow_server, tmp_path, password_from
):
    connector = "demo"  # its password comes from the Airflow connection tidemark_demo_mariadb
    served = None
    if password_from == "environment":
        connector = f"mask-env-{tmp_path.name[-12:]}"
        made = write_connector(tmp_path, "mask_check", {"name": connector})
        served = airflow_server.connectors / f"{connector}.yaml"
        made.path.rename(served)
    dag_id = "tidemark_mask_check"
    try:
        airflow_server.wait_for_dag(dag_id)
        airflow_server.unpause(dag_id)
        run_id = airflow_server.trigger(dag_id, {"connector": connector})
        state = airflow_server.wait_for_run(dag_id, run_id, timeout=600)
    finally:
        if served is not None:
            served.unlink()
    assert state == "success", airflow_server.task_states(dag_id, run_id)

    password = os.environ[services.CDC_PASSWORD_ENV]
    served_log = airflow_server.task_log(dag_id, run_id, "log_the_password")
    stored_log = "\n".join(
        p.read_text(errors="replace")
        for p in (services.LOCAL / "airflow" / "logs").glob(f"dag_id={dag_id}/run_id={run_id}/**/*.log")
    )
    assert stored_log, "the worker stored no log file for the task"
    for where, log in (("served by the REST API", served_log), ("stored by the worker", stored_log)):
        leaked = password in log
        assert not leaked, f"the password appears in the task log {where}"
        for marker in ("MASKCHECK logger ***", "MASKCHECK stdout ***", "MASKCHECK child ***"):
            assert marker in log, f"{marker!r} missing from the log {where}:\n{log[-3000:]}"
