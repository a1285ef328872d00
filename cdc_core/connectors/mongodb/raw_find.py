"""A window's `find` whose replies reach the transcoder as they came off the wire.

pymongo's `find_raw_batches` decodes each reply with a `RawBSONDocument` made for every
document in it, only to join their bytes back into one buffer: on the benchmark's
documents that cost 0.9-1.2 s of client CPU for 400,000 documents, against 0.07 s for
the same replies taken whole (2026-11-30), more than rendering them. So the `find` and
its `getMore`s are sent as commands whose replies stay raw, the transcoder reads the
cursor's id and batch out of each, and a cursor an error leaves open is killed. They
run in one explicit session (a `getMore` must come from the session that opened the
cursor) on the primary, where the watermarks are written: a window read on a lagging
secondary would miss changes its low watermark already covers.
"""

from __future__ import annotations

import contextlib
from typing import Any

from cdc_core.connectors.mongodb import rendering
from cdc_core.connectors.mongodb.shape import ID


def find_documents(
    collection: Any,
    spec: dict[str, Any],
    batch_size: int = 0,
    failure_mode: str = "fail",
    paths: tuple[Any, ...] = (),
) -> tuple[list[str], list[str]]:
    """The `_id`s and documents matching `spec`, in `_id` order, as `reply_documents`
    renders them (a document it cannot read as `failure_mode` says; `paths`: the
    collection's field rules). `batch_size` 0: the server's own batches (16 MiB at most)."""
    import pymongo.errors
    from bson import Int64
    from bson.raw_bson import RawBSONDocument
    from bson.son import SON
    from pymongo import ReadPreference

    codec = collection.codec_options
    raw = codec.with_options(document_class=RawBSONDocument)
    database, name = collection.database, collection.name
    command = SON([("find", name), ("filter", spec), ("sort", {ID: 1})])
    more = SON([("collection", name)])
    if batch_size:
        command["batchSize"] = more["batchSize"] = batch_size
    if collection.read_concern.level:
        command["readConcern"] = collection.read_concern.document
    ids: list[str] = []
    texts: list[str] = []
    cursor = 0
    with database.client.start_session(causal_consistency=False) as session:
        try:
            while True:
                reply = database.command(
                    command, codec_options=raw, session=session, read_preference=ReadPreference.PRIMARY
                )
                batch_ids, batch_texts, cursor = rendering.reply_documents(
                    reply.raw, codec, failure_mode, f"{database.name}.{name}", paths
                )
                ids += batch_ids
                texts += batch_texts
                if not cursor:
                    return ids, texts
                command = SON([("getMore", Int64(cursor)), *more.items()])
        except BaseException:
            if cursor:
                with contextlib.suppress(pymongo.errors.PyMongoError):
                    database.command(
                        {"killCursors": name, "cursors": [Int64(cursor)]},
                        session=session,
                        read_preference=ReadPreference.PRIMARY,
                    )
            raise
