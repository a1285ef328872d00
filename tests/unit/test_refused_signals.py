"""Refused signals are kept for `signal.refused.retention.days`, not by a count: with 20
kept, older refusals vanished from `tidemark status` after a burst of bad signals. The
frozen offsets file (`data/offsets_refused_signals_v1.json`) holds the 20 a streamer kept
before the change, in the snapshot state's format version 1."""

from __future__ import annotations

import shutil
from pathlib import Path

from cdc_core.config.connector_config import load_config
from cdc_core.offsets.store import FileOffsetStore
from cdc_core.snapshot.context import CONTEXT_VERSION, DAY_MS, MAX_REASON, MAX_REFUSED, SnapshotContext

DATA = Path(__file__).parent / "data"
WRITTEN_AT_MS = 1_764_547_200_000 + 19 * 60_000  # the newest refusal of the frozen file


def _frozen(tmp_path) -> SnapshotContext:
    shutil.copy(DATA / "offsets_refused_signals_v1.json", tmp_path / "offsets.json")
    offset = FileOffsetStore(tmp_path / "offsets.json", "shop").load()
    return SnapshotContext.from_json(offset["snapshot"])


def _refusal(n: int) -> dict[str, object]:
    return {"id": f"later-{n}", "type": "execute-snapshot", "channel": "source", "reason": "bad"}


def test_refusals_within_the_time_kept_all_stay_past_the_old_count_of_20(tmp_path):
    context = _frozen(tmp_path)
    assert [r["id"] for r in context.refused] == [f"bad-{i:02d}" for i in range(20)]
    now = WRITTEN_AT_MS + 3_600_000
    for n in range(30):
        context = context.refuse(_refusal(n), 7 * DAY_MS, now + n)
    ids = [r["id"] for r in context.refused]
    assert len(ids) == 50 and ids[0] == "bad-00" and ids[-1] == "later-29"
    assert context.refused[0]["reason"] == "unknown signal type 'execute-snapshots'; known: " + (
        "execute-snapshot, log, pause-snapshot, resume-snapshot, stop-snapshot"
    )
    stored = context.to_json()
    assert stored["version"] == CONTEXT_VERSION
    again = SnapshotContext.from_json(stored)
    assert again.refused == context.refused
    assert [r["id"] for r in again.progress()["failed_signals"]] == ids


def test_refusals_older_than_the_time_kept_are_forgotten(tmp_path):
    context = _frozen(tmp_path)
    # two days kept, asked 2 days and 10 minutes after the first one: the first ten have gone
    now = 1_764_547_200_000 + 2 * DAY_MS + 10 * 60_000
    kept = context.keep_refused(2 * DAY_MS, now)
    assert [r["id"] for r in kept.refused] == [f"bad-{i:02d}" for i in range(10, 20)]
    later = context.refuse(_refusal(0), 7 * DAY_MS, WRITTEN_AT_MS + 8 * DAY_MS)
    assert [r["id"] for r in later.refused] == ["later-0"]
    assert context.keep_refused(7 * DAY_MS, WRITTEN_AT_MS) is context  # nothing to forget


def test_a_flood_is_capped_and_counted_and_long_reasons_are_cut(tmp_path):
    context = _frozen(tmp_path)
    for n in range(MAX_REFUSED + 30):
        context = context.refuse(_refusal(n), 7 * DAY_MS, WRITTEN_AT_MS + 1 + n)
    assert len(context.refused) == MAX_REFUSED and context.refused[-1]["id"] == f"later-{MAX_REFUSED + 29}"
    assert context.refused_dropped == 50  # the frozen 20 and the first 30 of the flood
    assert context.progress()["failed_signals_dropped"] == 50
    assert SnapshotContext.from_json(context.to_json()).refused_dropped == 50
    long = context.refuse({**_refusal(-1), "reason": "x" * 5000}, 7 * DAY_MS, WRITTEN_AT_MS + 10**6)
    assert len(long.refused[-1]["reason"]) == MAX_REASON
    # once the time kept passes the dropped ones (older than any kept), the count goes too
    assert long.keep_refused(DAY_MS, WRITTEN_AT_MS + DAY_MS + 100).refused_dropped == 0


def test_the_time_kept_is_a_property(tmp_path):
    path = tmp_path / "c.yaml"
    base = "name: c\nconnector.class: mongodb\ntopic.prefix: c\nmongodb.connection.string: mongodb://h/\n"
    path.write_text(base)
    assert load_config(path, environ={}).get("signal.refused.retention.days") == 7
    path.write_text(base + "signal.refused.retention.days: 30\n")
    assert load_config(path, environ={}).get("signal.refused.retention.days") == 30
