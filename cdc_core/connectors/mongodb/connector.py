"""The MongoDB connector (`cdc_core.connector.Connector`): change streams through pymongo,
documents shaped as Debezium's MongoDB connector shapes them, incremental snapshots by
`_id` chunks with watermark documents in the signal collection. Importing it loads no
driver: config validation reads the properties alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.config.properties import Property
from cdc_core.connector import DocumentIds, DocumentPatches
from cdc_core.connectors.mongodb import snapshot_reads, stream_pipeline
from cdc_core.connectors.mongodb.field_rules import check_excludes, check_renames
from cdc_core.connectors.mongodb.landed_ids import PLAIN, landed_id
from cdc_core.connectors.mongodb.patch import apply_update
from cdc_core.schema.history import SchemaHistory

CAPTURE_MODES = (
    "change_streams",
    "change_streams_update_full",
    "change_streams_with_pre_image",
    "change_streams_update_full_with_pre_image",
)

PROPERTIES: list[Property] = [
    Property(
        "mongodb.connection.string",
        "str",
        required=True,
        description="The deployment's connection string (`mongodb://host:27017/?replicaSet=rs0`); the password "
        "comes from `database.password` (its environment variable), never from this string.",
    ),
    Property(
        "database.hostname",
        "str",
        description="Not used by MongoDB (the hosts are in `mongodb.connection.string`).",
    ),
    Property("database.user", "str", description="The user, when the connection string has none."),
    Property(
        "capture.mode",
        "enum",
        default="change_streams_update_full",
        choices=CAPTURE_MODES,
        description="What an update event holds: its change alone (`updateDescription`), the full document "
        "looked up (`*_update_full`), the document before it (`*_with_pre_image`, MongoDB 6.0 with pre-images "
        "on the collection).",
    ),
    Property(
        "capture.mode.full.update.type",
        "enum",
        default="lookup",
        choices=("lookup", "post_image"),
        description="How an update's full document is found in the `*_update_full` modes: looked up when the "
        "event is read (`lookup`: the document as it is then, null if it was deleted since), or the post-image "
        "MongoDB stored with the change (`post_image`: MongoDB 6.0, `changeStreamPreAndPostImages` enabled on "
        "the collection).",
    ),
    Property(
        "capture.scope",
        "enum",
        default="deployment",
        choices=("deployment", "database", "collection"),
        description="What one change stream watches: the whole deployment, the database `capture.target`, or "
        "the collection `capture.target` (`db.collection`).",
    ),
    Property("capture.target", "str", description="The database or `db.collection` of `capture.scope`."),
    Property(
        "collection.include.list",
        "regex-list",
        description="Collections to capture, `db.collection` (anchored regexes); the same as table.include.list.",
        alias_of="table.include.list",
    ),
    Property(
        "collection.exclude.list",
        "regex-list",
        description="Collections not to capture, `db.collection`; the same as table.exclude.list.",
        alias_of="table.exclude.list",
    ),
    Property(
        "cursor.max.await.time.ms",
        "int",
        default=500,
        minimum=1,
        description="How long a getMore waits for changes on an idle stream.",
    ),
    Property(
        stream_pipeline.PIPELINE,
        "str",
        check=stream_pipeline.check_pipeline,
        description="Aggregation stages added to the change stream, as Debezium's: a JSON array as text "
        '(Extended JSON values, `{"$oid": ...}`, `{"$date": ...}`, are read as BSON), e.g. '
        '`[{"$match": {"operationType": {"$ne": "delete"}}}]`. Only stages that run no code and keep '
        "the events readable: `$match` (the signal collection's changes and collection drops and renames pass "
        "whatever it says), `$project` excluding fields and `$unset`, on paths under `fullDocument`, "
        "`fullDocumentBeforeChange` or `updateDescription.updatedFields` (not the document's `_id`); no `$where`, "
        "`$function`, `$accumulator` or JavaScript code anywhere. Refused at load with the stage and the reason.",
    ),
    Property(
        stream_pipeline.ORDER,
        "enum",
        default="internal_first",
        choices=stream_pipeline.ORDERS,
        description="Debezium's order of its own stages and `cursor.pipeline`'s. The connector's own part is "
        "inside each `$match` (what passes whatever it says), so `internal_first` and `user_first` send the same "
        "pipeline; `user_only` sends the stages as written: the signal collection's changes (signals, snapshot "
        "watermarks) then pass only if the stages let them.",
    ),
    Property(
        snapshot_reads.MODE,
        "str",
        default="primary",
        check=snapshot_reads.check_mode,
        description="Where snapshot reads (window boundaries and chunks, in process and on the Spark chunk "
        "job's executors) go: a MongoDB read preference mode, `primary`, `primaryPreferred`, `secondary`, "
        "`secondaryPreferred` or `nearest`. Each read runs in one causally consistent session with the watermark "
        "writes (always on the primary), at read concern `majority` after the low watermark's operation time, so "
        "a secondary answers once it has applied the watermark: exact, at the cost of waiting for replication. "
        "The connection string's `readPreference` is not used for them.",
    ),
    Property(
        snapshot_reads.TAGS,
        "str",
        check=snapshot_reads.check_tags,
        description="Tag sets for `mongodb.snapshot.read.preference` (not `primary`): a JSON array, the first set "
        'some eligible member matches wins, `{}` any member, e.g. `[{"dc": "east"}, {}]`.',
    ),
    Property(
        "mongodb.poll.interval.ms",
        "int",
        default=100,
        minimum=1,
        description="The pause between polls of an idle change stream (for servers whose getMore does not wait).",
    ),
    Property(
        "field.exclude.list",
        "list",
        check=check_excludes,
        description="Fields left out of `before`/`after`, `updateDescription` and snapshot reads, as Debezium's "
        "MongoDB connector has them: `db.collection.field.nested` (db and collection may hold `*`); into "
        "embedded documents and arrays of documents.",
    ),
    Property(
        "field.renames",
        "list",
        check=check_renames,
        description="Fields renamed in `before`/`after`, `updateDescription` and snapshot reads, as Debezium's "
        "MongoDB connector does: `db.collection.field.nested:newname` renames the last node (db and "
        "collection may hold `*`). A rename onto a name the document already has follows "
        "`event.processing.failure.handling.mode`.",
    ),
    Property(
        "mongodb.rendering",
        "enum",
        default="compiled",
        choices=("compiled", "python"),
        description="How change events become records: `compiled`, from the stream's raw BSON by the "
        "transcoder `make install` builds (changes outside transactions; the rest as `python`), or `python`, "
        "each event's documents read from their BSON and shaped in Python. Both write the same bytes.",
    ),
]


class MongoDbConnector:
    """`cdc_core.connector.Connector` for MongoDB (change streams)."""

    name = "mongodb"
    title = "MongoDB"
    system_databases = frozenset({"admin", "config", "local"})
    properties = PROPERTIES
    initial_snapshot_in_log = False  # `snapshot.mode: initial` is an incremental snapshot
    document_patches = DocumentPatches("updateDescription", apply_update)
    document_ids = DocumentIds(landed_id, PLAIN)

    def initial_snapshot_done(self, position: Mapping[str, Any]) -> bool:
        return True  # its initial snapshot is an incremental one, not in the log

    def create_source(self, config: ConnectorConfig, history: SchemaHistory) -> Any:
        from cdc_core.connectors.mongodb.source import MongoSource

        return MongoSource(config, history)

    def open_session(self, config: ConnectorConfig) -> Any:
        from cdc_core.connectors.mongodb.session import MongoSession

        return MongoSession(config)

    def describe_source(self, config: ConnectorConfig) -> str:
        from cdc_core.connectors.mongodb.session import hosts_of

        return hosts_of(config.get("mongodb.connection.string"))

    def describe_position(self, position: Mapping[str, Any]) -> str:
        sec, inc = position.get("sec"), position.get("ord")
        token = position.get("resume_token")
        where = f"clusterTime {sec}.{inc}" if sec is not None else "start"
        return f"{where} token {str(token)[:24]}" if token else where

    def spark_reader(self, config: ConnectorConfig) -> None:
        return None  # the Spark chunk job reads `_id` ranges with pymongo on its executors


CONNECTOR = MongoDbConnector()
