"""Where a snapshot's reads go (`mongodb.snapshot.read.preference`), and why a window read
on a secondary still sees everything its low watermark covers.

A window's chunk must hold every change the stream delivers before the window's low
watermark (DBLog): a chunk older than such a change would be released after it and undo
it. The watermarks are inserts on the primary; a secondary applies them some time later.
So every snapshot read (window boundaries and chunks) runs in one causally consistent
session with the watermark writes, at read concern `majority`:

- the driver sends `readConcern: {level: "majority", afterClusterTime: T}`, T the
  session's operation time, at least the low watermark insert's `operationTime`;
- a member given `afterClusterTime` answers only once its data meets both the level
  and the time (https://www.mongodb.com/docs/manual/reference/read-concern/#afterclustertime):
  at `majority` it waits until its majority-committed snapshot reaches T, then reads that
  snapshot, which holds every majority-committed write up to T;
- a change stream shows only majority-committed changes
  (https://www.mongodb.com/docs/manual/changeStreams/), in oplog order: every change it
  delivers before the low watermark was committed at a time below T, so the chunk holds it.
  Changes the chunk sees after T come before the high watermark (written once the read is
  done, at a later time): the window drops those keys, as on the primary;
- MongoDB's table of causal guarantees gives "read own writes" for `majority` reads after
  `w: 1` writes (https://www.mongodb.com/docs/manual/core/causal-consistency-read-write-concerns/);
  `local` reads are not in it: a secondary's local data may hold writes a failover rolls
  back, which no stream shows.

The same rule holds on the primary, where it also closes the gap a plain read leaves: a
write given an oplog time before the low watermark's but committed after it ("oplog
holes") is in the stream before the watermark, yet a `local` read begun in between
misses it; a majority snapshot at T has no such hole. The cost: each read waits until
the low watermark is replicated to a majority, and on a secondary until that member has
applied it (its replication lag).
"""

from __future__ import annotations

import json
from typing import Any

from cdc_core.config.connector_config import ConnectorConfig
from cdc_core.errors import ConfigError

MODE = "mongodb.snapshot.read.preference"
TAGS = "mongodb.snapshot.read.preference.tags"

MODES = ("primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest")
_BY_LOWER = {m.lower(): m for m in MODES}


def mode_name(value: str) -> str | None:
    """MongoDB's name of a read preference mode written in any case, or None."""
    return _BY_LOWER.get(str(value).strip().lower())


def check_mode(value: Any) -> str | None:
    if mode_name(value) is None:
        return f"expected one of {', '.join(MODES)} (MongoDB's read preference modes), got {value!r}"
    return None


def parse_tags(text: str) -> list[dict[str, str]]:
    """A JSON array of tag sets, each an object of strings (`[{"dc": "east"}, {}]`, the
    driver's `tag_sets`); raises ValueError saying what is wrong."""
    try:
        tags = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at offset {exc.pos})") from None
    if not isinstance(tags, list) or not tags:
        raise ValueError('expected a non-empty JSON array of tag sets, such as [{"dc": "east"}, {}]')
    for tag_set in tags:
        if not isinstance(tag_set, dict) or not all(isinstance(v, str) for v in tag_set.values()):
            raise ValueError(f'a tag set is an object of strings ({{"dc": "east"}}), got {tag_set!r}')
    return tags


def check_tags(value: Any) -> str | None:
    try:
        parse_tags(value)
    except ValueError as exc:
        return str(exc)
    return None


def read_preference(config: ConnectorConfig) -> Any:
    """The pymongo read preference of the snapshot's reads. Tag sets pick among
    secondaries: the primary has none to match, so `primary` with tags is refused."""
    from pymongo import read_preferences

    mode = mode_name(config.get(MODE)) or "primary"
    text = config.get(TAGS)
    tags = parse_tags(text) if text else None
    if mode == "primary":
        if tags:
            raise ConfigError(
                TAGS, f"tag sets pick secondaries; {MODE} is primary (set it to a mode that reads them)"
            )
        return read_preferences.Primary()
    classes = {
        "primaryPreferred": read_preferences.PrimaryPreferred,
        "secondary": read_preferences.Secondary,
        "secondaryPreferred": read_preferences.SecondaryPreferred,
        "nearest": read_preferences.Nearest,
    }
    return classes[mode](tag_sets=tags)


class SnapshotReads:
    """The session a MongoSession's watermark writes and snapshot reads share, and the
    collections its reads go through (the configured read preference, `majority`)."""

    def __init__(self, client: Any, preference: Any) -> None:
        self.client = client
        self.preference = preference  # `read_preference(config)`
        self._session: Any = None

    @property
    def session(self) -> Any:
        """The causally consistent session (started on first use): pymongo adds
        `afterClusterTime`, its operation time, to every read with a read concern."""
        if self._session is None:
            self._session = self.client.start_session(causal_consistency=True)
        return self._session

    def collection(self, database: str, name: str) -> Any:
        from pymongo.read_concern import ReadConcern

        return self.client[database].get_collection(
            name, read_preference=self.preference, read_concern=ReadConcern("majority")
        )

    def close(self) -> None:
        if self._session is not None:
            self._session.end_session()
            self._session = None
