"""Tidemark's capture core: events, configuration, offsets, schema history, signals, the
incremental-snapshot protocol, transaction metadata, connectors and sinks.

It never imports Airflow or Spark, and the generic modules never import a connector:
each source lives in its own folder under `cdc_core.connectors`.
"""
