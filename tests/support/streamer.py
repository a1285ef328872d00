"""Run the real streamer against the project's MariaDB and read what it produced.

Used by the integration tests, the correctness harness and the demo checks: write a
connector file for a test database, run `tidemark stream` in-process or as a child
process (so it can be SIGTERMed or `kill -9`ed), and read back the embedded event log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pymysql

from cdc_core.config.connector_config import ConnectorConfig, load_config

# A connector file's least content, for tests that never connect (status page, health).
OFFLINE_CONNECTOR = {
    "connector.class": "mysql",
    "topic.prefix": "shop",
    "database.hostname": "127.0.0.1",
    "database.port": 3307,
    "database.user": "tidemark",
    "database.server.id": 5999,
}


@dataclass
class Connector:
    path: Path
    state: Path
    eventlog: Path
    prefix: str

    def config(self) -> ConnectorConfig:
        return load_config(self.path)


def write_connector(
    directory: Path,
    database: str,
    extra: dict[str, Any] | None = None,
    prefix: str = "tm",
    port: int | None = None,
) -> Connector:
    """A connector file capturing `database.*`, with its state and log under `directory`."""
    props: dict[str, Any] = {
        "connector.class": "mysql",
        "database.hostname": "127.0.0.1",
        "database.port": port or int(os.environ["TIDEMARK_MARIADB_PORT"]),
        "database.server.id": 6000 + (abs(hash(database)) % 1000),
    }
    return connector_file(directory, database, {**props, **(extra or {})}, prefix)


def connector_file(directory: Path, database: str, props: dict[str, Any], prefix: str = "tm") -> Connector:
    """A test connector file: `props` (the source's own) with what every test connector
    has: its name, a table filter on `database`, state and log under `directory`, and
    short flush and retry intervals."""
    import yaml

    state = directory / "state"
    eventlog = directory / "eventlog"
    full: dict[str, Any] = {
        "name": f"test-{database}",
        "topic.prefix": prefix,
        "database.user": os.environ["TIDEMARK_DB_USER"],
        "table.include.list": f"{database}\\..*",
        "state.directory": str(state),
        "sink.local.directory": str(eventlog),
        "offset.flush.interval.ms": 100,
        "errors.retry.delay.initial.ms": 100,
        "errors.retry.delay.max.ms": 1000,
        **props,
    }
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "connector.yaml"
    path.write_text(yaml.safe_dump(full, sort_keys=False))
    return Connector(path, state, eventlog, prefix)


def kafka_connector(
    directory: Path, database: str, bootstrap: str, name: str, extra: dict[str, Any] | None = None
) -> Connector:
    """A connector writing to the real Kafka broker under a topic prefix unique to this run."""
    prefix = f"{name}{int(time.time() * 1000)}"
    props = {"sink.type": "kafka", "sink.kafka.bootstrap.servers": bootstrap, **(extra or {})}
    return write_connector(directory, database, props, prefix=prefix)


@contextmanager
def running_in_process(connector: Connector, **run_kwargs: Any) -> Iterator[Any]:
    """The streamer in a background thread of this process; stopped on exit."""
    from cdc_core.pipeline.streamer import Streamer

    streamer = Streamer(connector.config())
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("code", streamer.run(**run_kwargs)), daemon=True
    )
    thread.start()
    wait_for(
        lambda: streamer.layout.status.exists() or "code" in result or streamer.committed is not None, 30
    )
    try:
        yield streamer
    finally:
        streamer.request_stop()
        thread.join(60)
        assert not thread.is_alive(), "streamer did not stop"
    streamer.exit_code = result.get("code")


def start_process(
    connector: Connector,
    *args: str,
    log: Path | None = None,
    new_session: bool = False,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`new_session`: the streamer leads a process group of its own (with its decoder), so
    a test can signal the whole group, as Airflow does, without signalling itself. `env`:
    more environment for it (this process's own is never changed)."""
    with open(log or connector.path.with_suffix(".log"), "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdc_core.cli",
                "stream",
                "--config",
                str(connector.path),
                "--status-line",
                "never",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=new_session,
        )


def run_to_exit(connector: Connector, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`tidemark stream` expected to stop by itself (bad configuration, lost position, ...)."""
    return subprocess.run(
        [sys.executable, "-m", "cdc_core.cli", "stream", "--config", str(connector.path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    proc.send_signal(sig)
    return wait_process(proc, timeout)


def wait_process(proc: subprocess.Popen[bytes], timeout: float, log: Path | None = None) -> int:
    """`proc`'s exit code; a process still running after `timeout` is asked for its
    threads' stacks (the CLI's SIGUSR1), and the failure shows them with its log's tail."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        tail = log.read_text(errors="replace")[-6000:] if log and log.exists() else "(no log given)"
        raise AssertionError(
            f"the process is still running after {timeout}s; its log ends:\n{tail}"
        ) from None


def wait_for(predicate: Any, timeout: float, interval: float = 0.1, message: str = "condition") -> Any:
    """The predicate's first true value (a found thing, or True), polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def settled(value: Any, quiet: float = 1.0, timeout: float = 30, message: str = "the value to settle") -> Any:
    """`value()` once it has not changed for `quiet` seconds: what a paused snapshot has
    released when the windows begun before its pause are out, however late the stream is.
    A value that keeps changing (a snapshot that goes on) fails after `timeout`."""
    deadline = time.monotonic() + timeout
    last, since = value(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = value()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return last
    raise AssertionError(f"timed out after {timeout}s: {message}")


def read_raw(connector: Connector, topic: str) -> list[tuple[Any, Any, dict[str, bytes]]]:
    """(key, value, headers) of every record of a topic, as written (schema part included)."""
    from cdc_core.sinks.local_log import LocalEventLogReader

    if not (connector.eventlog / topic).is_dir():
        return []
    return [
        (orjson.loads(r.key) if r.key else None, orjson.loads(r.value) if r.value else None, r.headers)
        for r in LocalEventLogReader(connector.eventlog).read(topic)
    ]


def cut_at_end(connector: Connector) -> bool:
    """Whether the log's latest cut reaches every topic's end. A merge reads up to that cut
    (`spark_jobs.merge.log_range`), and the writer records it only after the records it
    covers are visible: a merge started in between leaves the last records to the next one.
    A test that merges while the streamer runs and checks the result waits for this too."""
    from cdc_core.sinks.local_log import LocalEventLogReader
    from cdc_core.sinks.log_cuts import read_cut

    cut = read_cut(connector.eventlog)
    if cut is None:
        return False
    reader = LocalEventLogReader(connector.eventlog)
    return all(cut.offsets.get(t, 0) >= reader.end_offset(t) for t in reader.topics())


def unwrap(message: Any) -> Any:
    """The payload of a Kafka Connect JSON message with or without its schema part."""
    if isinstance(message, dict) and set(message) == {"schema", "payload"}:
        return message["payload"]
    return message


def read_log(connector: Connector, topic: str) -> list[tuple[Any, Any, dict[str, bytes]]]:
    """(key, value, headers) payloads of every record of a topic; value None for tombstones."""
    return [(unwrap(k), unwrap(v), h) for k, v, h in read_raw(connector, topic)]


def payloads(connector: Connector, topic: str) -> list[dict[str, Any]]:
    """Change-event payloads of a topic, tombstones dropped."""
    return [v for _, v, _ in read_log(connector, topic) if v is not None]


def admin(params: dict[str, Any], database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(**params, database=database, autocommit=True)


def topic(c: Connector, db: str, table: str) -> str:
    """The topic of a table's change events."""
    return f"{c.prefix}.{db}.{table}"


def stopped_by(connector: Connector, db: pymysql.Connection, *statements: Any) -> str:
    """The log of a streamer child that ran `statements` (once it had committed its start;
    a callable among them is waited for) and stopped with an error."""
    log = connector.path.with_suffix(".log")
    proc = start_process(connector, log=log)
    try:
        wait_for(lambda: any(connector.state.rglob("*offset*")), 30, message="the first offsets")
        with db.cursor() as cur:
            for statement in statements:
                if callable(statement):
                    wait_for(statement, 60, message="what the test waits for")
                else:
                    cur.execute(statement)
        assert wait_process(proc, 60, log) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
    return log.read_text()
