"""A window's `find` whose replies reach the transcoder as they came off the wire.

pymongo's `find_raw_batches` decodes each reply with a `RawBSONDocument` made for every
document in it, only to join their bytes back into one buffer: on the benchmark's
documents that cost 0.9-1.2 s of client CPU for 400,000 documents, against 0.07 s for
the same replies taken whole (2026-11-30), more than rendering them. So the `find` and
its `getMore`s are sent as commands whose replies stay raw, the transcoder reads the
cursor's id and batch out of each, and a cursor an error leaves open is killed.

They go where `collection.find` would send them: the collection's read preference and
read concern, in the given session (a causally consistent one adds `afterClusterTime`,
its operation time, as pymongo does for a `find`: `snapshot_reads.py` says why a window
needs it). A `getMore` must reach the member that opened the cursor, and `command`
selects a member per call, so all of them run on one connection checked out once, by
pymongo's own `_conn_for_reads` and `Database._command` (private: pymongo is pinned in
requirements.lock, and the raw-window tests fail if they change).
"""

from __future__ import annotations

import contextlib
from typing import Any

from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.shape import ID


def find_documents(
    collection: Any, spec: dict[str, Any], batch_size: int = 0, session: Any = None
) -> tuple[list[str], list[str]]:
    """The `_id`s and documents matching `spec`, in `_id` order, as `reply_documents`
    renders them. `batch_size` 0: the server's own batches (16 MiB at most). `session`:
    None, one of its own (not causally consistent)."""
    import pymongo.errors
    from bson import Int64
    from bson.raw_bson import RawBSONDocument
    from bson.son import SON

    client = collection.database.client
    if session is None:
        with client.start_session(causal_consistency=False) as own:
            return find_documents(collection, spec, batch_size, own)
    codec = collection.codec_options
    raw = codec.with_options(document_class=RawBSONDocument)
    database, name = collection.database, collection.name
    command = SON([("find", name), ("filter", spec), ("sort", {ID: 1})])
    more = SON([("collection", name)])
    if batch_size:
        command["batchSize"] = more["batchSize"] = batch_size
    concern = dict(collection.read_concern.document)
    if session.options.causal_consistency and session.operation_time is not None:
        concern["afterClusterTime"] = session.operation_time
    if concern:
        command["readConcern"] = concern
    ids: list[str] = []
    texts: list[str] = []
    cursor = 0
    with client._conn_for_reads(collection.read_preference, session, operation="find") as (conn, preference):

        def run(spec: SON) -> Any:
            return database._command(
                conn, spec, read_preference=preference, codec_options=raw, session=session
            )

        try:
            while True:
                batch_ids, batch_texts, cursor = rendering.reply_documents(run(command).raw, codec)
                ids += batch_ids
                texts += batch_texts
                if not cursor:
                    return ids, texts
                command = SON([("getMore", Int64(cursor)), *more.items()])
        except BaseException:
            if cursor:
                with contextlib.suppress(pymongo.errors.PyMongoError):
                    run(SON([("killCursors", name), ("cursors", [Int64(cursor)])]))
            raise
