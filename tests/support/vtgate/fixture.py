"""pytest fixture `vitess`: the VTGate double, started once per test session on free
ports over the four shard servers `make test` starts (`python -m scripts.services up
vitess`), with its topology file in a temporary folder. It yields a `VitessCluster`:
`grpc_address`, `mysql_host`/`mysql_port`, `shard_servers`, `create_keyspace`,
`drop_keyspace`, `execute`, `write`, `rows`, `split_shard`, `current_vgtid`, `kill`,
`restart` (see `cluster.py`). A test that kills the double restarts it before it ends."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from tests.support.vtgate.cluster import VitessCluster


def shard_server_ports() -> list[int]:
    """The four shard servers' ports; fails the test, saying how to start them, if one is down."""
    base = int(os.environ.get("TIDEMARK_VITESS_SHARD_PORT", "3311"))
    ports = [base + i for i in range(4)]
    for port in ports:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) != 0:
                pytest.fail(
                    f"the Vitess shard servers are not running (nothing on 127.0.0.1:{port}); start them with "
                    "`python -m scripts.services up vitess` (`make test` starts them for you)",
                    pytrace=False,
                )
    return ports


def shard_admin() -> dict[str, str]:
    return {
        "user": os.environ.get("TIDEMARK_ADMIN_USER", "tidemark_admin"),
        "password": os.environ.get("TIDEMARK_ADMIN_PASSWORD", "tidemark-admin-dev"),
    }


@pytest.fixture(scope="session")
def vitess(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VitessCluster]:
    """The double, or a real VTGate when `TIDEMARK_VITESS_VTGATE` names one (real.py)."""
    if os.environ.get("TIDEMARK_VITESS_VTGATE"):
        from tests.support.vtgate.real import RealVitess

        yield RealVitess()  # type: ignore[misc]
        return
    cluster = VitessCluster(tmp_path_factory.mktemp("vtgate"), shard_server_ports(), shard_admin())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
