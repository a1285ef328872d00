"""pytest fixtures `mongodb`: the MongoDB test server, started once per test session on a
free port (or the real deployment of TIDEMARK_MONGODB_URI); `mongo_db`: a database of it
for one test."""

from __future__ import annotations

import os
import uuid
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


@pytest.fixture
def mongo_db(mongodb: Any) -> Iterator[Any]:
    """A database of its own for one test, with the signal collection; dropped afterwards."""
    from tests.support.mongo.capture import SIGNALS

    name = f"mg_{uuid.uuid4().hex[:10]}"
    client = mongodb.client()
    client[name].create_collection(SIGNALS)
    yield client[name]
    client.drop_database(name)
    client.close()


@pytest.fixture
def mongo_test_server(mongodb: Any, tmp_path: Any) -> Iterator[MongoTestServer]:
    """The MongoDB test server itself, for the tests of what only it does (restarted empty,
    told to forget its history): the session's, or, when the session runs against a real
    deployment, one started for the test, so those tests run either way."""
    if not mongodb.real:
        yield mongodb
        return
    (tmp_path / "mongo-test-server").mkdir()
    server = MongoTestServer(tmp_path / "mongo-test-server")
    server.start()
    try:
        yield server
    finally:
        server.stop()
