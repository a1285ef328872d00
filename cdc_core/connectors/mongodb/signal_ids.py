"""A signal document's `_id` as the one text every part of Tidemark names it by.

Debezium's MongoDB signal is a document of the signal collection whose `_id` is the
signal's id, and MongoDB gives a document inserted without one an ObjectId. Snapshot
state, `tidemark status`, the Spark chunk job's `--signal` and Airflow name a signal by
text, so:

- a string `_id` is itself (the form state files have always held);
- an `_id` of any other type is its canonical Extended JSON, `{"$oid": "..."}`,
  `{"$numberInt": "7"}`, `{"k": {"$numberInt": "1"}}`: one text for one value, which
  reads back as that value and no other.

`find_signal` looks a text up as a string `_id` first, then as the value its Extended
JSON (canonical, relaxed or legacy) names, so a string that merely looks like Extended
JSON is still found, and `--signal '{"$oid":"..."}'` or `--signal 7` find what they say.
Were a collection to hold both a string `_id` and another value whose canonical text is
that string, the string is the one found. Watermark documents keep string ids.
"""

from __future__ import annotations

from typing import Any

from bson import Code, json_util

CANONICAL = json_util.JSONOptions(json_mode=json_util.JSONMode.CANONICAL, tz_aware=True)


def signal_ref(value: Any) -> str:
    """The text of a signal whose `_id` is `value`."""
    if isinstance(value, str) and not isinstance(value, Code):  # (Code is a str)
        return value
    return json_util.dumps(value, json_options=CANONICAL)


def id_candidates(text: str) -> list[Any]:
    """The `_id`s `text` may name, in the order they are looked up."""
    found: list[Any] = [text]
    try:
        value = json_util.loads(text, json_options=CANONICAL)
    except (ValueError, TypeError, KeyError, OverflowError):  # not Extended JSON: a string id only
        return found
    if not isinstance(value, str) or isinstance(value, Code):
        found.append(value)
    return found


def find_signal(collection: Any, text: str) -> Any:
    """The signal document `text` names (`signal_ref` reversed), or None."""
    for candidate in id_candidates(text):
        doc = collection.find_one({"_id": candidate})
        if doc is not None:
            return doc
    return None
