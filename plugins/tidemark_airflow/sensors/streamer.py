"""A streamer's health: running, its status fresh, its lag within the bound."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowException

from tidemark_airflow.hooks import state
from tidemark_airflow.hooks.source import TidemarkSourceHook
from tidemark_airflow.triggers.polling import watch_inline
from tidemark_airflow.triggers.streamer import StreamerHealthTrigger


class StreamerHealthSensor(BaseSensorOperator):
    """Deferred until the streamer reports healthy; fails (and alerts) with the reason
    when it does not within `health_timeout_seconds`. The figures go to XCom."""

    template_fields: Sequence[str] = ("connector",)

    def __init__(self, *, connector: str, health_timeout_seconds: float = 120, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.connector, self.health_timeout_seconds = connector, health_timeout_seconds

    def execute(self, context: Any) -> Any:
        hook = TidemarkSourceHook(self.connector)
        max_lag = hook.config().get("airflow.streamer.max.lag.seconds")

        def healthy() -> dict[str, Any] | None:
            health = state.streamer_health(state.status_of_file(hook.config_file()), max_lag)
            return health if health["healthy"] else None

        # No deferral for what holds, or holds within seconds (see triggers/polling.py).
        health = watch_inline(healthy)
        if health is not None:
            return self.execute_complete(context, health)
        self.defer(
            trigger=StreamerHealthTrigger(
                hook.config_file(),
                hook.config().get("airflow.streamer.max.lag.seconds"),
                self.health_timeout_seconds,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.health_timeout_seconds + 60),
        )

    def poke(self, context: Any) -> bool:
        hook = TidemarkSourceHook(self.connector)
        doc = state.status_of_file(hook.config_file())
        return bool(
            state.streamer_health(doc, hook.config().get("airflow.streamer.max.lag.seconds"))["healthy"]
        )

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if not event.get("healthy"):
            raise AirflowException(f"connector {self.connector} is unhealthy: {'; '.join(event['problems'])}")
        self.log.info(
            "connector %s healthy: lag %s s, %s events, at %s",
            self.connector,
            event.get("lag_seconds"),
            event.get("events_total"),
            event.get("committed_position"),
        )
        return event
