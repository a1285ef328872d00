"""The MongoDB snapshot session: collections, `_id` chunks, the signal collection.

Chunks are read as seed 002 describes (`_id` after the last key, up to the window's
bound, sorted, a chunk at a time) in BSON order across `_id` types (`filters.py`);
watermarks are documents inserted into the signal collection (`signal.data.collection`,
`db.collection`), which the change stream carries in log order. Boundaries and chunks
are read where `mongodb.snapshot.read.preference` says, in one causally consistent
session with the watermark writes (`snapshot_reads.py`: why a secondary's chunk is exact).
"""

from __future__ import annotations

from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.connectors.mongodb.field_rules import FieldPath, FieldRules
from cdc_core.connectors.mongodb.filters import PROBED, chunk_filter
from cdc_core.connectors.mongodb.shape import DOCUMENT, ID, MongoTypeMapper, collection_schema
from cdc_core.connectors.mongodb.snapshot_reads import SnapshotReads, read_preference
from cdc_core.errors import SourceUnavailableError, TidemarkError
from cdc_core.schema.model import TableId, TableSchema
from cdc_core.snapshot.chunks import ChunkPlan, Key, chained_boundaries

MAX_SIGNAL_DATA = 2048


def client_for(config: ConnectorConfig, timeout_ms: int = 10_000, raw: bool = False) -> Any:
    """A pymongo client for the connector (the password from its secret, never the URI);
    `raw`: its documents left as BSON (`RawBSONDocument`)."""
    import pymongo

    secret = config.secret("database.password")
    auth: dict[str, Any] = {}
    if config.get("database.user"):
        auth["username"] = config.get("database.user")
    if secret is not None and secret.reveal():
        auth["password"] = secret.reveal()
    if raw:
        from bson.raw_bson import RawBSONDocument

        auth["document_class"] = RawBSONDocument
    return pymongo.MongoClient(
        config.get("mongodb.connection.string"), serverSelectionTimeoutMS=timeout_ms, tz_aware=True, **auth
    )


def hosts_of(uri: str) -> str:
    """Where a connection string points, for messages and the status page: its hosts only.
    Its user, password and options (which can hold a certificate's password) are left out."""
    rest = uri.split("://", 1)[-1]
    hosts = rest.split("/", 1)[0].split("?", 1)[0]
    return hosts.rsplit("@", 1)[-1]


def ping(client: Any, where: str) -> None:
    import pymongo.errors

    try:
        client.admin.command("ping")
    except pymongo.errors.OperationFailure as exc:
        raise TidemarkError(
            f"MongoDB refused the connector's user at {where}: {exc.details or exc}"
        ) from None
    except pymongo.errors.PyMongoError as exc:
        raise SourceUnavailableError(f"cannot reach MongoDB at {where}: {exc}") from None


SYSTEM_DATABASES = frozenset({"admin", "config", "local"})


def list_collections(client: Any) -> list[TableId]:
    """Every user collection of the deployment, as `database.collection`."""
    found = []
    for database in sorted(client.list_database_names()):
        if database in SYSTEM_DATABASES:
            continue
        names = client[database].list_collection_names()
        found += [TableId(database, n) for n in sorted(names) if not n.startswith("system.")]
    return found


class MongoSession:
    """`cdc_core.connector.SourceSession` on a MongoDB deployment."""

    def __init__(self, config: ConnectorConfig) -> None:
        preference = read_preference(config)
        self.client = client_for(config)
        self.where = hosts_of(config.get("mongodb.connection.string"))
        ping(self.client, self.where)
        signal = config.get("signal.data.collection")
        self.signal = TableId.parse(signal) if signal else None
        self.failure_mode = config.get("event.processing.failure.handling.mode")
        self.field_rules = FieldRules.of(config)  # field.exclude.list, field.renames
        self._unknown: frozenset[str] | None = None
        self.reads = SnapshotReads(self.client, preference)

    def close(self) -> None:
        self.reads.close()
        self.client.close()

    # ------------------------------------------------------------------ catalog

    def list_tables(self) -> list[TableId]:
        return list_collections(self.client)

    def table_schema(self, table: TableId) -> TableSchema:
        return collection_schema(table)

    def type_mapper(self) -> MongoTypeMapper:
        return MongoTypeMapper(self.field_rules)

    def partitions(self, table: TableSchema) -> tuple[str | None, ...]:
        return (None,)  # one change stream

    # ------------------------------------------------------------------ chunks

    def _collection(self, plan: ChunkPlan) -> Any:
        if plan.key != (ID,):
            raise TidemarkError(
                f"{plan.table.id}: a collection is read in _id order (surrogate-key is not supported)"
            )
        return self.reads.collection(plan.table.id.database, plan.table.id.table)

    def _unknown_types(self, collection: Any) -> frozenset[str]:
        """The type aliases of `PROBED` this server rejects (asked once per session)."""
        import pymongo.errors

        if self._unknown is None:
            unknown = set()
            for alias in PROBED:
                try:
                    collection.find_one({ID: {"$type": alias}}, {ID: 1})
                except pymongo.errors.OperationFailure:
                    unknown.add(alias)
            self._unknown = frozenset(unknown)
        return self._unknown

    def _spec(self, collection: Any, plan: ChunkPlan, lo: Key | None, hi: Key | None) -> dict[str, Any]:
        """The filter of window (lo, hi]."""
        return chunk_filter(lo, hi, plan.condition, self._unknown_types(collection))

    def _find(self, plan: ChunkPlan, lo: Key | None, hi: Key | None, ids_only: bool = False) -> Any:
        """The documents of window (lo, hi] in `_id` order."""
        collection = self._collection(plan)
        spec = self._spec(collection, plan, lo, hi)
        return collection.find(spec, {ID: 1} if ids_only else None, session=self.reads.session).sort(ID, 1)

    def next_boundary(self, plan: ChunkPlan, lo: Key | None, size: int) -> Key | None:
        found = list(self._find(plan, lo, None, ids_only=True).skip(int(size) - 1).limit(1))
        return (found[0][ID],) if found else None

    def boundaries(self, plan: ChunkPlan, size: int) -> list[Key]:
        """Every `size`-th `_id`, each a covered walk of the `_id` index from the one before
        (`chained_boundaries`). One pass reading every `_id` cost 2 s per million
        documents on the test server (the driver decoding them all, 5,000,000 in replies
        of 16 MiB at most), and stood between the snapshot's signal and its first window."""
        return chained_boundaries(self, plan, size)

    def read_chunk(self, plan: ChunkPlan, lo: Key | None, hi: Key | None) -> list[tuple[Any, ...]]:
        """The window's documents as their BSON (`RawValue`s of `_id` and document), read
        as the Java driver reads them (`bson_text.py`): pymongo never decodes them, so a
        value it cannot hold (a date past year 9999) reads as any other. A document that
        cannot be read follows event.processing.failure.handling.mode."""
        from bson.codec_options import CodecOptions
        from bson.raw_bson import RawBSONDocument

        from cdc_core.connectors.mongodb.rendering import readable_document

        collection = self._collection(plan)
        raw = collection.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
        rows = []
        spec = self._spec(collection, plan, lo, hi)
        for doc in raw.find(spec, session=self.reads.session).sort(ID, 1):
            found = readable_document(
                bytes(doc.raw), str(plan.table.id), self.failure_mode, self._paths(plan)
            )
            if found is not None:
                rows.append(found)
        return rows

    def read_chunk_events(
        self, plan: ChunkPlan, lo: Key | None, hi: Key | None
    ) -> dict[str, list[Any]] | None:
        """`EventFormChunks`: the window's documents fetched as raw replies and rendered by
        the transcoder, never decoded into Python objects (`raw_find.py`); None when the
        transcoder is not built."""
        from cdc_core.connectors.mongodb import rendering
        from cdc_core.connectors.mongodb.raw_find import find_documents

        if not rendering.available():
            return None
        collection = self._collection(plan)
        ids, texts = find_documents(
            collection,
            self._spec(collection, plan, lo, hi),
            session=self.reads.session,
            failure_mode=self.failure_mode,
            paths=self._paths(plan),
        )
        return {ID: ids, DOCUMENT: texts}

    def _paths(self, plan: ChunkPlan) -> tuple[FieldPath, ...]:
        return () if self.field_rules is None else self.field_rules.of_table(plan.table.id)

    def exact_key_order(self, plan: ChunkPlan) -> bool:
        return False  # `_id`s of any BSON type: Python does not order them as MongoDB does

    def position_marker(self) -> str:
        return ""  # read-only snapshots are the binlog connectors' (a change stream has no GTID set)

    # ------------------------------------------------------------------ signals

    def _signals(self) -> Any:
        if self.signal is None:
            raise TidemarkError("incremental snapshots need signal.data.collection (the signal collection)")
        return self.client[self.signal.database][self.signal.table]

    def write_watermark(
        self, kind: str, signal_id: str, data: dict[str, Any], partition: str | None = None
    ) -> None:
        import orjson

        payload = orjson.dumps(data).decode()
        if len(payload) > MAX_SIGNAL_DATA * 64:
            raise TidemarkError(f"a {kind} signal of {len(payload)} characters is too long")
        # In the reads' session: the chunk read after it waits for it (`snapshot_reads.py`).
        self._signals().insert_one({ID: signal_id, "type": kind, "data": payload}, session=self.reads.session)

    def delete_watermark(self, signal_id: str, partition: str | None = None) -> None:
        self._signals().delete_one({ID: signal_id})

    def read_signal(self, signal_id: str) -> Any:
        """By the signal's text (`signal_ids.py`): a string `_id`, or the Extended JSON of
        one of another type; the signal comes back named by its canonical text."""
        from cdc_core.connectors.mongodb.ext_json import relaxed
        from cdc_core.connectors.mongodb.signal_ids import find_signal, signal_ref
        from cdc_core.signals.actions import RawSignal

        doc = find_signal(self._signals(), signal_id)
        if doc is None:
            return None
        data, kind = doc.get("data"), doc.get("type")
        return RawSignal(
            signal_ref(doc[ID]),
            kind if isinstance(kind, str) else "",
            data if isinstance(data, str) or data is None else relaxed(data),
            "source",
        )


__all__ = ["DOCUMENT", "MongoSession", "client_for"]
