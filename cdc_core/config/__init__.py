"""Connector configuration: Debezium property names, validated at start."""

from cdc_core.config.connector_config import ConnectorConfig, Secret, load_config
from cdc_core.config.properties import Property

__all__ = ["ConnectorConfig", "Property", "Secret", "load_config"]
