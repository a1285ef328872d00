"""The sink seam: records in, acknowledgements out.

The pipeline hands a sink records paired with ack-tracker entry ids; the sink calls
`on_ack(entry_id)` once per record when that record is durable (Kafka: the broker
acknowledged it with acks=all; local log: fsync returned). Offsets are committed from
acknowledgements only, so a crash repeats at most the unacknowledged tail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.events.envelope import Record

AckCallback = Callable[[int], None]


class Sink(Protocol):
    def send(self, records: list[tuple[Record, int]]) -> None:
        """Queue records for delivery; may block while the destination is unavailable."""
        ...

    def poll(self) -> None:
        """Deliver the acknowledgements that are ready, without waiting for more."""
        ...

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record sent so far is acknowledged; False on timeout."""
        ...

    def close(self) -> None: ...


def schemas_apart(config: ConnectorConfig) -> bool:
    """Whether the connector's sink stores Connect schemas apart from the payloads (the
    Parquet event log), so records carry them beside (`Record.value_schema`)."""
    return config.get("sink.type") == "local" and config.get("sink.local.format") == "parquet"
