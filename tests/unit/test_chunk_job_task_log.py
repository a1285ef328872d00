"""The Spark chunk job's log of its Python reader's executor tasks (`log_tasks`)."""

from __future__ import annotations


def test_each_executor_task_of_the_python_reader_is_logged_with_where_its_time_went(caplog):
    """The chunk job's log names, per executor task, its windows, how long it ran and how
    much of that its windows spent reading and staging: the rest is Spark's and the Python
    worker's own time (how the MongoDB benchmark's windows were told apart from the scan)."""
    import logging

    from spark_jobs.incremental_snapshot import log_tasks

    def window(index: int, task: int, read: float, stage: float, took: float) -> dict:
        return {"index": index, "rows": 10, "read": read, "stage": stage, "task": task, "task_seconds": took}

    results = [window(0, 0, 2.0, 0.5, 6.0), window(1, 0, 1.0, 0.5, 6.0), window(2, 2, 4.0, 1.0, 5.5)]
    with caplog.at_level(logging.INFO, logger="spark_jobs.incremental_snapshot"):
        log_tasks(results)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "task from window 0: 2 windows in 6.0s (reading 3.0s, staging 1.0s)",
        "task from window 2: 1 windows in 5.5s (reading 4.0s, staging 1.0s)",
    ]
