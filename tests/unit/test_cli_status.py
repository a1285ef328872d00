"""`tidemark status` without a server: a streamer killed without a word is told from a
running one and only committed progress is shown; every source answers with its head or
the reason, never None and never a secret; `tidemark signal`'s kafka channel sends what
the streamer's kafka channel reads."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import orjson
import pytest
import yaml

from cdc_core.commands.status import print_status, source_head, status_document
from cdc_core.config.connector_config import load_config
from cdc_core.offsets.store import FileOffsetStore
from cdc_core.pipeline.liveness import not_running_reason, process_identity, with_liveness
from cdc_core.snapshot.context import Snapshot, SnapshotContext, TableProgress
from tests.support.streamer import OFFLINE_CONNECTOR


def _now_text(offset: float = 0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_streamer_is_running_only_while_its_process_lives():
    me = {"state": "running", **process_identity(), "updated_at": _now_text(-3600)}
    assert not_running_reason(me) is None  # its process lives: not judged by the file's age
    gone = {**me, "pid": _gone_pid()}
    assert f"its process (pid {gone['pid']}) is gone" in not_running_reason(gone)
    taken = {**me, "pid_started": me["pid_started"] - 1}  # the pid, since taken by another process
    assert "belongs to another process" in not_running_reason(taken)
    elsewhere = {"state": "running", "pid": 1, "host": f"not-{socket.gethostname()}"}
    assert not_running_reason({**elsewhere, "updated_at": _now_text(-5)}) is None
    assert "last written" in not_running_reason({**elsewhere, "updated_at": _now_text(-600)})
    stopped = {**gone, "state": "stopped"}
    assert not_running_reason(stopped) is None and with_liveness(stopped) == stopped
    dead = with_liveness({**gone, "snapshots": {"running": []}, "rate": 5.0})
    assert dead["state"] == "dead" and "snapshots" not in dead and "rate" not in dead
    assert dead["pid"] == gone["pid"] and dead["error"].startswith("its process")


@pytest.fixture
def killed_streamer(tmp_path):
    """A connector whose streamer was killed with 2 of 4 windows committed and 3 of 4 in
    the live view its status file kept."""
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "shop", **OFFLINE_CONNECTOR, "state.directory": str(state)}))
    table = TableProgress("shop.a", ("id",), windows_total=4, windows_done=2, done_windows=(0, 1))
    context = SnapshotContext((Snapshot("snap-1", "sig-1", "incremental", (table,), 100, started_ms=1),))
    FileOffsetStore(state / "offsets.json", "shop").commit(
        {"source": {"file": "b.1", "pos": 4}, "snapshot": context.to_json()}
    )
    live = context.progress()
    live["running"][0]["tables"][0]["windows_done"] = 3  # released, not committed
    status = {
        "state": "running",
        "pid": _gone_pid(),
        "updated_at": _now_text(),
        "events_total": 7,
        "snapshots": live,
    }
    (state / "status.json").write_bytes(orjson.dumps(status))
    return load_config(path)


def test_a_killed_streamers_status_says_it_is_not_running_and_shows_committed_progress(
    killed_streamer, capsys
):
    doc = status_document(killed_streamer, check_source=False)
    assert doc["streamer"]["state"] == "dead" and "snapshots" not in doc["streamer"]
    print_status(doc, killed_streamer)
    out = capsys.readouterr().out
    assert "streamer    not running: its process" in out and "progress below is as committed" in out
    assert "windows 2/4" in out and "windows 3/4" not in out
    assert "streamer    running" not in out


class _Connector:
    def __init__(self, source):
        self.source = source

    def create_source(self, config, history):
        return self.source


class _Source:
    def __init__(self, head=None, error=None):
        self.head, self.error, self.closed = head, error, False

    def status(self, offset):
        from cdc_core.source import SourceStatus

        if self.error:
            raise self.error
        return SourceStatus("x", "p", self.head)

    def close(self):
        self.closed = True


def test_every_source_answers_with_a_head_or_a_reason_and_never_a_secret(tmp_path, monkeypatch):
    import cdc_core.connectors.registry as registry

    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump({"name": "shop", **OFFLINE_CONNECTOR, "state.directory": str(tmp_path / "s")})
    )
    config = load_config(path, environ={"TIDEMARK_DB_PASSWORD": "hunter2-secret"})
    layout = type("Layout", (), {"history": tmp_path / "history"})()
    for source, expected in (
        (_Source(head="binlog b.1:4"), "binlog b.1:4"),
        (_Source(head=None), "unknown: the connector did not say where the source is"),
        (
            _Source(error=RuntimeError("login hunter2-secret refused")),
            "unavailable: RuntimeError: login *** refused",
        ),
    ):
        monkeypatch.setattr(registry, "connector_of", lambda config, s=source: _Connector(s))
        assert source_head(config, None, layout) == expected
        assert source.closed


def _mongodb_config(tmp_path, password: str | None):
    path = tmp_path / "m.yaml"
    uri = "mongodb://h1:27017,h2:27017/?replicaSet=rs0&tlsCertificateKeyFilePassword=k3y"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "m",
                "connector.class": "mongodb",
                "topic.prefix": "m",
                "mongodb.connection.string": uri,
                "database.user": "cdc",
            }
        )
    )
    return load_config(path, environ={"TIDEMARK_DB_PASSWORD": password} if password else {})


@pytest.mark.parametrize("password", ["s3cret-pw", None])
def test_mongodb_says_its_user_was_refused_without_a_secret(tmp_path, monkeypatch, password):
    import pymongo.errors

    import cdc_core.connectors.mongodb.source as source_module
    from cdc_core.connectors.mongodb.source import MongoSource

    class Refusing:
        closed = False

        class admin:
            @staticmethod
            def command(name):
                raise pymongo.errors.OperationFailure(
                    "Authentication failed.", 18, {"ok": 0, "errmsg": "Authentication failed.", "code": 18}
                )

        def close(self):
            Refusing.closed = True

    monkeypatch.setattr(source_module, "client_for", lambda config, timeout_ms: Refusing())
    config = _mongodb_config(tmp_path, password)
    head = MongoSource(config, None).status(None).head
    assert head.startswith(
        "refused: MongoDB refused the connector's user at h1:27017,h2:27017 (Authentication failed.)"
    )
    hint = (
        "the password from TIDEMARK_DB_PASSWORD"
        if password
        else "no password: set the environment variable TIDEMARK_DB_PASSWORD"
    )
    assert hint in head and "cdc" in head and Refusing.closed
    assert "k3y" not in head and (password is None or password not in head)


def test_mongodb_says_why_its_connection_string_cannot_be_used(tmp_path, monkeypatch):
    import pymongo.errors

    import cdc_core.connectors.mongodb.source as source_module
    from cdc_core.connectors.mongodb.source import MongoSource

    config = _mongodb_config(tmp_path, None)
    uri = config.get("mongodb.connection.string")

    def bad(config, timeout_ms):
        raise pymongo.errors.ConfigurationError(f"cannot parse {uri}")

    monkeypatch.setattr(source_module, "client_for", bad)
    head = MongoSource(config, None).status(None).head
    assert head == "unavailable: mongodb.connection.string cannot be used: cannot parse h1:27017,h2:27017"


def test_the_kafka_channel_gets_the_message_its_reader_takes(tmp_path, monkeypatch):
    """Key `topic.prefix`, value `{"type", "data"}`; the id is the one the streamer gives."""
    import confluent_kafka

    from cdc_core.errors import ConfigError
    from cdc_core.signals.sending import send_through

    sent = []

    class Message:
        def partition(self):
            return 2

        def offset(self):
            return 41

    class Producer:
        def __init__(self, settings):
            sent.append(settings)

        def produce(self, topic, key, value, on_delivery):
            sent.append((topic, key, orjson.loads(value)))
            self.deliver = lambda: on_delivery(None, Message())

        def flush(self, timeout):
            self.deliver()

    monkeypatch.setattr(confluent_kafka, "Producer", Producer)
    path = tmp_path / "c.yaml"
    props = {
        "name": "shop",
        **OFFLINE_CONNECTOR,
        "signal.enabled.channels": "kafka",
        "signal.kafka.topic": "sigs",
        "signal.kafka.bootstrap.servers": "k:9092",
    }
    path.write_text(yaml.safe_dump(props))
    config = load_config(path, environ={})
    data = {"data-collections": ["shop.a"], "type": "incremental"}
    assert send_through("kafka", None, config, "ignored", "execute-snapshot", data) == "kafka-2-41"
    assert sent[0]["bootstrap.servers"] == "k:9092"
    assert sent[1] == ("sigs", b"shop", {"type": "execute-snapshot", "data": data})
    with pytest.raises(ConfigError, match="does not include file"):
        send_through("file", None, config, "x", "log", {"message": "m"})
