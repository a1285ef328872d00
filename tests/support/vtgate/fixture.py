"""pytest fixture `vitess`: the VTGate double, started once per test session over the
shard servers `make test` starts (`python -m scripts.services up vitess`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from tests.support.vtgate.cluster import VitessCluster


@pytest.fixture(scope="session")
def vitess(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VitessCluster]:
    """The double, or a real VTGate when `TIDEMARK_VITESS_VTGATE` names one (real.py)."""
    if os.environ.get("TIDEMARK_VITESS_VTGATE"):
        from tests.support.vtgate.real import RealVitess

        yield RealVitess()  # type: ignore[misc]
        return
    base = int(os.environ.get("TIDEMARK_VITESS_SHARD_PORT", "3311"))
    ports = [base + i for i in range(4)]
    for port in ports:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) != 0:
                pytest.fail(
                    f"the Vitess shard servers are not running (127.0.0.1:{port}); start them with "
                    "`python -m scripts.services up vitess` (`make test` starts them for you)",
                    pytrace=False,
                )
    admin = {"user": os.environ["TIDEMARK_ADMIN_USER"], "password": os.environ["TIDEMARK_ADMIN_PASSWORD"]}
    cluster = VitessCluster(tmp_path_factory.mktemp("vtgate"), ports, admin)
    cluster.start()
    yield cluster
    cluster.stop()
