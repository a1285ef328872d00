"""Tidemark's Spark jobs (`spark_jobs/`) submitted through Airflow's SparkSubmitOperator,
or, for the chunk job of a connector with `airflow.spark.connect.conn.id`, run on the
worker attached to that Spark Connect server.

The connector is often a form value, so everything derived from its configuration (the
file the job loads, Spark connection, Delta root, password) is settled in `execute`,
after templating: the password reaches spark-submit through its environment only, and
never lands in the rendered fields Airflow stores; so does a Spark Connect URL, which
may carry a token.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from cdc_core.config.connector_config import ConnectorConfig
from tidemark_airflow.connectors import PROJECT_ROOT
from tidemark_airflow.hooks.source import TidemarkSourceHook
from tidemark_airflow.lakehouse import lakehouse_paths

JOBS = PROJECT_ROOT / "spark_jobs"
# Jobs that can run attached to a Spark Connect server (`--remote`, or its environment
# variable): the merge and housekeeping jobs use Spark's classic API and are submitted.
CONNECT_JOBS = frozenset({"incremental_snapshot"})

log = logging.getLogger(__name__)


DEFAULT_CONF = {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1"}


def driver_conf(conf: dict[str, Any] | None) -> dict[str, Any]:
    """`conf` with the driver JVM's options (UTC, the class archive) unless it sets its own;
    settled when a job starts, since `make install` may have dumped the archive after the
    DAG was parsed."""
    from spark_jobs.driver_jvm import driver_java_options

    return {"spark.driver.extraJavaOptions": driver_java_options(), **(conf or {})}


def job_submission(
    connector: str,
    job_args: Callable[[ConnectorConfig, str], list[str]],
    extra_args: Any = None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What spark-submit needs for a connector's job, settled from its configuration: the
    Spark connection, the project's jars, the job's arguments and the environment (the
    password through the environment only)."""
    from spark_jobs.classpath import spark_jars_csv

    hook = TidemarkSourceHook(connector)
    config = hook.config()
    return {
        "conn_id": config.get("airflow.spark.conn.id"),
        "connect_conn_id": config.get("airflow.spark.connect.conn.id"),
        "jars": spark_jars_csv(),
        "application_args": [*job_args(config, hook.config_file()), *(str(a) for a in (extra_args or []))],
        "env_vars": {
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": str(PROJECT_ROOT),
            **(env or {}),
            **hook.child_env(),
        },
    }


def submit_job(
    connector: str, job: str, job_args: Callable[[ConnectorConfig, str], list[str]], extra_args: Any = None
) -> None:
    """Run `spark_jobs/<job>.py` for a connector and wait for it (outside an operator: the
    snapshot wait runs the chunk job again when a snapshot stalls)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    settings = job_submission(connector, job_args, extra_args)
    if run_attached(job, settings):
        return
    settings.pop("connect_conn_id")
    SparkSubmitHook(
        conf=driver_conf(DEFAULT_CONF), name=f"tidemark-{job.replace('_', '-')}", **settings
    ).submit(str(JOBS / f"{job}.py"))


def attached_command(job: str, settings: dict[str, Any]) -> tuple[list[str], dict[str, str]] | None:
    """The job's command and environment as a process attached to the connector's Spark
    Connect server, or None when it is to be submitted. The server's URL goes in the
    environment (`TIDEMARK_SPARK_REMOTE`), never on the command line."""
    conn_id = settings.get("connect_conn_id")
    if not conn_id or job not in CONNECT_JOBS:
        return None
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    from spark_jobs.connect_server import REMOTE_ENV

    url = SparkConnectHook(conn_id).get_connection_url()
    command = [sys.executable, "-m", f"spark_jobs.{job}", *settings["application_args"]]
    return command, {**os.environ, **settings["env_vars"], REMOTE_ENV: url}


def run_attached(job: str, settings: dict[str, Any]) -> bool:
    """Run the job attached to a Spark Connect server when the connector names one; its
    output goes to the task's log. False when the job is to be submitted instead."""
    attached = attached_command(job, settings)
    if attached is None:
        return False
    command, env = attached
    log.info("running %s attached to Spark Connect (%s)", job, settings["connect_conn_id"])
    with subprocess.Popen(
        command, env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.info("%s", line.rstrip())
    if proc.returncode:
        raise RuntimeError(f"the {job} job exited with code {proc.returncode}")
    return True


class TidemarkSparkJobOperator(SparkSubmitOperator):
    """Submits `spark_jobs/<job>.py` for a connector. `job_args(config, config_file)`
    gives the job's arguments once the connector is known."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "connector", "extra_args")

    def __init__(
        self,
        *,
        connector: str,
        job: str,
        job_args: Callable[[ConnectorConfig, str], list[str]],
        extra_args: Any = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("conf", dict(DEFAULT_CONF))
        kwargs.setdefault("name", f"tidemark-{job.replace('_', '-')}")
        super().__init__(application=str(JOBS / f"{job}.py"), **kwargs)
        self.connector, self.job, self.job_args, self.extra_args = connector, job, job_args, extra_args

    def execute(self, context: Any) -> None:
        settings = job_submission(self.connector, self.job_args, self.extra_args, self.env_vars)
        if run_attached(self.job, settings):
            return None
        self._conn_id = settings["conn_id"]
        self.jars = self.jars or settings["jars"]
        self.application_args = settings["application_args"]
        self.env_vars = settings["env_vars"]
        self.conf = driver_conf(self.conf)
        self._hook = None
        return super().execute(context)


def chunk_job_args(config: ConnectorConfig, config_file: str) -> list[str]:
    """The chunk job's fixed arguments; `--signal` and `--parallelism` come per run."""
    return ["--config", config_file, "--staging", lakehouse_paths(config)["staging"]]


def merge_job_args(config: ConnectorConfig, config_file: str) -> list[str]:
    paths = lakehouse_paths(config)
    return ["--config", config_file, "--delta-root", paths["delta_root"], "--checkpoint", paths["checkpoint"]]


def housekeeping_job_args(config: ConnectorConfig, config_file: str) -> list[str]:
    return [
        "--delta-root",
        lakehouse_paths(config)["delta_root"],
        "--tombstone-retention-hours",
        str(config.get("lakehouse.tombstone.retention.hours")),
        "--vacuum-retention-hours",
        str(config.get("lakehouse.vacuum.retention.hours")),
    ]
