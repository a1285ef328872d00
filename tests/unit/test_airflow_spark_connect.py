"""A connector that names a Spark Connect connection gets its chunk job run on the worker
attached to that server, the URL (with its token) in the job's environment and never on
its command line; its other jobs, and connectors without one, are submitted."""

from __future__ import annotations

import json
import sys

import pytest

from spark_jobs.connect_server import REMOTE_ENV

FILE = (
    "name: shop\nconnector.class: mysql\ntopic.prefix: shop\ndatabase.hostname: db.internal\n"
    "database.user: cdc\ndatabase.server.id: 7\n"
)


@pytest.fixture
def connector(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(tmp_path))
    monkeypatch.setenv(
        "AIRFLOW_CONN_SHOP_CONNECT",
        json.dumps(
            {"conn_type": "spark_connect", "host": "spark.internal", "port": 15123, "password": "tok3n"}
        ),
    )

    def write(extra: str = "") -> str:
        (tmp_path / "shop.yaml").write_text(FILE + extra)
        return "shop"

    return write


def settings(name: str) -> dict:
    from tidemark_airflow.operators.spark_jobs import chunk_job_args, job_submission

    return job_submission(name, chunk_job_args, ["--signal", "snap-1", "--parallelism", "4"])


def test_the_chunk_job_runs_attached_with_the_url_in_its_environment_only(connector):
    from tidemark_airflow.operators.spark_jobs import attached_command

    command, env = attached_command(
        "incremental_snapshot", settings(connector("airflow.spark.connect.conn.id: shop_connect\n"))
    )
    assert command[:3] == [sys.executable, "-m", "spark_jobs.incremental_snapshot"]
    assert command[command.index("--signal") + 1] == "snap-1"
    assert "--remote" not in command
    assert env[REMOTE_ENV].startswith("sc://spark.internal:15123/")
    assert "token=tok3n" in env[REMOTE_ENV]
    assert not any("tok3n" in part for part in command)


def test_the_merge_job_of_the_same_connector_is_still_submitted(connector):
    from tidemark_airflow.operators.spark_jobs import attached_command

    assert (
        attached_command("delta_merge", settings(connector("airflow.spark.connect.conn.id: shop_connect\n")))
        is None
    )


def test_a_connector_without_a_connect_connection_submits_its_chunk_job(connector):
    from tidemark_airflow.operators.spark_jobs import attached_command

    assert attached_command("incremental_snapshot", settings(connector())) is None


def test_a_chunk_job_rerun_without_a_connect_connection_is_submitted_with_spark_submit(
    connector, monkeypatch
):
    """The snapshot wait runs the chunk job again through `submit_job`: without a Spark
    Connect connection it builds a real SparkSubmitHook for the job's file."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from tidemark_airflow.operators.spark_jobs import JOBS, chunk_job_args, submit_job

    submitted: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(
        SparkSubmitHook,
        "submit",
        lambda hook, application: submitted.append((application, hook._application_args)),
    )
    submit_job(connector(), "incremental_snapshot", chunk_job_args, ["--signal", "snap-2"])
    [(application, args)] = submitted
    assert application == str(JOBS / "incremental_snapshot.py")
    assert args[args.index("--signal") + 1] == "snap-2"
