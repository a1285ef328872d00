"""Wait until a snapshot's windows are all released: deferred to the triggerer, so a
long snapshot holds no worker slot."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from tidemark_airflow.hooks import state
from tidemark_airflow.hooks.source import TidemarkSourceHook
from tidemark_airflow.triggers.snapshot import SnapshotReleasedTrigger


class SnapshotReleasedSensor(BaseSensorOperator):
    template_fields: Sequence[str] = ("connector", "signal_id")

    def __init__(
        self,
        *,
        connector: str,
        signal_id: Any,
        deferrable: bool = True,
        snapshot_timeout_seconds: float | None = None,
        poll_seconds: float = 2.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector, self.signal_id, self.deferrable = connector, signal_id, deferrable
        self.snapshot_timeout_seconds, self.poll_seconds = snapshot_timeout_seconds, poll_seconds

    def _config_file(self) -> tuple[str, float]:
        hook = TidemarkSourceHook(self.connector)
        timeout = self.snapshot_timeout_seconds or hook.config().get("airflow.snapshot.timeout.minutes") * 60
        return hook.config_file(), timeout

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        config_file, timeout = self._config_file()
        self.defer(
            trigger=SnapshotReleasedTrigger(config_file, str(self.signal_id), timeout, self.poll_seconds),
            method_name="execute_complete",
            timeout=timedelta(seconds=timeout + 60),
        )

    def poke(self, context: Any) -> bool:
        config_file, _ = self._config_file()
        where, _snap = state.snapshot_progress(state.status_of_file(config_file), str(self.signal_id))
        return where == "finished"

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") != "released":
            raise AirflowException(event.get("message") or f"snapshot did not finish: {event}")
        snap = event.get("snapshot") or {}
        for table in snap.get("tables", []):
            self.log.info(
                "%s: %s/%s windows, %s rows released, %s dropped as changed during their window",
                table["table"],
                table.get("windows_done"),
                table.get("windows_total"),
                table.get("rows_released"),
                table.get("rows_dropped"),
            )
        return snap
