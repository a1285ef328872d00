"""The record of the order the Vitess source handed shard groups on in: what a restart
from a committed VGTID replays, and in which order; a torn tail, an old file, a record
that does not reach back, and the file kept small once entries are committed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cdc_core.connectors.vitess import delivery_order
from cdc_core.connectors.vitess.delivery_order import DeliveryOrder

FROZEN = Path(__file__).parent / "data" / "vitess_delivery_order_v1.jsonl"
START = {"-80": "MariaDB/0-11-5", "80-": "MariaDB/0-12-7"}


@pytest.fixture
def record(tmp_path: Path) -> DeliveryOrder:
    path = tmp_path / "order.jsonl"
    shutil.copy(FROZEN, path)  # version 1, as written today
    return DeliveryOrder(path)


def test_the_groups_past_the_committed_position_come_back_in_their_recorded_order(record):
    assert record.start(START) == [
        ("80-", "MariaDB/0-12-8"),
        ("-80", "MariaDB/0-11-6"),
        ("80-", "MariaDB/0-12-9"),
        ("-80", "MariaDB/0-11-7"),
    ]
    # committed after the first two groups: the rest, -80's before 80-'s where they were
    record.start({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-8"})
    assert DeliveryOrder(record.path).start({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-8"}) == [
        ("80-", "MariaDB/0-12-9"),
        ("-80", "MariaDB/0-11-7"),
    ]


def test_a_commit_inside_a_shards_run_replays_only_the_other_shards_later_groups(record):
    # 80- committed at 9 (its last group), -80 at 6: only -80's 7 is past it
    assert record.start({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-9"}) == [("-80", "MariaDB/0-11-7")]


def test_start_rewrites_the_file_to_follow_the_committed_position(record):
    record.start({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-8"})
    record.record([("80-", "MariaDB/0-12-10")])
    record.close()
    base, entries = DeliveryOrder(record.path).read()
    assert base == {"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-8"}
    assert entries == [("80-", "MariaDB/0-12-9"), ("-80", "MariaDB/0-11-7"), ("80-", "MariaDB/0-12-10")]


def test_a_torn_last_line_is_a_batch_never_handed_on(record):
    with record.path.open("ab") as f:
        f.write(b'["-80","MariaDB/0-1')
    assert record.start(START)[-1] == ("-80", "MariaDB/0-11-7")


def test_a_record_that_does_not_reach_back_to_the_committed_position_replays_nothing(record, caplog):
    assert record.start({"-80": "MariaDB/0-11-3", "80-": "MariaDB/0-12-7"}) == []
    assert "does not reach back" in caplog.text
    assert DeliveryOrder(record.path).read() == ({"-80": "MariaDB/0-11-3", "80-": "MariaDB/0-12-7"}, [])


def test_an_unreadable_or_newer_record_is_a_warning_not_a_stop(tmp_path, caplog):
    path = tmp_path / "order.jsonl"
    path.write_text('{"version": 2, "from": {}}\n["-80","MariaDB/0-11-6"]\n')
    assert DeliveryOrder(path).start(START) == []
    assert "delivery order version 2" in caplog.text
    path.write_text("not json\n")
    assert DeliveryOrder(path).start(START) == []
    assert "not a delivery order file" in caplog.text


def test_a_new_start_forgets_the_old_record(record):
    assert record.start(None) == []
    assert DeliveryOrder(record.path).read() == ({}, [])


def test_commits_keep_the_file_to_what_is_past_them(record, monkeypatch):
    monkeypatch.setattr(delivery_order, "COMPACT_AFTER", 3)
    record.start(START)
    record.record([("80-", "MariaDB/0-12-10"), ("-80", "MariaDB/0-11-8")])
    record.committed({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-9"})  # 2 appended: kept
    assert len(DeliveryOrder(record.path).read()[1]) == 6
    record.record([("-80", "MariaDB/0-11-9")])
    record.committed({"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-9"})
    assert DeliveryOrder(record.path).read() == (
        {"-80": "MariaDB/0-11-6", "80-": "MariaDB/0-12-9"},
        [
            ("-80", "MariaDB/0-11-7"),
            ("80-", "MariaDB/0-12-10"),
            ("-80", "MariaDB/0-11-8"),
            ("-80", "MariaDB/0-11-9"),
        ],
    )
    record.record([("80-", "MariaDB/0-12-11")])  # still appends after the rewrite
    assert DeliveryOrder(record.path).read()[1][-1] == ("80-", "MariaDB/0-12-11")
