"""`connector.class` → the module implementing it.

Modules are named as strings and imported only when a connector of that class runs, so
the generic core never imports a source-specific module.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from cdc_core.errors import ConfigError

CONNECTORS: dict[str, str] = {
    "mysql": "cdc_core.connectors.mysql.connector",
    "mariadb": "cdc_core.connectors.mysql.connector",
    "io.debezium.connector.mysql.MySqlConnector": "cdc_core.connectors.mysql.connector",
    "io.debezium.connector.mariadb.MariaDbConnector": "cdc_core.connectors.mysql.connector",
}


def connector_module(connector_class: str) -> ModuleType:
    """The module of a connector class; it exposes `PROPERTIES` and `create_source`."""
    module = CONNECTORS.get(connector_class)
    if module is None:
        raise ConfigError(
            "connector.class",
            f"unknown connector {connector_class!r}; known: {', '.join(sorted(CONNECTORS))}",
        )
    return importlib.import_module(module)
