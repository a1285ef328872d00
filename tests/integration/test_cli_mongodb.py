"""The `tidemark` command line on a MongoDB connector (the test server, or the deployment
of TIDEMARK_MONGODB_URI): `tidemark signal` through the source and file channels, a
malformed signal refused before it is sent, the source head up and down, a killed
streamer told from a running one, and refused signals past the old count of 20."""

from __future__ import annotations

import json
import os
import signal as signals
import subprocess
import sys
import time

import pytest

from tests.support.mongo.capture import connector
from tests.support.mongo.server import free_port
from tests.support.snapshots import finished
from tests.support.streamer import start_process, stop_process, wait_for, wait_process

pytestmark = pytest.mark.integration


def tidemark(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdc_core.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def started(c) -> None:
    wait_for(
        lambda: (
            (c.state / "status.json").exists()
            and json.loads((c.state / "status.json").read_text())["state"] == "running"
        ),
        60,
        message="the streamer to run",
    )


def test_signals_are_sent_through_the_configured_channel_checked_first_and_followed(
    mongodb, mongo_db, tmp_path
):
    db = mongo_db
    db["orders"].insert_many([{"_id": i, "status": "paid" if i % 2 else "open"} for i in range(40)])
    c = connector(mongodb, tmp_path / "source", db.name, {"incremental.snapshot.chunk.size": 7})
    config = str(c.path)

    # malformed, or naming what the source does not have: refused here, nothing is sent
    for bad, reason in (
        (["--tables", f"{db.name}.orders", "--chunk-size", "0"], "tidemark.chunk-size must be an integer"),
        (["--tables", f"{db.name}.("], "is not a valid regex"),
        (["--tables", f"{db.name}.nothing"], "matches no known table"),
        (["--tables", f"{db.name}.orders", "--condition", f"{db.name}.orders", "status = "], "status = "),
    ):
        refused = tidemark("signal", "execute-snapshot", "--config", config, *bad)
        assert refused.returncode == 1 and "nothing sent" in refused.stderr and reason in refused.stderr, (
            refused.stderr
        )
        assert refused.stdout == ""
    assert db["debezium_signal"].count_documents({}) == 0

    proc = start_process(c)
    try:
        started(c)
        sent = tidemark(
            "signal", "execute-snapshot", "--config", config, "--tables", f"{db.name}\\.orders",
            "--condition", f"{db.name}.orders", "status = 'paid'", "--wait", "--timeout", "60",
        )  # fmt: skip
        assert sent.returncode == 0, sent.stderr
        signal_id = sent.stdout.strip()
        assert signal_id.startswith("cli-") and "acted on signal" in sent.stderr
        stored = db["debezium_signal"].find_one({"_id": signal_id})
        assert stored["type"] == "execute-snapshot"
        assert json.loads(stored["data"])["additional-conditions"][0]["filter"] == "status = 'paid'"
        snapshot = wait_for(lambda: finished(c, signal_id), 120, message="the snapshot")
        (table,) = snapshot["tables"]
        assert table["rows_released"] == 20  # the paid ones

        paused = tidemark(
            "signal", "pause-snapshot", "--config", config, "--id", "pause-1", "--wait", "--timeout", "60"
        )
        assert paused.returncode == 1 and paused.stdout.strip() == "pause-1"
        assert "the streamer refused signal pause-1" in paused.stderr  # no snapshot runs
        logged = tidemark("signal", "log", "--config", config, "--message", "maintenance starts", "--wait")
        assert logged.returncode == 0 and "acted on signal" in logged.stderr
        # as seed 002 (and the README) write one from mongosh: `data` a document, not JSON text
        db["debezium_signal"].insert_one(
            {"_id": "doc-form", "type": "log", "data": {"message": "from mongosh"}}
        )
        wait_for(
            lambda: "from mongosh" in c.path.with_suffix(".log").read_text(), 60, message="the log signal"
        )
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "maintenance starts" in c.path.with_suffix(".log").read_text()

    # a channel the streamer does not read is refused
    other = tidemark("signal", "resume-snapshot", "--config", config, "--channel", "file")
    assert other.returncode == 1 and "signal.enabled.channels" in other.stderr


def test_the_file_channel_and_more_than_twenty_refusals_listed(mongodb, mongo_db, tmp_path):
    db = mongo_db
    signal_file = tmp_path / "signals.jsonl"
    extra = {
        "signal.enabled.channels": "file",
        "signal.file": str(signal_file),
        "signal.poll.interval.ms": 100,
    }
    c = connector(mongodb, tmp_path / "file", db.name, extra)
    config = str(c.path)
    proc = start_process(c)
    try:
        started(c)
        # 25 refusals: with the newest 20 kept, the first five vanished from the status
        with open(signal_file, "a") as f:
            for n in range(25):
                f.write(json.dumps({"id": f"bad-{n}", "type": "execute-snapshot", "data": {}}) + "\n")
            f.write('{"id": "unfinished"')  # a line being written: the CLI starts on a new line
        sent = tidemark(
            "signal", "stop-snapshot", "--config", config, "--id", "stop-1", "--wait", "--timeout", "60"
        )
        assert sent.returncode == 1 and sent.stdout.strip() == "stop-1", sent.stderr
        assert "no incremental snapshot" in sent.stderr or "not running" in sent.stderr, sent.stderr
        lines = signal_file.read_text().splitlines()
        assert lines[-2] == '{"id": "unfinished"'
        assert json.loads(lines[-1]) == {
            "id": "stop-1",
            "type": "stop-snapshot",
            "data": {"type": "incremental"},
        }
        out = tidemark("status", "--config", config, "--offline").stdout
        refused = [line for line in out.splitlines() if line.startswith("refused     signal bad-")]
        assert len(refused) == 25 and "refused     27 signal(s) in the last 7 day(s)" in out, out
        assert "execute-snapshot needs data.data-collections" in refused[0]
        assert stop_process(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_source_head_is_shown_or_why_not_and_a_killed_streamer_is_not_running(
    mongodb, mongo_db, tmp_path
):
    db = mongo_db
    db["orders"].insert_one({"_id": 1})
    password = "pw-that-must-not-show"
    env = {"TIDEMARK_DB_PASSWORD": password}
    c = connector(mongodb, tmp_path / "up", db.name)
    out = tidemark("status", "--config", str(c.path), env=env).stdout
    head = next(line for line in out.splitlines() if line.startswith("source head"))
    assert head.startswith("source head clusterTime "), out  # it said `None`, up or down
    sec, inc = head.split()[-1].split(".")
    assert int(sec) > 1_600_000_000 and int(inc) >= 0

    port = free_port()  # nothing listens there
    down = connector(
        mongodb,
        tmp_path / "down",
        db.name,
        {"mongodb.connection.string": f"mongodb://127.0.0.1:{port}/?replicaSet=rs0"},
    )
    t0 = time.monotonic()
    result = tidemark("--verbose", "status", "--config", str(down.path), env=env)
    assert result.returncode == 0 and time.monotonic() - t0 < 60
    head = next(line for line in result.stdout.splitlines() if line.startswith("source head"))
    assert head.startswith(f"source head unreachable: cannot reach MongoDB at 127.0.0.1:{port}"), head
    doc = json.loads(tidemark("status", "--config", str(down.path), "--json", env=env).stdout)
    assert doc["source_head"].startswith("unreachable: ")
    assert password not in result.stdout + result.stderr

    proc = start_process(c, env=env)
    try:
        started(c)
        running = tidemark("status", "--config", str(c.path), "--offline").stdout
        assert f"streamer    running (pid {proc.pid}" in running
        proc.send_signal(signals.SIGKILL)
        wait_process(proc, 30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads((c.state / "status.json").read_text())["state"] == "running"  # what kill -9 leaves
    killed = tidemark("status", "--config", str(c.path), "--offline").stdout
    assert f"streamer    not running: its process (pid {proc.pid}) is gone" in killed, killed
    assert "progress below is as committed" in killed
    doc = json.loads(tidemark("status", "--config", str(c.path), "--offline", "--json").stdout)
    assert doc["streamer"]["state"] == "dead" and "snapshots" not in doc["streamer"]
