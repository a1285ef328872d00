"""Where a connector's lakehouse files live, from its configuration alone (no Spark, no
Airflow import): the Spark job operators, the Asset events and the status page all ask
here, so they agree on the paths."""

from __future__ import annotations

from pathlib import Path

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.orchestration import lakehouse_locations


def lakehouse_paths(config: ConnectorConfig) -> dict[str, str]:
    """Where a connector's Delta tables, merge checkpoint and staged windows live."""
    return lakehouse_locations(config)


def delta_tables(config: ConnectorConfig) -> list[str]:
    """The Delta tables a connector's merge has written (folders under its root); none
    for a remote root, which only Spark can list."""
    root = lakehouse_paths(config)["delta_root"]
    if "://" in root:
        return []
    base = Path(root)
    return sorted(p.name for p in base.iterdir() if (p / "_delta_log").is_dir()) if base.is_dir() else []
