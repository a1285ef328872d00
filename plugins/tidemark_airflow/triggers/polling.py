"""What Tidemark's triggers share: they poll the connector's state files and are
serialised as their constructor arguments."""

from __future__ import annotations

from typing import Any

from airflow.triggers.base import BaseTrigger


class StatePollingTrigger(BaseTrigger):
    """A trigger whose constructor takes only keyword arguments, kept as `self.kwargs`
    (and readable as attributes) and handed back by `serialize`, so the triggerer rebuilds
    it exactly."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.kwargs = kwargs

    def __getattr__(self, name: str) -> Any:
        kwargs = self.__dict__.get("kwargs", {})
        if name in kwargs:
            return kwargs[name]
        raise AttributeError(name)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", dict(self.kwargs)
