"""What the MongoDB tests share: a connector file on a database of the test server (or
the real deployment), its signals, a marker that proves the stream caught up, and a Delta
table's documents read back as BSON values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bson import ObjectId, json_util

from cdc_core.connectors.registry import connector_of
from cdc_core.signals.sending import send_signal
from tests.support.streamer import Connector, connector_file, payloads, wait_for

SIGNALS = "debezium_signal"
AS_CLIENT = json_util.JSONOptions(tz_aware=True)  # dates as the test's client reads them


def connector(mongodb: Any, directory: Path, database: str, extra: dict[str, Any] | None = None) -> Connector:
    return connector_file(
        directory,
        database,
        {
            "connector.class": "mongodb",
            "mongodb.connection.string": mongodb.uri,
            "database.user": None,
            "capture.scope": "database",
            "capture.target": database,
            "signal.data.collection": f"{database}.{SIGNALS}",
            **(extra or {}),
        },
    )


def signal(c: Connector, signal_id: str, data: dict[str, Any]) -> None:
    config = c.config()
    send_signal(connector_of(config), config, signal_id, "execute-snapshot", data)


def synced(db: Any, c: Connector, collection: str = "marker") -> None:
    """Returns once the streamer has logged a document inserted now: everything before it
    is in the log."""
    marker = ObjectId()
    db[collection].insert_one({"_id": marker})
    wanted = json_util.dumps(marker)
    topic = f"{c.prefix}.{db.name}.{collection}"
    wait_for(lambda: any(wanted in (e["after"] or "") for e in payloads(c, topic)), 60, message="sync")


def delta_documents(spark: Any, root: str, table: str, where: str = "true") -> dict[str, Any]:
    """`_id` → document of a Delta table (its live rows `where` holds), both read back as
    BSON values from their Extended JSON text."""
    from spark_jobs.merge.delta_apply import live_rows

    out = {}
    for row in live_rows(spark, f"{root}/{table}").where(where).collect():
        key = json_util.dumps(json_util.loads(row["_id"], json_options=AS_CLIENT))
        out[key] = json_util.loads(row["document"], json_options=AS_CLIENT)
    return out


def source_documents(collection: Any) -> dict[str, Any]:
    """`_id` → document of a source collection, keyed as `delta_documents` keys them."""
    return {json_util.dumps(d["_id"]): d for d in collection.find()}
