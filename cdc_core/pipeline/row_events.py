"""A row change's events: one, or for a change of its key a delete of the old key and a
create of the new one, as Debezium emits them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from cdc_core.events.envelope import OP_CREATE, OP_DELETE, OP_READ, OP_TRUNCATE, OP_UPDATE, ChangeEvent
from cdc_core.source import RowChange, Shaper


def row_events(
    item: RowChange, shaper: Shaper, block: Callable[[str], dict[str, Any] | None]
) -> list[ChangeEvent]:
    """One event, or two for a primary-key change (a delete of the old key and a create of
    the new one), each with its transaction block from `block` (numbered in the
    transaction)."""
    topic = shaper.topic
    now = time.time_ns()
    name = str(shaper.schema.id)
    op = item.op
    if op == OP_TRUNCATE:
        return [ChangeEvent(topic, op, None, None, None, item.source, block(name), now)]
    key_source = item.after if op in (OP_CREATE, OP_READ) else item.before
    if (
        op == OP_UPDATE
        and shaper.key_plan
        and item.before is not None
        and item.after is not None
        and shaper.key_values(item.before) != shaper.key_values(item.after)
    ):
        delete = ChangeEvent(
            topic,
            OP_DELETE,
            shaper.key(item.before),
            shaper.row(item.before),
            None,
            item.source,
            block(name),
            now,
        )
        create = ChangeEvent(
            topic,
            OP_CREATE,
            shaper.key(item.after),
            None,
            shaper.row(item.after),
            item.source,
            block(name),
            now,
        )
        return [delete, create]
    assert key_source is not None
    return [
        ChangeEvent(
            topic,
            op,
            shaper.key(key_source),
            shaper.row(item.before),
            shaper.row(item.after),
            item.source,
            block(name),
            now,
            item.extra,
        )
    ]
