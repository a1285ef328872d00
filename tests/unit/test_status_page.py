"""The status page's report and HTML from connector files and state on disk (no Airflow
server): a broken connector file is listed with its reason instead of failing the page,
a connector that never ran says so, and names from files are escaped, never markup.
The page served by a running api-server is tested in tests/integration/test_airflow_live.py."""

from __future__ import annotations

import json

import pytest
import yaml
from tidemark_airflow.status_page.html import render
from tidemark_airflow.status_page.report import status_report

from tests.support.streamer import OFFLINE_CONNECTOR as CONNECTOR


def write(folder, file: str, props: dict) -> None:
    (folder / file).write_text(yaml.safe_dump(props))


def test_a_connector_that_never_ran_and_a_broken_file_are_both_listed(tmp_path, monkeypatch):
    folder = tmp_path / "connectors"
    folder.mkdir()
    write(folder, "a.yaml", {"name": "shop", "state.directory": str(tmp_path / "state"), **CONNECTOR})
    write(folder, "b.yaml", {"name": "broken", **CONNECTOR, "database.hostnme": "typo"})
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(folder))

    report = status_report()
    shop, broken = report["connectors"]
    assert shop["name"] == "shop" and shop["streamer"]["state"] == "never started"
    assert shop["committed_position"] == "nothing" and shop["snapshots"] == [] and shop["delta_tables"] == []
    assert shop["dags"]["stream"] == "tidemark_stream_shop"
    assert broken["file"] == "b.yaml" and "database.hostnme" in broken["error"]
    json.dumps(report)  # the JSON endpoint's body

    page = render(report)
    assert "never started" in page and "database.hostnme" in page


def test_each_source_says_where_it_is_and_a_connection_string_shows_only_its_hosts(tmp_path, monkeypatch):
    folder = tmp_path / "connectors"
    folder.mkdir()
    uri = "mongodb://cdc:s3cr%2Fet@db1:27017,db2:27017/?replicaSet=rs0&tlsCertificateKeyFilePassword=k3y"
    mongo = {"connector.class": "mongodb", "mongodb.connection.string": uri, "topic.prefix": "docs"}
    write(folder, "a.yaml", {"name": "shop", "state.directory": str(tmp_path / "s1"), **CONNECTOR})
    write(folder, "b.yaml", {"name": "docs", "state.directory": str(tmp_path / "s2"), **mongo})
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(folder))

    shop, docs = status_report()["connectors"]
    assert shop["source"] == f"{CONNECTOR['database.hostname']}:{CONNECTOR['database.port']}"
    assert docs["connector_class"] == "mongodb" and docs["source"] == "db1:27017,db2:27017"
    page = render(status_report())
    assert "db1:27017,db2:27017" in page
    assert not any(secret in page for secret in ("s3cr", "k3y", "cdc:"))


def one_connector(tmp_path, monkeypatch):
    """A connectors folder with connector `x` (the page's only one); its state folder."""
    folder = tmp_path / "connectors"
    folder.mkdir()
    state = tmp_path / "state"
    state.mkdir()
    write(folder, "x.yaml", {"name": "x", "state.directory": str(state), **CONNECTOR})
    monkeypatch.setenv("TIDEMARK_CONNECTORS_DIR", str(folder))
    return state


def test_names_and_messages_from_files_are_escaped(tmp_path, monkeypatch):
    state = one_connector(tmp_path, monkeypatch)
    (state / "status.json").write_text(
        json.dumps(
            {"state": "failed", "error": "<script>alert(1)</script>", "updated_at": "2026-01-01T00:00:00Z"}
        )
    )

    page = render(status_report())
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_stalled_snapshot_and_refused_signals_are_shown_with_what_to_do(tmp_path, monkeypatch):
    import orjson

    from cdc_core.offsets.store import FileOffsetStore
    from cdc_core.snapshot.context import Snapshot, SnapshotContext, TableProgress

    state = one_connector(tmp_path, monkeypatch)
    table = TableProgress("shop.a", ("id",), windows_total=4, windows_done=1, done_windows=(0,))
    snapshot = Snapshot("snap-1", "sig-1", "incremental", (table,), 100, started_ms=1, reader="spark")
    refused = {
        "id": "bad-1",
        "type": "execute-snapshot",
        "channel": "source",
        "reason": "no such table",
        "at_ms": 1,
    }
    context = SnapshotContext((snapshot,)).refuse(refused)
    FileOffsetStore(state / "offsets.json", "x").commit({"source": {}, "snapshot": context.to_json()})
    live = context.progress()
    live["running"][0] |= {"open_windows": 0, "idle_ms": 10 * 60_000}
    (state / "status.json").write_bytes(
        orjson.dumps({"state": "running", "updated_at": "2099-01-01T00:00:00Z", "snapshots": live})
    )

    (connector,) = status_report()["connectors"]
    (shown,) = connector["snapshots"]
    assert shown["state"] == "stalled" and "Run it again" in shown["problem"]
    assert connector["refused_signals"][0]["id"] == "bad-1" and connector["refused_signals"][0]["at"]
    page = render(status_report())
    assert (
        "stalled" in page and "Run it again" in page and "no such table" in page and "Refused signals" in page
    )


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # starlette's TestClient on httpx
def test_the_page_links_to_every_refused_signal_kept_with_its_reason(tmp_path, monkeypatch):
    """The page listed the last 20 refusals kept, all inline; now every refusal of the time
    kept (`signal.refused.retention.days`) is on a page of the connector's own, linked
    from the main page, which shows the newest few."""
    import time

    from fastapi.testclient import TestClient
    from tidemark_airflow.status_page import app as status_app
    from tidemark_airflow.status_page.report import REFUSED_SHOWN

    from cdc_core.offsets.store import FileOffsetStore
    from cdc_core.snapshot.context import SnapshotContext

    state = one_connector(tmp_path, monkeypatch)
    context = SnapshotContext()
    now = int(time.time() * 1000)
    for n in range(25):
        refusal = {"id": f"bad-{n}", "type": "execute-snapshot", "channel": "file", "reason": f"reason <{n}>"}
        context = context.refuse(refusal, now_ms=now - (25 - n) * 1000)
    FileOffsetStore(state / "offsets.json", "x").commit({"source": {}, "snapshot": context.to_json()})

    (connector,) = status_report()["connectors"]
    assert [f["id"] for f in connector["refused_signals"]] == [f"bad-{n}" for n in reversed(range(25))]
    assert connector["refused_kept_days"] == 7
    page = render(status_report())
    assert 'href="refused/x"' in page and "25 in the last 7 day(s)" in page
    assert "reason &lt;24&gt;" in page and f"reason &lt;{24 - REFUSED_SHOWN}&gt;" not in page

    monkeypatch.setattr(status_app, "requires_access_dag", lambda method: lambda: None)
    client = TestClient(status_app.create_app())
    listed = client.get("/refused/x")
    assert listed.status_code == 200
    for n in range(25):  # every one, the oldest included, with its reason (escaped)
        assert f">bad-{n}<" in listed.text and f"reason &lt;{n}&gt;" in listed.text
    assert 'href="../#connector-x"' in listed.text
    assert client.get("/refused/nobody").status_code == 404
