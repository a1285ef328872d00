"""pytest fixture `mongodb`: the MongoDB test server, started once per test session on a
free port (or the real deployment of TIDEMARK_MONGODB_URI)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.mongo.server import MongoTestServer, RealMongo


@pytest.fixture(scope="session")
def mongodb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if os.environ.get("TIDEMARK_MONGODB_URI"):
        yield RealMongo()
        return
    server = MongoTestServer(tmp_path_factory.mktemp("mongo"))
    try:
        server.start()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()
