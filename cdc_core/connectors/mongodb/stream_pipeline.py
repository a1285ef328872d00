"""`cursor.pipeline`: aggregation stages added to the change stream (Debezium's property, a
JSON array as text, Extended JSON values read as BSON), restricted to stages that run no
code and leave every change readable by the connector.

A change event's own fields are how the connector resumes and orders the stream: `_id`
is the resume token, `clusterTime` the order, `operationType`, `ns`, `to`, `documentKey`,
`lsid`, `txnNumber` and `wallTime` what it emits. So the stages allowed are those that
pick changes or take fields out of the documents a change carries, and nothing else:

- `$match`: which changes are captured (any query without code). The signal
  collection's changes (signals, a snapshot's watermarks) and collection drops and
  renames pass whatever it says, unless `cursor.pipeline.order` is `user_only`;
- `$project` excluding fields, and `$unset`: paths inside `fullDocument`,
  `fullDocumentBeforeChange` or `updateDescription.updatedFields`, never a document's
  `_id` (its key), nor, with a signal collection, the `type` and `data` its documents
  carry signals in (the signal collection's changes go through the same stages).

Refused with the reason: `$addFields`/`$set` (on a change without a document, a delete or
an update in `change_streams` mode, a field set under `fullDocument` makes up a document
the collection does not hold), `$replaceRoot`/`$replaceWith` (they replace the event,
resume token included), `$redact` (it prunes by data at every level), any stage MongoDB
does not allow in a change stream, and anywhere in a stage the operators that run
JavaScript on the server (`$where`, `$function`, `$accumulator`, in `$expr` or not) or
a JavaScript code value.
"""

from __future__ import annotations

from typing import Any

from cdc_core.errors import ConfigError
from cdc_core.schema.model import TableId

PIPELINE = "cursor.pipeline"
ORDER = "cursor.pipeline.order"
ORDERS = ("internal_first", "user_first", "user_only")

CODE_OPERATORS = frozenset({"$where", "$function", "$accumulator"})
DOCUMENTS = ("fullDocument", "fullDocumentBeforeChange", "updateDescription.updatedFields")
SIGNAL_FIELDS = ("type", "data")
# Changes a `$match` never hides: a collection's end, which the Delta merge lands.
SCHEMA_CHANGES = ["drop", "rename", "dropDatabase", "invalidate"]

REFUSED = {
    "$addFields": "it sets fields, and on a change without a document (a delete, an update in change_streams "
    "mode) a field set under fullDocument makes up a document the collection does not hold",
    "$replaceRoot": "it replaces the change event, whose _id is the resume token and whose operationType, ns, "
    "clusterTime and documentKey the connector reads",
    "$redact": "it prunes the event by its data at every level, the connector's own fields included",
    "$changeStreamSplitLargeEvent": "it splits an event into fragments the connector does not join",
}
REFUSED["$set"] = REFUSED["$addFields"]
REFUSED["$replaceWith"] = REFUSED["$replaceRoot"]
ALLOWED = "$match, $project (excluding fields) and $unset"


class PipelineError(ValueError):
    """A `cursor.pipeline` the connector refuses; the message names the stage and why."""


def parse_pipeline(text: str) -> list[dict[str, Any]]:
    """The stages of `cursor.pipeline` as BSON values, each checked (`PipelineError`)."""
    from bson import json_util
    from bson.codec_options import DatetimeConversion

    # Dates outside Python's years as `DatetimeMS`: every date BSON holds can be written.
    options = json_util.JSONOptions(tz_aware=True, datetime_conversion=DatetimeConversion.DATETIME_AUTO)
    try:
        stages = json_util.loads(text, json_options=options)
    except (ValueError, TypeError) as exc:
        raise PipelineError(f"not Extended JSON: {exc}") from None
    if not isinstance(stages, list):
        raise PipelineError(
            'expected a JSON array of stages, such as [{"$match": {"operationType": "insert"}}]'
        )
    for index, stage in enumerate(stages):
        check_stage(index, stage)
    return stages


def check_pipeline(value: Any) -> str | None:
    """`Property.check` of `cursor.pipeline`."""
    try:
        parse_pipeline(value)
    except PipelineError as exc:
        return str(exc)
    return None


def check_stage(index: int, stage: Any) -> None:
    if not isinstance(stage, dict) or len(stage) != 1 or not str(next(iter(stage), "")).startswith("$"):
        raise PipelineError(f"stage {index} is not a stage (an object of one $-named key): {stage!r}")
    ((name, body),) = stage.items()
    where = f"stage {index} ({name})"
    if name in REFUSED:
        raise PipelineError(f"{where} is refused: {REFUSED[name]}; allowed: {ALLOWED}")
    if name not in ("$match", "$project", "$unset"):
        raise PipelineError(f"{where} is not allowed in the change stream; allowed: {ALLOWED}")
    _no_code(where, body)
    if name == "$match":
        if not isinstance(body, dict):
            raise PipelineError(f"{where} takes a query document, got {body!r}")
        return
    if name == "$unset":
        paths = [body] if isinstance(body, str) else body
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
            raise PipelineError(f"{where} takes a field path or a list of them, got {body!r}")
    else:
        if not isinstance(body, dict) or not body:
            raise PipelineError(f"{where} takes a document of fields to exclude, got {body!r}")
        paths = []
        for path, value in _flatten(body):
            excludes = value is False or (
                not isinstance(value, bool) and isinstance(value, (int, float)) and value == 0
            )
            if not excludes:
                raise PipelineError(
                    f"{where}: {path}: {value!r} includes or computes a field; only exclusions (0 or false) are "
                    "allowed, since an inclusion drops the fields of the event it does not name"
                )
            paths.append(path)
    for path in paths:
        _check_path(where, path)


def _flatten(body: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """A projection's paths, nested documents (`{"fullDocument": {"a": 0}}`) joined by dots."""
    out = []
    for key, value in body.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and not any(str(k).startswith("$") for k in value):
            out += _flatten(value, f"{path}.")
        else:
            out.append((path, value))
    return out


def _check_path(where: str, path: str) -> None:
    for document in DOCUMENTS:
        if path.startswith(f"{document}."):
            field = path[len(document) + 1 :]
            parts = field.split(".")
            if any(not p or p.startswith("$") for p in parts):
                raise PipelineError(f"{where}: {path!r} is not a field path")
            if parts[0] == "_id":
                raise PipelineError(f"{where}: {path} is the document's _id, its key in every record")
            return
    raise PipelineError(
        f"{where}: {path} is not inside a document the change carries; the event's own fields (_id, the resume "
        "token; operationType, ns, clusterTime, documentKey, lsid, txnNumber, ...) are how the connector resumes "
        f"and orders the stream. Exclude fields under {', '.join(DOCUMENTS)}"
    )


def _no_code(where: str, value: Any) -> None:
    from bson.code import Code

    if isinstance(value, Code):
        raise PipelineError(
            f"{where} holds JavaScript code ({str(value)[:40]!r}); the change stream runs no code"
        )
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in CODE_OPERATORS:
                raise PipelineError(
                    f"{where} uses {key}, which runs JavaScript on the server: refused; write the condition with "
                    "query and expression operators ($eq, $in, $regex, $expr without code)"
                )
            _no_code(where, inner)
    elif isinstance(value, list):
        for inner in value:
            _no_code(where, inner)


def _excluded(stage: dict[str, Any]) -> list[str]:
    ((name, body),) = stage.items()
    if name == "$unset":
        return [body] if isinstance(body, str) else list(body)
    if name == "$project":
        return [path for path, _ in _flatten(body)]
    return []


def change_stream_pipeline(text: str | None, order: str, signal: TableId | None) -> list[dict[str, Any]]:
    """The stages `MongoSource` opens its change stream with: each `$match` also passes
    the signal collection's changes and collection drops and renames (`user_only`: the
    stages as written), a `$project`'s paths dotted. Raises ConfigError for an exclusion
    of a field the signal collection's documents carry."""
    if not text:
        return []
    try:
        stages = parse_pipeline(text)
    except PipelineError as exc:
        raise ConfigError(PIPELINE, str(exc)) from None
    # Exclusions in dotted form, which every server reads alike (the MongoDB test server
    # takes `{"fullDocument": {"secret": 0}}` for an inclusion of fullDocument).
    stages = [{"$project": dict(_flatten(s["$project"]))} if "$project" in s else s for s in stages]
    if order == "user_only":
        return stages
    out = []
    for index, stage in enumerate(stages):
        if signal is not None:
            for path in _excluded(stage):
                document, _, field = path.partition(".")
                if document != "updateDescription" and field.split(".")[0] in SIGNAL_FIELDS:
                    raise ConfigError(
                        PIPELINE,
                        f"stage {index} excludes {path}: the signal collection {signal}'s changes go through the "
                        "same stages and carry signals and watermarks in fullDocument's type and data; use "
                        "field.exclude.list for a field of that name, or cursor.pipeline.order: user_only",
                    )
        if "$match" in stage:
            passed: list[dict[str, Any]] = [{"operationType": {"$in": SCHEMA_CHANGES}}]
            if signal is not None:
                passed.insert(0, {"ns.db": signal.database, "ns.coll": signal.table})
            stage = {"$match": {"$or": [stage["$match"], *passed]}}
        out.append(stage)
    return out
