"""The Delta merge run by hand finds its Delta root and checkpoint in the connector file
(both flags were required, though the file names both and the DAGs merge there)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

import spark_jobs.delta_merge as delta_merge
import spark_jobs.session

CONNECTOR = (
    "name: shop\nconnector.class: mysql\ntopic.prefix: shop\ndatabase.hostname: h\ndatabase.user: u\n"
    "database.server.id: 1\n"
)


@pytest.fixture
def merged(monkeypatch, tmp_path):
    """What `main` would merge: its Delta root and checkpoint (Spark is not started)."""
    runs: list[tuple[str, str]] = []
    monkeypatch.setattr(spark_jobs.session, "build_session", lambda *args: "spark")
    monkeypatch.setattr(
        delta_merge,
        "run_local",
        lambda spark, config, root, checkpoint, options: runs.append((root, checkpoint)),
    )
    monkeypatch.setattr(delta_merge, "merge_lease", lambda checkpoint: contextlib.nullcontext())
    monkeypatch.setenv("TIDEMARK_ROOT", str(tmp_path / "project"))

    def run(connector: str, *flags: str) -> tuple[str, str]:
        path = tmp_path / "shop.yaml"
        path.write_text(connector)
        assert delta_merge.main(["--config", str(path), *flags]) == 0
        return runs.pop()

    return run


def test_the_connector_files_locations_are_merged_to_without_flags(merged, tmp_path):
    named = (
        CONNECTOR + "lakehouse.delta.root: s3a://lake/shop\nlakehouse.merge.checkpoint: /data/merge/shop\n"
    )
    assert merged(named) == ("s3a://lake/shop", "/data/merge/shop")
    # unnamed: the defaults the Airflow DAGs use (`.local/delta/<name>`, `.local/merge/<name>`)
    project = Path(tmp_path / "project" / ".local")
    assert merged(CONNECTOR) == (str(project / "delta" / "shop"), str(project / "merge" / "shop"))


def test_flags_win_over_the_connector_file(merged, tmp_path):
    named = CONNECTOR + "lakehouse.delta.root: /lake/shop\n"
    assert merged(named, "--checkpoint", "/cp") == ("/lake/shop", "/cp")
    assert merged(named, "--delta-root", "/other", "--checkpoint", "/cp") == ("/other", "/cp")
