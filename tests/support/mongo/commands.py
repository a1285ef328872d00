"""What reaches the MongoDB server: every command the clients made while a test records
(pymongo's command monitoring), with the member it went to and its reply."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from pymongo import monitoring


@dataclass
class Sent:
    name: str
    command: dict[str, Any]
    address: Any  # (host, port) of the member that got it
    connection: int | None  # the driver's id of the connection it went on
    reply: dict[str, Any] = field(default_factory=dict)


class CommandLog(monitoring.CommandListener):
    """The commands of the clients made with it, in the order they were sent."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self._open: dict[int, Sent] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        sent = Sent(event.command_name, dict(event.command), event.connection_id, event.server_connection_id)
        self.sent.append(sent)
        self._open[event.request_id] = sent

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        sent = self._open.pop(event.request_id, None)
        if sent is not None:
            sent.reply = dict(event.reply)

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self._open.pop(event.request_id, None)

    def named(self, *names: str) -> list[Sent]:
        return [s for s in self.sent if s.name in names]


def record_clients(monkeypatch: Any) -> CommandLog:
    """Every pymongo client made from now to the test's end logs its commands (the
    connector makes its own clients from its connector file)."""
    import pymongo

    log = CommandLog()
    monkeypatch.setattr(pymongo, "MongoClient", functools.partial(pymongo.MongoClient, event_listeners=[log]))
    return log
