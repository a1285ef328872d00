"""The Spark Connect server's warm-up (`spark_jobs.connect_server.warm_up`): a small job of
Python tasks run on it before the first chunk job, each importing the chunk job's executor
code as a job's tasks do."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_the_warm_up_runs_python_tasks_that_import_the_chunk_jobs_executor_code(spark_connect):
    from spark_jobs.connect_server import warm_up

    assert warm_up(spark_connect, tasks=3) == ["spark_jobs.snapshot_windows"] * 3
