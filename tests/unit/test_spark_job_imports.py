"""The Spark jobs import before any SparkContext exists: `spark-submit` runs a job's
module-level imports first and only then its `main`, which builds the session."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module", ["spark_jobs.delta_merge", "spark_jobs.delta_housekeeping", "spark_jobs.incremental_snapshot"]
)
def test_a_spark_job_imports_without_a_spark_context(module):
    done = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
