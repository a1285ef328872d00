"""The MongoDB test server as a local service (`mongodb`): mongo-java-server with the
project's change-stream layer (`jvm/mongo/`, compiled by `make install` into
`.jars/mongo-server`), a one-member replica set `rs0` on a fixed port, for connector
files and the demo-like use of a MongoDB connector without Docker.

The tests start the same server on free ports of their own
(`tests/support/mongo/server.py`), from the same command (`server_command`). It
keeps everything in memory: a stop loses every document and the change history.
"""

from __future__ import annotations

import os
from pathlib import Path

from scripts.services.base import Service
from scripts.services.errors import ServiceError
from scripts.services.processes import _port_open, _which
from scripts.services.settings import JARS, LOCAL, PORTS, ROOT

SERVER_CLASSES = JARS / "mongo-server"
SERVER_JARS = JARS / "mongo"
HEAP_ENV = "TIDEMARK_MONGODB_HEAP"  # the service's JVM heap (-Xmx); everything is in memory


def server_command(port: int, heap: str = "512m", stock: bool = False, host: str = "127.0.0.1") -> list[str]:
    """The command that runs the MongoDB test server on `host:port` (`stock`: plain
    mongo-java-server, without the project's change-stream layer)."""
    if not (SERVER_CLASSES / "MongoTestServer.class").exists():
        raise ServiceError("the MongoDB test server is not built (.jars/mongo-server); run `make install`")
    java = _which("java")
    command = [
        java,
        f"-Xmx{heap}",
        "-cp",
        f"{SERVER_CLASSES}:{SERVER_JARS}/*",
        "MongoTestServer",
        str(port),
        host,
    ]
    return [*command, "--stock"] if stock else command


def server_uri(port: int, stock: bool = False, host: str = "127.0.0.1") -> str:
    """The connection string of a test server: the replica set `rs0` it answers as (the
    stock server is no replica set, so it is reached directly)."""
    if stock:
        return f"mongodb://{host}:{port}/?directConnection=true"
    return f"mongodb://{host}:{port}/?replicaSet=rs0"


class MongoDB(Service):
    """The test server on `PORTS.mongodb` (`TIDEMARK_MONGODB_PORT`, default 27117: clear of
    a real MongoDB's 27017, which the Docker stack's `mongodb` service takes)."""

    name = "mongodb"
    start_timeout = 60.0

    def __init__(self, port: int | None = None, home: Path | None = None) -> None:
        self._port = port
        self._home = home

    @property
    def port(self) -> int:
        return self._port if self._port is not None else PORTS.mongodb

    @property
    def home(self) -> Path:
        return self._home if self._home is not None else LOCAL / self.name

    @property
    def uri(self) -> str:
        return server_uri(self.port)

    def command(self) -> list[str]:
        return server_command(self.port, heap=os.environ.get(HEAP_ENV, "1g"))

    def conflicting_port(self) -> int | None:
        return self.port

    def ready(self) -> bool:
        """Listening, and answering as the primary of `rs0` (change streams need it)."""
        if not _port_open(self.port):
            return False
        try:
            import pymongo
        except ImportError:  # bootstrap without the venv: the port is the best we have
            return True
        try:
            with pymongo.MongoClient(
                f"mongodb://127.0.0.1:{self.port}/?directConnection=true", serverSelectionTimeoutMS=1000
            ) as client:
                hello = client.admin.command("hello")
        except pymongo.errors.PyMongoError:
            return False
        return bool(hello.get("isWritablePrimary")) and hello.get("setName") == "rs0"

    def describe(self) -> str:
        return f"{self.uri} (in memory: a stop loses its data)"


def mongodb_connector_files(directory: Path | None = None) -> list[Path]:
    """The connector files (`*.yaml`, `*.yml`) of `directory` (default: the connectors
    folder, `TIDEMARK_CONNECTORS_DIR`) whose `connector.class` is MongoDB's: `make up`
    starts the test server for them. A file that does not parse is skipped here; the
    DAGs and the streamer report it."""
    import yaml

    from cdc_core.config.connector_config import flatten
    from cdc_core.connectors.registry import CONNECTORS

    folder = directory or Path(os.environ.get("TIDEMARK_CONNECTORS_DIR", ROOT / "connectors"))
    mongodb = CONNECTORS["mongodb"]
    found = []
    for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and CONNECTORS.get(str(flatten(data).get("connector.class"))) == mongodb:
            found.append(path)
    return found
