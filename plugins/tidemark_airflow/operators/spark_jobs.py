"""Tidemark's Spark jobs (`spark_jobs/`) submitted through Airflow's SparkSubmitOperator.

The connector is often a form value, so everything derived from its configuration (the
file the job loads, Spark connection, Delta root, password) is settled in `execute`,
after templating: the password reaches spark-submit through its environment only, and
never lands in the rendered fields Airflow stores.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from cdc_core.config.connector_config import ConnectorConfig
from tidemark_airflow.connectors import PROJECT_ROOT
from tidemark_airflow.hooks.source import TidemarkSourceHook
from tidemark_airflow.lakehouse import lakehouse_paths

JOBS = PROJECT_ROOT / "spark_jobs"


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
        kwargs.setdefault("conf", {"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1"})
        kwargs.setdefault("name", f"tidemark-{job.replace('_', '-')}")
        super().__init__(application=str(JOBS / f"{job}.py"), **kwargs)
        self.connector, self.job, self.job_args, self.extra_args = connector, job, job_args, extra_args

    def execute(self, context: Any) -> None:
        from spark_jobs.classpath import spark_jars_csv

        hook = TidemarkSourceHook(self.connector)
        config = hook.config()
        self._conn_id = config.get("airflow.spark.conn.id")
        self.jars = self.jars or spark_jars_csv()
        extra = [str(a) for a in (self.extra_args or [])]
        self.application_args = [*self.job_args(config, hook.config_file()), *extra]
        self.env_vars = {
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": str(PROJECT_ROOT),
            **(self.env_vars or {}),
            **hook.child_env(),
        }
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
