"""The shard primaries' heartbeat writer (`--tablet-heartbeats SECONDS`): what a Vitess
tablet does with `--heartbeat_enable`, so that `stream_keyspace_heartbeats` has rows to
stream.

Every interval, each serving shard of each keyspace gets, in its own autocommit
transaction, `INSERT INTO _vt.heartbeat ... ON DUPLICATE KEY UPDATE ts, tabletUid` with
`keyspaceShard = "<keyspace>:<shard>"`, `ts` in unix nanoseconds and `tabletUid` the shard
server's `server_id` (the double's stand-in for a tablet uid)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

import pymysql

from tests.support.vtgate.topology import Topology

log = logging.getLogger("vtgate.heartbeats")


class HeartbeatWriter:
    def __init__(self, topology: Topology, credentials: dict[str, Any], interval: float) -> None:
        self.topology, self.credentials, self.interval = topology, credentials, interval
        self.stop = threading.Event()
        self._connections: dict[tuple[str, int], pymysql.Connection] = {}

    def start(self) -> None:
        threading.Thread(target=self._run, name="tablet heartbeats", daemon=True).start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            for keyspace, shards in self.topology.load().items():
                for shard in shards:
                    if shard.serving:
                        self._write(keyspace, shard.name, shard.host, shard.port)

    def _write(self, keyspace: str, shard: str, host: str, port: int) -> None:
        try:
            conn = self._connections.get((host, port))
            if conn is None:
                conn = pymysql.connect(
                    host=host, port=port, autocommit=True, connect_timeout=5, **self.credentials
                )
                self._connections[(host, port)] = conn
            with conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO _vt.heartbeat (keyspaceShard, tabletUid, ts) VALUES (%s, @@server_id, %s) "
                    "ON DUPLICATE KEY UPDATE ts = VALUES(ts), tabletUid = VALUES(tabletUid)",
                    (f"{keyspace}:{shard}", time.time_ns()),
                )
        except pymysql.err.MySQLError as exc:  # a shard server away: try again next time
            log.warning("heartbeat for %s/%s not written: %s", keyspace, shard, exc)
            broken = self._connections.pop((host, port), None)
            if broken is not None:
                with contextlib.suppress(Exception):
                    broken.close()
