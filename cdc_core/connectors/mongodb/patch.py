"""An update's `updateDescription` applied to the document it changed.

With `capture.mode: change_streams` an update event carries its change alone (an update
whose lookup found the document gone carries it too): the Delta merge rebuilds the
document from the one it stored and the changes since, through this function
(`cdc_core.connector.DocumentPatches`). The description is in the envelope's form
(`events.py`): `updatedFields` as relaxed Extended JSON text of dotted paths,
`removedFields` dotted paths, `truncatedArrays` `{field, size}`; MongoDB applies a
pipeline update's truncations before its sets, and reports an element `$unset` in an
array as set to null.

Relaxed Extended JSON does not say that a small number was an int64: a value an update
sets reads back as an int32 when it fits one (as a Debezium consumer of `updatedFields`
sees it). `*_update_full` modes land exact types.
"""

from __future__ import annotations

import json
from typing import Any

from bson import json_util
from bson.json_util import DatetimeConversion, JSONOptions

from cdc_core.connectors.mongodb.ext_json import strict
from cdc_core.errors import TidemarkError

_MISSING = object()
# Dates out of Python's range as BSON keeps them (`DatetimeMS`), not an error.
_OPTIONS = JSONOptions(datetime_conversion=DatetimeConversion.DATETIME_AUTO)


def apply_update(document: str | None, description: str) -> str | None:
    """`document` (strict Extended JSON text, as `after` carries it) with the change
    applied, in the same form; None when there is no document to change."""
    if document is None:
        return None
    change = json.loads(description)
    doc = json_util.loads(document, json_options=_OPTIONS)
    if not isinstance(doc, dict) or not isinstance(change, dict):
        raise TidemarkError(
            f"an update description or its document is not a JSON object: {description[:200]}"
        )
    for truncated in change.get("truncatedArrays") or []:
        parent, last = _walk(doc, truncated["field"], create=False)
        array = _get(parent, last)
        if isinstance(array, list):
            del array[int(truncated["size"]) :]
    updated = change.get("updatedFields")
    if updated:
        for path, value in json_util.loads(updated, json_options=_OPTIONS).items():
            parent, last = _walk(doc, path, create=True)
            _put(parent, last, value)
    for path in change.get("removedFields") or []:
        parent, last = _walk(doc, path, create=False)
        if isinstance(parent, dict):
            parent.pop(last, None)
        elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
            parent[int(last)] = None
    return strict(doc)


def _walk(doc: dict[str, Any], path: str, create: bool) -> tuple[Any, str]:
    """The container of `path`'s last step and that step; missing documents on the way
    are created when `create` (as `$set` does), else the walk ends at a None parent."""
    *steps, last = path.split(".")
    node: Any = doc
    for i, step in enumerate(steps):
        child = _get(node, step)
        if child is _MISSING or child is None:
            if not create:
                return None, last
            child = {}
            _put(node, step, child)
        elif not isinstance(child, (dict, list)):
            raise TidemarkError(
                f"an update sets {path}, but {'.'.join(steps[: i + 1])} is not a document or array"
            )
        node = child
    return node, last


def _get(node: Any, step: str) -> Any:
    if isinstance(node, dict):
        return node.get(step, _MISSING)
    if isinstance(node, list) and step.isdigit():
        index = int(step)
        return node[index] if index < len(node) else _MISSING
    return _MISSING


def _put(node: Any, step: str, value: Any) -> None:
    if isinstance(node, list) and step.isdigit():
        index = int(step)
        node.extend([None] * (index + 1 - len(node)))  # `$set` past the end pads with nulls
        node[index] = value
    elif isinstance(node, dict):
        node[step] = value
    else:
        raise TidemarkError(f"an update sets {step} inside a value that is not a document or array")
