"""Spark entry points (`spark-submit`-able scripts) and the helpers they share.

Each job is a thin script; capture logic lives in `cdc_core` so the streamer, the Spark
jobs and the Airflow DAGs all use the same code.
"""
