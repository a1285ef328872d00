"""`make demo`'s main job end to end: MariaDB → streamer → embedded log, verified by replay."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e


def test_demo_streams_the_workload_and_replay_equals_the_source(mariadb_params):
    result = subprocess.run(
        [sys.executable, "-m", "demo.run", "--orders", "120"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "replaying the events gives the source tables exactly" in out
    assert "schema change: ALTER TABLE customers ADD COLUMN phone" in out
    assert "__debezium.newkey={'sku': 'SKU-RENAMED'}" in out
