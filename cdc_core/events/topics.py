"""Topic names as Debezium gives them to tables.

A table's topic is `<topic.prefix>.<database or schema>.<table>`, and a quoted table name
may hold characters Kafka refuses in a topic name (a space, `€`, ...). Debezium's topic
naming replaces each such character with `_` and goes on (it counts Java's UTF-16 units,
so a character outside the Basic Multilingual Plane becomes two), where a refused name
would stop the stream: `order items` is captured on `<prefix>.<db>.order_items`.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

# What Kafka takes in a topic name; anything else is replaced.
VALID = "A-Za-z0-9._-"
_INVALID = re.compile(f"[^{VALID}]")
REPLACEMENT = "_"
_warned: set[str] = set()


def topic_name(name: str) -> str:
    """`name` with each character Kafka refuses replaced, as Debezium does."""
    if not _INVALID.search(name):
        return name
    mangled = _INVALID.sub(lambda m: REPLACEMENT * (2 if ord(m.group()) > 0xFFFF else 1), name)
    if name not in _warned:
        _warned.add(name)
        log.warning("topic name %r is not a valid Kafka topic name: using %r", name, mangled)
    return mangled


def table_topic(prefix: str, collection: str) -> str:
    """The topic of a table named `collection` (`db.table`, as signals and release records
    name it)."""
    return topic_name(f"{prefix}.{collection}")
