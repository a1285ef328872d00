"""The MongoDB test server as a local service (`python -m scripts.services up|down|status
mongodb`, and `make up` when a MongoDB connector file is present): started on a free port
here, so a service of the same name that a developer runs is left alone."""

from __future__ import annotations

import pytest

from scripts.services import ServiceError
from scripts.services.mongodb import MongoDB
from scripts.services.processes import _pid_alive, _port_open
from tests.support.mongo.server import free_port

pytestmark = pytest.mark.integration


def test_the_service_starts_a_replica_set_a_connector_can_use_and_stops_it(tmp_path):
    import pymongo

    service = MongoDB(port=free_port(), home=tmp_path / "mongodb")
    assert not service.running()
    assert service.start() is True
    try:
        pid = service.pid()
        assert pid is not None and service.running() and service.ready()
        assert service.start() is False  # idempotent: already running
        with pymongo.MongoClient(service.uri, serverSelectionTimeoutMS=10_000) as client:
            assert client.admin.command("hello")["setName"] == "rs0"
            with client.shop.orders.watch() as stream:  # change streams: what a connector reads
                client.shop.orders.insert_one({"_id": 1})
                change = stream.try_next() or stream.try_next()
                assert change is not None and change["documentKey"] == {"_id": 1}
        taken = MongoDB(port=service.port, home=tmp_path / "other")
        with pytest.raises(ServiceError, match=f"port {service.port} on 127.0.0.1 is taken"):
            taken.start()
    finally:
        stopped = service.stop()
    assert stopped is True
    assert not _pid_alive(pid) and not _port_open(service.port)
    assert not service.running() and service.stop() is False
    assert (tmp_path / "mongodb" / "log" / "mongodb.log").exists()
