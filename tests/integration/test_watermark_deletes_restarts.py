"""`insert_delete` watermarks across `kill -9`s of the streamer mid-snapshot (MongoDB,
whose delete events carry only the `_id`): every window is released once its open
document's delete comes, also when the streamer was killed between the two, and the
signal collection ends as it began. Against the MongoDB test server, or a real
deployment when TIDEMARK_MONGODB_URI is set."""

from __future__ import annotations

import signal as signals
import threading
import time

import pytest
from bson import json_util

from tests.support.mongo.capture import AS_CLIENT, connector, synced
from tests.support.mongo.capture import signal as send
from tests.support.snapshots import finished, status
from tests.support.streamer import read_log, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration


def test_windows_closed_by_deletes_survive_kills_of_the_streamer(mongodb, mongo_db, tmp_path):
    db = mongo_db
    db["t"].insert_many([{"_id": i, "v": 0} for i in range(6000)])
    extra = {
        "incremental.snapshot.chunk.size": 100,
        "incremental.snapshot.watermarking.strategy": "insert_delete",
    }
    c = connector(mongodb, tmp_path, db.name, extra)
    stop = threading.Event()

    def write() -> None:  # updates only grow `v`; a few deletes
        n = 0
        while not stop.is_set():
            n += 1
            db["t"].update_one({"_id": (n * 37) % 6000}, {"$inc": {"v": 1}})
            if n % 50 == 0:
                db["t"].delete_one({"_id": (n * 11) % 6000})
            time.sleep(0.003)

    writer = threading.Thread(target=write, daemon=True)
    proc = start_process(c)
    try:
        wait_for(lambda: (c.state / "status.json").exists(), 60, message="the streamer to start")
        writer.start()
        send(c, "del-1", {"data-collections": [f"{db.name}.t"]})
        released = 0
        for _ in range(2):  # killed while its reader works through the windows
            wait_for(
                lambda pid=proc.pid, before=released: (
                    status(c).get("pid") == pid and (_released(c) > before or finished(c, "del-1"))
                ),
                120,
                interval=0.1,
                message="this run to release windows",
            )
            if finished(c, "del-1"):
                break
            released = _released(c)
            proc.send_signal(signals.SIGKILL)
            proc.wait(30)
            proc = start_process(c)
        assert released > 0, "no kill came while the snapshot ran"
        wait_for(
            lambda: finished(c, "del-1") is not None, 240, interval=0.3, message="the snapshot to finish"
        )
        stop.set()
        writer.join(30)
        synced(db, c)
        assert stop_process(proc) == 0
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    # After a kill the unacknowledged tail is delivered again: events are applied by
    # their order key, as the Delta merge applies them, not by their place in the log.
    versions: dict = {}
    for key, value, _ in read_log(c, f"{c.prefix}.{db.name}.t"):
        if value is None:
            continue
        block = value["transaction"]
        order = (block["transaction_epoch"], block["transaction_rank"], block["total_order"])
        # (an update's looked-up document is null once the document was deleted since)
        after = None if value["after"] is None else json_util.loads(value["after"], json_options=AS_CLIENT)
        versions.setdefault(json_util.loads(key["id"], json_options=AS_CLIENT), []).append((order, after))
    state = {}
    for _id, seen in versions.items():
        seen.sort(key=lambda s: s[0])
        alive = [after["v"] for _, after in seen if after is not None]
        assert alive == sorted(alive), f"{_id} went back in time: {alive}"
        if seen[-1][1] is not None:
            state[_id] = seen[-1][1]
    assert state == {d["_id"]: d for d in db["t"].find()}
    left = list(db["debezium_signal"].find({"type": {"$regex": "^snapshot-window-"}}))
    assert left == [], f"{len(left)} watermark documents left"


def _released(c) -> int:
    running = (status(c).get("snapshots") or {}).get("running") or []
    return sum(t["windows_done"] for s in running for t in s["tables"])
