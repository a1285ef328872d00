"""Wait until a snapshot's windows are all released: deferred to the triggerer, so a
long snapshot holds no worker slot. A snapshot that stalls (windows left that nothing
reads: the chunk job died, or ended with windows its run could not finish) is not waited
for in vain: the chunk job runs again, reading only the windows not yet released, and the
wait goes on (at most `max_reruns` times)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from tidemark_airflow.hooks import state
from tidemark_airflow.hooks.source import TidemarkSourceHook
from tidemark_airflow.operators.spark_jobs import chunk_job_args, submit_job
from tidemark_airflow.triggers.polling import watch_inline
from tidemark_airflow.triggers.snapshot import SnapshotReleasedTrigger


class SnapshotReleasedSensor(BaseSensorOperator):
    template_fields: Sequence[str] = ("connector", "signal_id", "chunk_job_args")

    def __init__(
        self,
        *,
        connector: str,
        signal_id: Any,
        deferrable: bool = True,
        snapshot_timeout_seconds: float | None = None,
        poll_seconds: float = 2.0,
        chunk_job_args: Any = None,
        max_reruns: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.connector, self.signal_id, self.deferrable = connector, signal_id, deferrable
        self.snapshot_timeout_seconds, self.poll_seconds = snapshot_timeout_seconds, poll_seconds
        self.chunk_job_args, self.max_reruns = (
            chunk_job_args,
            max_reruns,
        )  # per-run arguments of the chunk job

    def _config_file(self) -> tuple[str, float, float]:
        hook = TidemarkSourceHook(self.connector)
        config = hook.config()
        timeout = self.snapshot_timeout_seconds or config.get("airflow.snapshot.timeout.minutes") * 60
        return hook.config_file(), timeout, config.get("airflow.snapshot.stall.seconds")

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        config_file, _, _ = self._config_file()

        def released() -> dict[str, Any] | None:
            where, snap = state.snapshot_progress(state.status_of_file(config_file), str(self.signal_id))
            if where == "refused":
                return {
                    "status": "refused",
                    "message": state.refusal_message(str(self.signal_id), snap or {}),
                }
            return {"status": "released", "snapshot": snap} if where == "finished" else None

        # No deferral for what is done, or done within seconds (see triggers/polling.py).
        event = watch_inline(released, poll=min(self.poll_seconds, 1.0))
        if event is not None:
            return self.execute_complete(context, event)
        self._wait(reruns=0)

    def _wait(self, reruns: int) -> None:
        config_file, timeout, stall = self._config_file()
        self.defer(
            trigger=SnapshotReleasedTrigger(
                config_file, str(self.signal_id), timeout, self.poll_seconds, stall
            ),
            method_name="execute_complete",
            kwargs={"reruns": reruns},
            timeout=timedelta(seconds=timeout + 60),
        )

    def poke(self, context: Any) -> bool:
        config_file, _, _ = self._config_file()
        where, snap = state.snapshot_progress(state.status_of_file(config_file), str(self.signal_id))
        if where == "refused":
            raise AirflowException(state.refusal_message(str(self.signal_id), snap or {}))
        return where == "finished"

    def execute_complete(self, context: Any, event: dict[str, Any], reruns: int = 0) -> dict[str, Any]:
        if event.get("status") == "stalled" and self.chunk_job_args is not None:
            if reruns >= self.max_reruns:
                raise AirflowException(f"{event.get('message')} (the chunk job ran again {reruns} times)")
            self.log.warning("%s; running the chunk job again", event.get("message"))
            submit_job(self.connector, "incremental_snapshot", chunk_job_args, self.chunk_job_args)
            self._wait(reruns + 1)
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
