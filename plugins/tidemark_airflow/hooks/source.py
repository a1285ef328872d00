"""A connector's source database, with its credentials from an Airflow connection."""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from cdc_core.config.connector_config import ConnectorConfig
from tidemark_airflow import connectors


class TidemarkSourceHook(BaseHook):
    """Loads a connector's configuration with the password of its Airflow connection
    (`airflow.conn.id`): the login, host and port of the connection, when set, win over
    the file. The password is registered with Airflow's secrets masker, so it shows as
    *** in task logs; child processes get it only through
    their environment, never on a command line."""

    conn_name_attr = "tidemark_conn_id"
    hook_name = "Tidemark source"

    def __init__(self, connector: str) -> None:
        super().__init__()
        self.connector = connector
        self._config: ConnectorConfig | None = None
        self._overrides: dict[str, Any] = {}  # what the Airflow connection changes in the file

    def config(self) -> ConnectorConfig:
        if self._config is None:
            plain = connectors.load(self.connector)
            conn_id = plain.get("airflow.conn.id")
            if conn_id:
                conn = self.get_connection(conn_id)
                fields = (
                    ("database.hostname", conn.host),
                    ("database.port", conn.port),
                    ("database.user", conn.login),
                )
                self._overrides = {key: value for key, value in fields if value and value != plain.get(key)}
                secrets = {"database.password": conn.password} if conn.password else {}
                self._config = connectors.load(self.connector, secrets, self._overrides)
            else:
                self._config = plain
            for name in ("database.password", "sink.kafka.sasl.password"):
                secret = self._config.secret(name)
                if secret is not None:
                    # Masked wherever it came from (connection or environment), in this task's
                    # logs and in what its child processes print through it.
                    mask_secret(secret.reveal())
        return self._config

    def child_env(self) -> dict[str, str]:
        """Environment for a child process (streamer, Spark job) of this connector: the
        password under the variable the connector names."""
        config = self.config()
        env = {"TIDEMARK_CONNECTORS_DIR": str(connectors.connectors_dir())}
        secret = config.secret("database.password")
        if secret is not None:
            env[config.get("database.password.env")] = secret.reveal()
        return env

    def config_file(self) -> str:
        """The connector file children (streamer, Spark jobs) load: the connector's own
        file, or, when the Airflow connection changes host, port or login, a copy with
        those values written into its state folder. Never holds the password."""
        import yaml

        config, path = self.config(), connectors.connector_file(self.connector)
        if not self._overrides:
            return str(path)
        effective = config.state_directory() / "airflow-connector.yaml"
        effective.parent.mkdir(parents=True, exist_ok=True)
        data = {**(yaml.safe_load(path.read_text()) or {}), **self._overrides}
        tmp = effective.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(data, sort_keys=False))
        os.replace(tmp, effective)
        return str(effective)

    def get_conn(self) -> Any:
        """A session on the source as the connector's user (closed by the caller)."""
        from cdc_core.connectors.registry import connector_of

        config = self.config()
        return connector_of(config).open_session(config)

    def test_connection(self) -> tuple[bool, str]:
        try:
            self.get_conn().close()
        except Exception as exc:  # the UI's "test connection" shows the reason
            return False, str(exc)
        return True, "connected"
