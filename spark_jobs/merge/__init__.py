"""Spark helpers of the Delta merge (`spark_jobs/delta_merge.py`): change events read
back into typed rows, deduplicated by order key, and merged into Delta."""
