"""The Spark chunk job's saved plan: versioned, written whole, never silently replaced."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from cdc_core.errors import TidemarkError
from cdc_core.snapshot.keycodec import decode_key
from spark_jobs.snapshot_plan import check_unplanned, load_plan, plan_uri, save_plan

DATA = Path(__file__).parent / "data"


def test_a_frozen_v0_plan_a_bare_list_of_windows_is_read_as_it_was_written(tmp_path):
    uri = plan_uri(str(tmp_path), "snap-1")
    Path(uri).parent.mkdir()
    shutil.copy(DATA / "snapshot_plan_v0.json", uri)
    windows = load_plan(uri, "snap-1")
    assert [w["index"] for w in windows] == [0, 1, 2] and windows[0]["condition"] == "status = 'open'"
    assert decode_key(windows[1]["lo"]) == (5, dt.datetime(2026, 1, 2, 3, 4, 5))
    assert windows[2]["hi"] is None


def test_a_plan_is_saved_with_its_version_and_signal_and_read_back_equal(tmp_path):
    uri = plan_uri(f"file://{tmp_path}/", "snap-2")
    windows = json.loads((DATA / "snapshot_plan_v0.json").read_text())
    assert load_plan(uri, "snap-2") is None  # nothing saved yet
    save_plan(uri, "snap-2", windows)
    body = json.loads((tmp_path / "snap-2" / "plan.json").read_text())
    assert body["version"] == 1 and body["signal"] == "snap-2"
    assert load_plan(uri, "snap-2") == windows
    assert sorted(p.name for p in (tmp_path / "snap-2").iterdir()) == ["plan.json"]  # no temporary left


@pytest.mark.parametrize(
    "text, says",
    [
        ('{"version": 1, "signal": "snap-3", "windows": [{"table": "t"', "not JSON"),
        ('{"version": 7, "signal": "snap-3", "windows": []}', "version 7"),
        ('{"version": 1, "signal": "other", "windows": []}', "'other'"),
        ('{"version": 1, "signal": "snap-3", "windows": [{"table": "t"}]}', "list of windows"),
        ("{}", "version None"),
    ],
)
def test_a_plan_this_job_cannot_trust_stops_it_with_what_is_wrong(tmp_path, text, says):
    uri = plan_uri(str(tmp_path), "snap-3")
    Path(uri).parent.mkdir()
    Path(uri).write_text(text)
    with pytest.raises(TidemarkError, match=says):
        load_plan(uri, "snap-3")


def test_a_snapshot_with_released_windows_is_not_planned_again():
    check_unplanned("/staging/snap-4/plan.json", "snap-4", {("shop.orders", None): set()})
    with pytest.raises(TidemarkError, match="2 window.*staging location of the snapshot's first run"):
        check_unplanned("/staging/snap-4/plan.json", "snap-4", {("shop.orders", None): {0, 3}})
