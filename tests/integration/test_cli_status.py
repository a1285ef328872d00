"""`tidemark status` says what failed and what to do when it cannot reach the source,
in its text, verbose and JSON forms (it printed only the exception's class name)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.streamer import write_connector

pytestmark = pytest.mark.integration


def status(connector, *options: str, env: dict[str, str] | None = None, verbose: bool = False) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_core.cli",
            *(["-v"] if verbose else []),
            "status",
            "--config",
            str(connector.path),
            *options,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_an_unreachable_source_is_reported_with_its_cause_and_the_remedy(
    tmp_path, mariadb_params, scratch_db
):
    for name in ("unset", "wrong", "down"):
        (tmp_path / name).mkdir()
    unset = write_connector(
        tmp_path / "unset", scratch_db, {"database.password.env": "TIDEMARK_NOT_SET_ANYWHERE"}
    )
    for verbose in (False, True):
        out = status(unset, verbose=verbose)
        head = next(line for line in out.splitlines() if line.startswith("source head"))
        assert "Access denied for user" in head, out
        assert "no password: set the environment variable TIDEMARK_NOT_SET_ANYWHERE" in head, out
        assert "TidemarkError" not in out
    doc = json.loads(status(unset, "--json"))
    assert "set the environment variable TIDEMARK_NOT_SET_ANYWHERE" in doc["source_head"]

    wrong = write_connector(
        tmp_path / "wrong", scratch_db, {"database.password.env": "TIDEMARK_WRONG_PASSWORD"}
    )
    out = status(wrong, env={"TIDEMARK_WRONG_PASSWORD": "not-the-password"})
    assert "Access denied" in out and "the password from TIDEMARK_WRONG_PASSWORD" in out
    assert "not-the-password" not in out  # the secret itself never appears

    down = write_connector(tmp_path / "down", scratch_db, port=1)
    assert "source head unavailable: cannot connect to 127.0.0.1:1" in status(down)
