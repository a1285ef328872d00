"""The Spark chunk job's plan: every window of one snapshot, kept beside its staged
windows so that a run after a failure or a kill reads the same windows.

A run skips the windows the streamer has already released, by their index in the plan
(`done_windows`), so a second run must see the plan the first one saved: planned again
over a table that changed meanwhile, index 3 would be another range, and skipping it
would lose that range's rows. So the plan is written whole or not at all (a temporary
file moved into place), and a run that finds no plan for a snapshot some of whose
windows were released stops instead of planning again.

Typed JSON with a version: `{"version": 1, "signal": ..., "windows": [...]}`, each
window as `plan_windows` makes it. Version 0, written until 2026-11-29, is the bare list
of windows, without the signal; it is read as it is.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from cdc_core.errors import TidemarkError
from cdc_core.snapshot.staging import filesystem_for, write_bytes_whole

PLAN_VERSION = 1
WINDOW_FIELDS = ("table", "key", "condition", "lo", "hi", "index", "of", "exact")


_PLAIN = re.compile(r"[A-Za-z0-9._~@+=,-]{1,128}")


def signal_folder(staging: str, signal_id: str) -> str:
    """The folder of a snapshot's plan and staged windows under `staging`: the signal's id
    where it is a plain name (every id Airflow or a person types; the folder it has always
    been), else a name made of its plain characters and a digest of the whole id. A
    MongoDB signal's `{"$oid": "..."}` holds quotes, braces, a `$`, a colon and a space,
    and a colon in a path segment is more than Hadoop's paths take (the Delta merge reads
    a lakehouse release's staged files with Spark)."""
    if _PLAIN.fullmatch(signal_id) and signal_id not in (".", ".."):
        name = signal_id
    else:
        plain = re.sub(r"[^A-Za-z0-9._-]+", "_", signal_id).strip("._")[:64]
        name = f"signal-{plain}-{hashlib.sha256(signal_id.encode()).hexdigest()[:16]}"
    return f"{staging.rstrip('/')}/{name}"


def plan_uri(staging: str, signal_id: str) -> str:
    return f"{signal_folder(staging, signal_id)}/plan.json"


def load_plan(uri: str, signal_id: str) -> list[dict[str, Any]] | None:
    """The saved windows of snapshot `signal_id`; None when no plan was saved."""
    filesystem, path = filesystem_for(uri)
    try:
        with filesystem.open_input_stream(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        raise TidemarkError(f"the snapshot plan {uri} is not JSON (a torn write?): {_REMEDY}") from None
    if isinstance(body, list):  # version 0
        windows = body
    elif not isinstance(body, dict) or body.get("version") != PLAN_VERSION:
        version = body.get("version") if isinstance(body, dict) else None
        raise TidemarkError(
            f"the snapshot plan {uri} has version {version!r}; this job reads 0 and {PLAN_VERSION}"
        )
    elif body.get("signal") != signal_id:
        raise TidemarkError(
            f"the snapshot plan {uri} is snapshot {body.get('signal')!r}'s, not {signal_id!r}"
        )
    else:
        windows = body.get("windows")
    if not isinstance(windows, list) or not all(
        isinstance(w, dict) and all(f in w for f in WINDOW_FIELDS) for w in windows
    ):
        raise TidemarkError(f"the snapshot plan {uri} does not hold a list of windows: {_REMEDY}")
    return windows


def save_plan(uri: str, signal_id: str, windows: list[dict[str, Any]]) -> None:
    """Write the plan whole (`write_whole`): never torn by a kill."""
    write_bytes_whole(
        uri, json.dumps({"version": PLAN_VERSION, "signal": signal_id, "windows": windows}).encode()
    )


def check_unplanned(uri: str, signal_id: str, released: Mapping[Any, set[int]]) -> None:
    """Refuse to plan a snapshot again once any of its windows was released."""
    count = sum(len(indexes) for indexes in released.values())
    if count:
        raise TidemarkError(
            f"snapshot {signal_id!r} has {count} window(s) released but no plan at {uri}: a new plan "
            f"would number its windows differently and skip the wrong ones. Run with the staging "
            f"location of the snapshot's first run, or stop the snapshot (a stop-snapshot signal) "
            f"and start it again"
        )


_REMEDY = (
    "if no window of this snapshot has been released yet, delete it to plan again; "
    "otherwise stop the snapshot and start it again"
)
