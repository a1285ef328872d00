"""Whether a running snapshot is moving, and if not, why and what to do.

A snapshot read by an external reader (the Spark chunk job) advances only while that
reader writes windows. When the job has died or ended with windows left (killed, or
windows of another run refused and not yet read again), nothing in the streamer will
read them: the snapshot stalls. That must be visible (status page, `tidemark status`)
and actionable (the Airflow snapshot DAG runs the job again), never silent.

Inputs are the committed progress (`SnapshotContext.progress()`) and, when the streamer
is running, its live view (`SnapshotStage.progress()`: open windows and how long ago
the snapshot last saw a watermark).
"""

from __future__ import annotations

from typing import Any

DEFAULT_STALL_SECONDS = 120.0


def snapshot_health(
    snap: dict[str, Any], live: dict[str, Any] | None, stall_seconds: float = DEFAULT_STALL_SECONDS
) -> dict[str, Any]:
    """{"state": "running" | "paused" | "waiting" | "stalled", "problem": text or None,
    "windows_left": n}. `live` is the streamer's entry for the same snapshot (None when
    it is not running: the streamer's own health says so)."""
    tables = snap.get("tables", [])
    left = sum(
        max((t.get("windows_total") or 0) - t.get("windows_done", 0), 0) for t in tables if not t.get("done")
    )
    queued = sum(t.get("read_again", 0) for t in tables)
    state: dict[str, Any] = {"state": "running", "problem": None, "windows_left": left}
    if snap.get("paused"):
        return {**state, "state": "paused"}
    if snap.get("reader", "inprocess") == "inprocess" or live is None or queued:
        return state  # the streamer's own reader is on it
    idle = (live.get("idle_ms") or 0) / 1000
    if idle < stall_seconds:
        return state
    if live.get("open_windows"):
        return {
            **state,
            "state": "waiting",
            "problem": f"{live['open_windows']} window(s) open without a high watermark for {idle:.0f}s: "
            "is the chunk job running? If it died, run it again (it reads only the windows not yet released)",
        }
    unfinished = ", ".join(t["table"] for t in tables if not t.get("done")) or "?"
    return {
        **state,
        "state": "stalled",
        "problem": f"{left or 'some'} window(s) of {unfinished} are neither released nor being read, "
        f"and no watermark came for {idle:.0f}s: the chunk job is not running. Run it again "
        "(it reads only the windows not yet released); the tidemark_snapshot DAG does so itself",
    }


def live_entry(live_progress: dict[str, Any] | None, snap: dict[str, Any]) -> dict[str, Any] | None:
    """The streamer's live entry for the committed snapshot `snap`, if it has one."""
    for entry in (live_progress or {}).get("running", []):
        if entry.get("id") == snap.get("id"):
            return entry
    return None
