"""The open snapshot windows and the keys they recorded, kept on disk across restarts.

A window records the keys the stream changes between its LW and its HW. If the streamer
restarts in between, it resumes from its committed offset, which lies after the LW: the
LW is not read again, and without the keys recorded before the restart the window could
not be released safely. So the stage writes its open windows here right before every
offset commit (only when they changed). The file then holds at least every key the log
changed up to the committed position; keys it holds from beyond that position are
recorded again when the log is read again, so a superset is never wrong.

Typed JSON with a version field; keys in `keycodec`'s exact form.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson

from cdc_core.durable import replace_file
from cdc_core.errors import TidemarkError
from cdc_core.schema.model import TableId
from cdc_core.snapshot.keycodec import decode_key, encode_key
from cdc_core.snapshot.windows import Window

VERSION = 1

log = logging.getLogger("tidemark.snapshot")


def window_to_json(window: Window) -> dict[str, Any]:
    return {
        "id": window.id,
        "snapshot": window.snapshot_id,
        "table": str(window.table),
        "lo": encode_key(window.lo),
        "hi": encode_key(window.hi),
        "exact": window.exact_range,
        "key": list(window.key_columns),
        "index": window.index,
        "of": window.of,
        "schema_changed": window.schema_changed,
        "recorded": [encode_key(k) for k in sorted(window.recorded, key=repr)],
        **({} if window.in_log else {"in_log": False}),
        **({} if window.partition is None else {"partition": window.partition}),
        **({} if window.driver_hi is None else {"driver_hi": encode_key(window.driver_hi)}),
        **({"truncated": True} if window.truncated else {}),
        **({} if window.note is None else {"note": window.note}),
    }


def window_from_json(d: dict[str, Any]) -> Window:
    return Window(
        d["id"],
        d["snapshot"],
        TableId.parse(d["table"]),
        decode_key(d["lo"]),
        decode_key(d["hi"]),
        bool(d["exact"]),
        tuple(d["key"]),
        {decode_key(k) for k in d["recorded"]},  # type: ignore[misc]
        bool(d.get("schema_changed")),
        d.get("index"),
        d.get("of"),
        bool(d.get("in_log", True)),
        d.get("partition"),
        decode_key(d.get("driver_hi")),  # absent in files of earlier releases: `hi` serves
        bool(d.get("truncated")),
        d.get("note"),  # absent in files of earlier releases: closed by a close row
    )


class OpenWindowFile:
    """`<staging>/open_windows.json`, replaced atomically and durably on every save."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "open_windows.json"

    def save(self, windows: list[Window]) -> None:
        body = {"version": VERSION, "windows": [window_to_json(w) for w in windows if w.in_log]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(self.path, orjson.dumps(body))

    def load(self) -> list[Window]:
        """The saved windows; none when the file is missing or unreadable, and then
        their HWs are refused and their chunks read again (never released unsafely)."""
        try:
            body = orjson.loads(self.path.read_bytes())
            if body.get("version") != VERSION:
                raise ValueError(f"version {body.get('version')!r}, this Tidemark reads version {VERSION}")
            return [window_from_json(d) for d in body["windows"]]
        except FileNotFoundError:
            return []
        except (ValueError, KeyError, TypeError, AttributeError, TidemarkError) as exc:
            log.warning("ignoring %s (%s): its windows will be read again", self.path, exc)
            return []
