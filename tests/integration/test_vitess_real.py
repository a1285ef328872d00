"""Against a real VTGate (`TIDEMARK_VITESS_VTGATE=host:port`, e.g. docker-compose.yml's
vttestserver): every Vitess test and the conformance suite's Vitess fixture take it
instead of the double (tests/support/vtgate/real.py). Without it this module says so,
so a run shows that the real server was not tried."""

from __future__ import annotations

import os

import pytest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not os.environ.get("TIDEMARK_VITESS_VTGATE"),
        reason="TIDEMARK_VITESS_VTGATE is not set: no real VTGate to run the Vitess tests against "
        "(`docker compose up vitess`, then TIDEMARK_VITESS_VTGATE=127.0.0.1:33575)",
    ),
]


def test_the_vitess_tests_run_against_the_real_vtgate(vitess):
    assert vitess.real, "TIDEMARK_VITESS_VTGATE is set but the tests took the double"
    shards = [s.name for s in vitess.shards(vitess.sharded)]
    assert len(shards) >= 2, f"keyspace {vitess.sharded} needs two shards for the sharded tests"
    assert [s.name for s in vitess.shards(vitess.unsharded)], f"no keyspace {vitess.unsharded}"
