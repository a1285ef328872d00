"""mongo-java-server with the project's change-stream layer (jvm/mongo/), as a process.

`make install` compiles jvm/mongo/ into .jars/mongo-server next to the server's jars in
.jars/mongo. The server keeps everything in memory: a restart starts an empty
deployment (and a resume token from before it is history lost, code 286), so tests
that take MongoDB away use `kill`/`start` knowing that. Its command and connection
string are the `mongodb` service's (`scripts/services/mongodb.py`); the tests run it on
free ports of their own."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from scripts.services.errors import ServiceError
from scripts.services.mongodb import server_command, server_uri


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MongoTestServer:
    """One in-memory MongoDB 6.0 look-alike: a one-member replica set `rs0`."""

    real = False

    def __init__(self, directory: Path, stock: bool = False, heap: str = "512m") -> None:
        self.directory = directory
        self.port = free_port()
        self.stock = stock
        self.heap = heap  # the JVM's -Xmx: everything, history included, is in memory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return server_uri(self.port, self.stock)

    def start(self) -> None:
        try:
            cmd = server_command(self.port, heap=self.heap, stock=self.stock)
        except ServiceError as exc:
            raise RuntimeError(str(exc)) from None
        log = open(self.directory / "mongo-server.log", "ab")  # noqa: SIM115 (the child writes it)
        self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the MongoDB test server exited; see {self.directory / 'mongo-server.log'}"
                )
            with socket.socket() as s:
                s.settimeout(0.3)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError("the MongoDB test server did not start listening within 60 s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self, **options: Any) -> Any:
        import pymongo

        return pymongo.MongoClient(self.uri, tz_aware=True, serverSelectionTimeoutMS=10_000, **options)

    def forget_history(self, before: Any = None) -> dict[str, Any]:
        """The change events older than `before` (a bson Timestamp; all so far without
        it) forgotten, as a capped oplog rolls over, through the server's own
        `forgetChangeHistory` command: resume points before it are history lost (286).
        Returns the reply: `forgotten` (how many went) and `historyStart`."""
        command: dict[str, Any] = {"forgetChangeHistory": 1}
        if before is not None:
            command["before"] = before
        with self.client() as client:
            return dict(client.admin.command(command))


class RealMongo:
    """A real deployment (TIDEMARK_MONGODB_URI, a replica set): the same tests, for real."""

    real = True

    def __init__(self) -> None:
        self.uri = os.environ["TIDEMARK_MONGODB_URI"]

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def kill(self) -> None:
        raise NotImplementedError("a real MongoDB is not killed by the tests")

    def client(self, **options: Any) -> Any:
        import pymongo

        return pymongo.MongoClient(self.uri, tz_aware=True, serverSelectionTimeoutMS=10_000, **options)
