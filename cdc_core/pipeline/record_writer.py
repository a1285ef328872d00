"""Events as the records a sink writes: keys and values through the converters, Debezium's
context headers, schemas named by reference, tombstones, and a key change's pair.

The dispatcher decides which events go out, in which order and under which offset; this
decides what their records hold. A sink that stores schemas apart (`schemas_apart`) gets
payloads alone with their schemas beside them (`Record.value_schema`); headers always
hold keys as the key converter writes them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import orjson

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.events.envelope import (
    CONTEXT_HEADERS,
    NEWKEY_HEADER,
    OLDKEY_HEADER,
    OP_DELETE,
    ChangeEvent,
    EventSerializer,
    Record,
    with_schema,
)
from cdc_core.pipeline.schema_references import SchemaReferences, references_enabled
from cdc_core.sinks.base import schemas_apart
from cdc_core.transactions import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA

Headers = tuple[tuple[str, bytes], ...]


class RecordWriter:
    def __init__(self, config: ConnectorConfig, connector_name: str) -> None:
        self.prefix = config.topic_prefix
        self.tombstones = config.get("tombstones.on.delete")
        self.transaction_topic = f"{self.prefix}.{config.get('topic.transaction')}"
        self.apart = schemas_apart(config)
        keys_with_schema = config.get("key.converter.schemas.enable")
        self.header_serializer = EventSerializer(keys_with_schema)
        self.key_serializer = EventSerializer(keys_with_schema and not self.apart)
        self.value_serializer = EventSerializer(
            config.get("value.converter.schemas.enable") and not self.apart
        )
        self.references = SchemaReferences(self.prefix, references_enabled(config))
        # Debezium's context headers, on every change event and tombstone: the logical name,
        # the task, the connector (`mariadb`/`mysql`) and this run's id.
        text = orjson.dumps({"type": "string", "optional": False})
        self.context_headers: Headers = tuple(
            (name, self.header_serializer.wrap(text, value))
            for name, value in (
                (CONTEXT_HEADERS[0], self.prefix),
                (CONTEXT_HEADERS[1], "0"),
                (CONTEXT_HEADERS[2], connector_name),
                (CONTEXT_HEADERS[3], str(uuid.uuid4())),
            )
        )
        self._txn_key_schema = orjson.dumps(TRANSACTION_KEY_SCHEMA)
        self._txn_value_schema = orjson.dumps(TRANSACTION_VALUE_SCHEMA)

    def changes(
        self,
        key_schema: bytes | None,
        value_schema: bytes,
        events: list[ChangeEvent],
        payload: Callable[[ChangeEvent], Any],
    ) -> list[Record]:
        """The records of one row change: its event (and tombstone after a delete), or for
        a primary-key change the delete of the old key, its tombstone and the create of the
        new key, linked by headers; each preceded by its schema's record the first time
        this run names it by reference."""
        schemas = (key_schema, value_schema) if self.apart else (None, None)
        records: list[Record] = []
        if len(events) == 2:
            delete, create = events
            old_key = self.key_serializer.wrap(key_schema, delete.key)
            new_key = self.key_serializer.wrap(key_schema, create.key)
            deleted = (
                (NEWKEY_HEADER, self._header_key(key_schema, create.key, new_key)),
                *self.context_headers,
            )
            named, announced = self.references.refer(delete.topic, value_schema, deleted)
            records += [] if announced is None else [announced]
            value = self.value_serializer.wrap(value_schema, payload(delete))
            records.append(Record(delete.topic, old_key, value, named, *schemas))
            if self.tombstones:
                records.append(Record(delete.topic, old_key, None, deleted, *schemas))
            created = (
                (OLDKEY_HEADER, self._header_key(key_schema, delete.key, old_key)),
                *self.context_headers,
            )
            named, _ = self.references.refer(create.topic, value_schema, created)
            value = self.value_serializer.wrap(value_schema, payload(create))
            records.append(Record(create.topic, new_key, value, named, *schemas))
            return records
        event = events[0]
        key = None if event.key is None else self.key_serializer.wrap(key_schema, event.key)
        named, announced = self.references.refer(event.topic, value_schema, self.context_headers)
        records += [] if announced is None else [announced]
        value = self.value_serializer.wrap(value_schema, payload(event))
        records.append(Record(event.topic, key, value, named, *schemas))
        if event.op == OP_DELETE and self.tombstones and key is not None:
            records.append(Record(event.topic, key, None, self.context_headers, *schemas))
        return records

    def rendered(
        self, key_schema: bytes | None, value_schema: bytes, topic: str, rows: list[tuple[str, bytes, bytes]]
    ) -> list[Record]:
        """The records of changes a source rendered itself (`RenderedChanges`): as
        `changes` writes a one-event change, from the key and payload already in JSON."""
        schemas = (key_schema, value_schema) if self.apart else (None, None)
        named, announced = self.references.refer(topic, value_schema, self.context_headers)
        records: list[Record] = [] if announced is None else [announced]
        keyed = self.key_serializer.schemas_enable and key_schema is not None
        valued = self.value_serializer.schemas_enable
        tombstones, context = self.tombstones, self.context_headers
        for op, key, payload in rows:
            if keyed:
                key = with_schema(key_schema, key)  # type: ignore[arg-type]
            records.append(
                Record(topic, key, with_schema(value_schema, payload) if valued else payload, named, *schemas)
            )
            if op == OP_DELETE and tombstones:
                records.append(Record(topic, key, None, context, *schemas))
        return records

    def _header_key(self, key_schema: bytes | None, key: dict[str, Any] | None, written: bytes) -> bytes:
        """A key as a header holds it: as the key converter writes it."""
        return self.header_serializer.wrap(key_schema, key) if self.apart else written

    def transaction(self, txn_id: str, payload: dict[str, Any]) -> list[Record]:
        """A BEGIN or END record (after its schema's record, the first time this run names
        it by reference)."""
        key = self.key_serializer.wrap(self._txn_key_schema, {"id": txn_id})
        value = self.value_serializer.wrap(self._txn_value_schema, payload)
        headers, announced = self.references.refer(self.transaction_topic, self._txn_value_schema, ())
        schemas = (self._txn_key_schema, self._txn_value_schema) if self.apart else (None, None)
        record = Record(self.transaction_topic, key, value, headers, *schemas, boundary=payload["status"])
        return [record] if announced is None else [announced, record]

    def without_schema(self, topic: str, key: dict[str, Any], payload: Any, headers: Headers = ()) -> Record:
        """A record with no Connect schema: a snapshot release, a schema change."""
        return Record(
            topic, self.key_serializer.wrap(None, key), self.value_serializer.wrap(None, payload), headers
        )
