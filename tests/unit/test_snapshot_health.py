"""A stalled snapshot is told apart from a running one, shown with what to do, and the
snapshot DAG's wait runs the chunk job again for it instead of waiting for ever."""

from __future__ import annotations

import asyncio
import os
import time

import orjson
import pytest
import yaml

from cdc_core.offsets.store import FileOffsetStore
from cdc_core.snapshot.context import Snapshot, SnapshotContext, TableProgress
from cdc_core.snapshot.health import snapshot_health
from tests.support.streamer import OFFLINE_CONNECTOR

SPARK_SNAPSHOT = Snapshot(
    "snap-1",
    "sig-1",
    "incremental",
    (TableProgress("shop.a", ("id",), windows_total=4, windows_done=2, done_windows=(0, 1)),),
    100,
    started_ms=1,
    reader="spark",
)


def committed(snapshot: Snapshot = SPARK_SNAPSHOT) -> dict:
    return SnapshotContext((snapshot,)).progress()["running"][0]


def test_a_spark_snapshot_with_windows_left_and_none_being_read_is_stalled():
    snap = committed()
    stalled = snapshot_health(snap, {"id": "snap-1", "open_windows": 0, "idle_ms": 300_000}, 120)
    assert stalled["state"] == "stalled" and stalled["windows_left"] == 2
    assert "run it again" in stalled["problem"].lower() and "shop.a" in stalled["problem"]
    # Not (yet) stalled: recently active, or windows open (then waiting once idle long), or
    # windows queued for the streamer's reader, or paused, or read in-process.
    assert (
        snapshot_health(snap, {"id": "snap-1", "open_windows": 0, "idle_ms": 5_000}, 120)["state"]
        == "running"
    )
    waiting = snapshot_health(snap, {"id": "snap-1", "open_windows": 3, "idle_ms": 300_000}, 120)
    assert waiting["state"] == "waiting" and "3 window(s) open" in waiting["problem"]
    queued = committed(
        Snapshot(
            **{**SPARK_SNAPSHOT.__dict__, "tables": (TableProgress("shop.a", ("id",), windows_total=4),)}
        )
    )
    queued["tables"][0]["read_again"] = 1
    assert (
        snapshot_health(queued, {"id": "snap-1", "open_windows": 0, "idle_ms": 300_000}, 120)["state"]
        == "running"
    )
    paused = committed(Snapshot(**{**SPARK_SNAPSHOT.__dict__, "paused": True}))
    assert snapshot_health(paused, {"open_windows": 0, "idle_ms": 300_000}, 120)["state"] == "paused"
    inprocess = committed(Snapshot(**{**SPARK_SNAPSHOT.__dict__, "reader": "inprocess"}))
    assert snapshot_health(inprocess, {"open_windows": 0, "idle_ms": 300_000}, 120)["state"] == "running"
    assert snapshot_health(snap, None, 120)["state"] == "running"  # no streamer: its own health says so


@pytest.fixture
def stalled_connector(tmp_path):
    """A connector whose committed state has a Spark snapshot half done and whose running
    streamer has no window open and saw no watermark for five minutes."""
    state = tmp_path / "state"
    state.mkdir()
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "shop",
                **OFFLINE_CONNECTOR,
                "state.directory": str(state),
                "airflow.snapshot.stall.seconds": 60,
            }
        )
    )
    context = SnapshotContext((SPARK_SNAPSHOT,))
    FileOffsetStore(state / "offsets.json", "shop").commit({"source": {}, "snapshot": context.to_json()})
    live = {**context.progress(), "open_windows": 0}
    live["running"][0] |= {"open_windows": 0, "idle_ms": 300_000}
    # written by a streamer that runs (this process), so its live view counts
    (state / "status.json").write_bytes(
        orjson.dumps(
            {"state": "running", "pid": os.getpid(), "updated_at": "2026-01-01T00:00:00Z", "snapshots": live}
        )
    )
    return config


def test_the_wait_trigger_fires_stalled_with_the_reason(stalled_connector):
    from tidemark_airflow.triggers.snapshot import SnapshotReleasedTrigger

    trigger = SnapshotReleasedTrigger(str(stalled_connector), "sig-1", 30, 0.1, 60, settle_seconds=1.5)
    path, kwargs = trigger.serialize()
    assert path.endswith("SnapshotReleasedTrigger") and kwargs["stall_seconds"] == 60

    async def first():
        async for event in trigger.run():
            return event.payload

    began = time.monotonic()
    event = asyncio.run(first())
    assert event["status"] == "stalled" and "chunk job is not running" in event["message"]
    # Never within its settling time: Airflow 3.3 fails a task whose trigger fires before the
    # scheduler has seen the deferring worker exit (apache/airflow#67287).
    assert time.monotonic() - began >= 1.5


def test_the_wait_runs_the_chunk_job_again_on_a_stall_a_bounded_number_of_times(monkeypatch):
    from airflow.sdk.exceptions import AirflowException, TaskDeferred
    from tidemark_airflow.sensors import snapshot as sensor_module

    runs = []
    monkeypatch.setattr(sensor_module, "submit_job", lambda *args: runs.append(args))
    sensor = sensor_module.SnapshotReleasedSensor(
        task_id="wait",
        connector="shop",
        signal_id="sig-1",
        chunk_job_args=["--signal", "sig-1"],
        max_reruns=2,
    )
    monkeypatch.setattr(sensor, "_config_file", lambda: ("c.yaml", 600.0, 60.0))
    stalled = {"status": "stalled", "message": "2 window(s) of shop.a are neither released nor being read"}
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute_complete({}, stalled, reruns=1)
    assert deferred.value.kwargs == {"reruns": 2} and deferred.value.trigger.stall_seconds == 60.0
    (run,) = runs
    assert run[0] == "shop" and run[1] == "incremental_snapshot" and run[3] == ["--signal", "sig-1"]
    with pytest.raises(AirflowException, match="ran again 2 times"):
        sensor.execute_complete({}, stalled, reruns=2)
    assert len(runs) == 1
    released = sensor.execute_complete({}, {"status": "released", "snapshot": {"tables": []}})
    assert released == {"tables": []}


def test_a_snapshot_released_within_seconds_is_not_deferred_and_a_longer_one_is(monkeypatch):
    """A deferral costs at least the trigger's settling time: the sensor watches in its
    worker first (`watch_inline`), and defers only what is not done by then."""
    from airflow.sdk.exceptions import TaskDeferred
    from tidemark_airflow.sensors import snapshot as sensor_module
    from tidemark_airflow.triggers import polling

    sensor = sensor_module.SnapshotReleasedSensor(task_id="wait", connector="shop", signal_id="sig-1")
    monkeypatch.setattr(sensor, "_config_file", lambda: ("c.yaml", 600.0, 60.0))
    checks = []

    def progress(_doc, _signal):
        checks.append(time.monotonic())
        return ("finished", {"tables": []}) if len(checks) >= 3 else ("running", {"tables": []})

    monkeypatch.setattr(sensor_module.state, "status_of_file", lambda _path: {})
    monkeypatch.setattr(sensor_module.state, "snapshot_progress", progress)
    assert sensor.execute({}) == {"tables": []}  # the third check: no deferral
    assert len(checks) == 3 and checks[-1] - checks[0] >= 1.5

    monkeypatch.setattr(sensor_module.state, "snapshot_progress", lambda *_: ("running", {"tables": []}))
    monkeypatch.setattr(sensor_module, "watch_inline", lambda check, **kw: polling.watch_inline(check, 0.3))
    with pytest.raises(TaskDeferred):
        sensor.execute({})


def test_a_refused_signal_ends_the_wait_with_the_streamers_reason():
    """Not a two-hour wait blaming the streamer: it said why at once."""
    from tidemark_airflow.hooks import state
    from tidemark_airflow.triggers.snapshot import SnapshotReleasedTrigger

    refusal = {
        "id": "sig-9",
        "type": "execute-snapshot",
        "channel": "source",
        "reason": "matches no known table",
    }
    doc = {"snapshots": {"running": [], "finished": [], "failed_signals": [refusal]}, "streamer": {}}
    where, entry = state.snapshot_progress(doc, "sig-9")
    assert (where, entry) == ("refused", refusal)
    assert SnapshotReleasedTrigger("/c.yaml", "sig-9", 7200, 2.0, 120)._outcome(doc, where, entry, False) == {
        "status": "refused",
        "message": "the streamer refused snapshot signal sig-9: matches no known table",
    }
