"""What a window's close row would have said, for windows closed by deleting their open row.

With `incremental.snapshot.watermarking.strategy: insert_delete` a chunk reader deletes
the window's open row instead of inserting a close row, so the signal table does not
grow. The delete is the window's high watermark, but it carries nothing a close row
carried: a MongoDB delete event holds only the document's `_id`, and a binlog or VStream
delete holds the open row, written before the chunk was read. So the reader writes a
note first, where the open row said it would be (`note` in its data), with what the
close row held: the staged rows' columns, count and location, and their staged form.
The streamer reads it at the delete. A note is written whole before the delete, so a
delete whose note is missing (the open row deleted by someone else, mid-window) makes
the window be read again rather than released.

Typed JSON with a version field. In-process windows keep their note in the connector's
staging folder (removed with the window's staged rows); a Spark job's beside the
window's staged file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from cdc_core.durable import replace_file
from cdc_core.snapshot.staging import StagingError, filesystem_for, write_bytes_whole

VERSION = 1
CLOSED_BY_DELETE = "delete"  # the open row's `closed_by` under insert_delete


@dataclass(frozen=True)
class WindowNote:
    snapshot: str
    window: str
    columns: tuple[str, ...]  # the table's columns the rows were read with
    rows: int
    staged: str | None = None  # the staged file (a Spark job's); None: the stage's own staging
    shaped: str | None = None  # the digest of the staged form (a Spark job's); None: rows as read

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "version": VERSION,
                "snapshot": self.snapshot,
                "window": self.window,
                "columns": list(self.columns),
                "rows": self.rows,
                "staged": self.staged,
                "shaped": self.shaped,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> WindowNote:
        body = orjson.loads(data)
        if body.get("version") != VERSION:
            raise ValueError(f"format version {body.get('version')!r}; this Tidemark reads {VERSION}")
        return cls(
            body["snapshot"],
            body["window"],
            tuple(body["columns"]),
            int(body["rows"]),
            body.get("staged"),
            body.get("shaped"),
        )


def write_note(uri: str, note: WindowNote) -> None:
    """The note at `uri`, whole and (a local file) on disk before the open row goes."""
    if "://" in uri:
        write_bytes_whole(uri, note.to_bytes())
        return
    path = Path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, note.to_bytes())


def read_note(uri: str, window_id: str) -> WindowNote:
    """The note of window `window_id`; a StagingError when it is missing, unreadable or
    of another window."""
    try:
        filesystem, path = filesystem_for(uri)
        with filesystem.open_input_stream(path) as f:
            data: Any = f.read()
        note = WindowNote.from_bytes(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StagingError(f"the close note of window {window_id} ({uri}) cannot be read: {exc}") from None
    if note.window != window_id:
        raise StagingError(f"the close note {uri} is window {note.window}'s, not {window_id}'s")
    return note
