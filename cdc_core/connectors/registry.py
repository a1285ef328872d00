"""`connector.class` → the `Connector` object implementing it (`cdc_core.connector`).

Connectors are named as strings and imported only when one of their class runs, so the
generic core never imports a source-specific module. Adding a source adds its class
names here, pointing at the `CONNECTOR` of its folder.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from cdc_core.errors import ConfigError

if TYPE_CHECKING:
    from cdc_core.config.connector_config import ConnectorConfig
    from cdc_core.connector import Connector

_MYSQL = "cdc_core.connectors.mysql.connector"
_VITESS = "cdc_core.connectors.vitess.connector"
_MONGODB = "cdc_core.connectors.mongodb.connector"
CONNECTORS: dict[str, str] = {
    "mysql": _MYSQL,
    "mariadb": _MYSQL,
    "io.debezium.connector.mysql.MySqlConnector": _MYSQL,
    "io.debezium.connector.mariadb.MariaDbConnector": _MYSQL,
    "vitess": _VITESS,
    "io.debezium.connector.vitess.VitessConnector": _VITESS,
    "mongodb": _MONGODB,
    "io.debezium.connector.mongodb.MongoDbConnector": _MONGODB,
}


def connector_for(connector_class: str) -> Connector:
    """The connector of a `connector.class` value (short or Debezium's class name)."""
    module = CONNECTORS.get(connector_class)
    if module is None:
        raise ConfigError(
            "connector.class",
            f"unknown connector {connector_class!r}; known: {', '.join(sorted(CONNECTORS))}",
        )
    return importlib.import_module(module).CONNECTOR  # type: ignore[no-any-return]


def connector_of(config: ConnectorConfig) -> Connector:
    """The connector a validated configuration names."""
    return connector_for(config.get("connector.class"))


def all_connectors() -> list[Connector]:
    """Every registered connector, once each (for documentation and the conformance suite)."""
    return [importlib.import_module(m).CONNECTOR for m in dict.fromkeys(CONNECTORS.values())]


def class_names() -> list[tuple[Connector, list[str]]]:
    """Every registered connector with the `connector.class` values that name it, in
    registration order (for the configuration reference)."""
    by_module: dict[str, list[str]] = {}
    for name, module in CONNECTORS.items():
        by_module.setdefault(module, []).append(name)
    return [(importlib.import_module(m).CONNECTOR, names) for m, names in by_module.items()]
