"""Send a signal (Debezium's `{id, type, data}`) to a connector through its source."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from tidemark_airflow.hooks.source import TidemarkSourceHook


def signal_id_for(*parts: str) -> str:
    """A signal id fixed by the task that sends it, so a retried task cannot start a
    second snapshot: the insert of the same id fails and counts as already sent."""
    return "af-" + hashlib.sha1("\x00".join(parts).encode()).hexdigest()[:32]


# How a signal collection refuses an id it holds: MySQL/MariaDB and Vitess, MongoDB.
DUPLICATE_KEY = ("Duplicate entry", "E11000")


class SendSignalOperator(BaseOperator):
    """Inserts the signal into the connector's signal table and returns its id."""

    template_fields: Sequence[str] = ("connector", "signal_type", "data")

    def __init__(self, *, connector: str, signal_type: str, data: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connector, self.signal_type, self.data = connector, signal_type, data

    def execute(self, context: Any) -> str:
        from cdc_core.connectors.registry import connector_of
        from cdc_core.signals.sending import send_signal

        ti = context["ti"]
        signal_id = signal_id_for(ti.dag_id, ti.run_id, ti.task_id, str(ti.map_index))
        config = TidemarkSourceHook(self.connector).config()
        try:
            send_signal(connector_of(config), config, signal_id, self.signal_type, dict(self.data or {}))
        except Exception as exc:
            if not any(marker in str(exc) for marker in DUPLICATE_KEY):
                raise
            self.log.info("signal %s was sent by an earlier try of this task", signal_id)
            return signal_id
        self.log.info(
            "sent %s signal %s to connector %s: %s", self.signal_type, signal_id, self.connector, self.data
        )
        return signal_id
