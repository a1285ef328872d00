"""The Spark Connect server's warm-up (`spark_jobs.connect_server.warm_up`): a small job of
Python tasks run on it before the first chunk job, each importing the chunk job's executor
code as a job's tasks do."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_the_warm_up_runs_python_tasks_that_import_the_chunk_jobs_executor_code(spark_connect):
    """Run as the service runs it: a process of its own, which prints what each task
    imported (this one may still open a Spark of its own afterwards)."""
    done = subprocess.run(
        [sys.executable, "-m", "spark_jobs.connect_server", "--warm-up", spark_connect],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["spark_jobs.snapshot_windows"] * 8
