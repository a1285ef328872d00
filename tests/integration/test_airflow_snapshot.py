"""The ad-hoc snapshot DAG, run with `dag.test()` against the real MariaDB, streamer,
Spark (spark-submit through SparkSubmitOperator) and Delta: the form's request becomes a
signal, the chunk job stages windows, the deferred wait ends when the streamer has
released them, the merge writes Delta, and Delta equals the source. Bad forms are
refused before anything is sent."""

from __future__ import annotations

import pytest

from tests.support.airflow_dags import airflow_connector, load_dag, start_streamer, task_states
from tests.support.lakehouse import assert_delta_equals_source
from tests.support.snapshots import seed
from tests.support.streamer import admin, stop_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def form(database: str, **changes):
    return {
        "connector": f"test-{database}",
        "data_collections": [f"{database}\\.t"],
        "chunk_size": 150,
        "parallelism": 2,
        "release_mode": "lakehouse",
        **changes,
    }


def test_snapshot_dag_ends_with_delta_equal_to_the_source(
    tmp_path, monkeypatch, mariadb_admin_params, scratch_db, spark, capfd
):
    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        seed(cur, "t", 1000)
        seed(cur, "other", 10)
    connector = airflow_connector(tmp_path, scratch_db, monkeypatch)
    # The streamer (as its streamer DAG runs it) captures changes; the snapshot goes through it.
    proc = start_streamer(connector)
    try:
        with db.cursor() as cur:  # changes while the snapshot runs
            cur.execute("UPDATE t SET note = 'changed' WHERE id % 7 = 0")
            cur.execute("DELETE FROM t WHERE id % 11 = 0")
        dag = load_dag("tidemark_snapshot.py", "tidemark_snapshot")
        run = dag.test(run_conf=form(scratch_db))
        states = task_states(run)
        assert run.state == "success", states
        assert states["chunk_job"] == "success" and states["wait_released"] == "success"
    finally:
        stop_process(proc)
    assert_delta_equals_source(spark, str(tmp_path / "delta"), mariadb_admin_params, scratch_db, ["t"])
    published = run.get_task_instance("publish")
    assert published.state == "success"
    # The connection's password never reaches the task logs.
    out, err = capfd.readouterr()
    assert monkeypatch_password() not in out + err


def monkeypatch_password() -> str:
    import os

    from scripts import services

    return os.environ[services.CDC_PASSWORD_ENV]
