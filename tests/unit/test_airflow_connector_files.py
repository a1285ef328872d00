"""The connector files the DAGs come from: a file gone between the folder's listing and
its reading (removed, or replaced by an editor's rename) is not there, and every other
connector keeps its DAGs; a file that is there but wrong still fails loudly."""

from __future__ import annotations

import pytest
from tidemark_airflow import connectors

from cdc_core.errors import ConfigError

FILE = "name: {name}\nconnector.class: mysql\ntopic.prefix: {name}\ndatabase.hostname: h\ndatabase.user: u\ndatabase.server.id: 1\n"


def test_a_connector_file_gone_since_the_listing_leaves_the_others(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(tmp_path))
    (tmp_path / "a.yaml").write_text(FILE.format(name="a"))
    (tmp_path / "b.yaml").write_text(FILE.format(name="b"))
    listed = connectors.connector_paths()
    (tmp_path / "a.yaml").unlink()
    monkeypatch.setattr(connectors, "connector_paths", lambda: listed)
    assert [c.name for c in connectors.configs()] == ["b"]
    assert list(connectors.connector_files()) == ["b"]


def test_a_connector_file_that_is_there_but_unreadable_still_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(tmp_path))
    (tmp_path / "a.yaml").write_text(FILE.format(name="a"))
    (tmp_path / "b.yaml").write_text("name: b\nconnector.class: nosuch\n")
    with pytest.raises(ConfigError):
        connectors.configs()
