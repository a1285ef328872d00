"""Cuts of the embedded log: where the writer (of either format) vouches that no
transaction is open, and which merge ranges may skip the count of every transaction's
events."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cdc_core.errors import TidemarkError
from cdc_core.events.envelope import Record
from cdc_core.sinks.log_cuts import FILE_NAME, CutTracker, read_cut
from spark_jobs.merge.log_range import MergeState, plan_range
from tests.support.log_writers import WRITERS, killed

DATA = Path(__file__).parent / "data"
T, TXN = "p.db.t", "p.transaction"


def _event(n: int) -> Record:
    return Record(T, b'{"id":%d}' % n, b'{"op":"c","n":%d}' % n)


def _boundary(status: str) -> Record:
    return Record(TXN, b'{"id":"x"}', b'{"status":"%s"}' % status.encode(), boundary=status)


def _transaction(log, first: int, size: int = 2) -> None:
    log.append([_boundary("BEGIN"), *(_event(first + i) for i in range(size)), _boundary("END")])


@pytest.fixture(params=sorted(WRITERS))
def writer(request):
    """The log's writer, in each of its formats."""
    return WRITERS[request.param]


def test_a_cut_is_recorded_after_a_landing_with_no_transaction_open(tmp_path, writer):
    log = writer(tmp_path)
    _transaction(log, 0)
    log.flush()
    cut = read_cut(tmp_path)
    assert cut is not None and cut.seq == 1 and cut.began_empty
    assert cut.offsets == {T: 2, TXN: 2}
    log.append([_boundary("BEGIN"), _event(2)])
    log.flush()  # a transaction is open: the cut stays where it was
    assert read_cut(tmp_path) == cut
    log.append([_event(3), _boundary("END")])
    log.close()
    later = read_cut(tmp_path)
    assert later.chain == cut.chain and later.seq == 2 and later.offsets == {T: 4, TXN: 4}


def test_no_cut_from_a_writer_whose_records_mark_no_boundaries(tmp_path, writer):
    log = writer(tmp_path)
    log.append([Record(TXN, b"{}", b'{"status":"BEGIN"}'), _event(0)])  # unmarked: not the streamer's
    log.close()
    assert not (tmp_path / FILE_NAME).exists()


def test_a_clean_stop_continues_the_chain_and_a_crash_inside_a_transaction_breaks_it(tmp_path, writer):
    log = writer(tmp_path)
    _transaction(log, 0)
    log.close()
    first = read_cut(tmp_path)
    log = writer(tmp_path)  # the log ends at its cut: the same chain goes on
    _transaction(log, 2)
    log.flush()
    assert read_cut(tmp_path).chain == first.chain and read_cut(tmp_path).seq == 2
    log.append([_boundary("BEGIN"), _event(4)])
    log.flush()
    killed(log)  # here: the open transaction's first event is on disk
    crashed = read_cut(tmp_path)
    log = writer(tmp_path)
    log.append([_event(5)])  # the rest of the transaction, resumed inside it: no BEGIN
    log.flush()
    assert read_cut(tmp_path) == crashed  # nothing vouched for until an END has gone by
    log.append([_boundary("END")])
    log.close()
    after = read_cut(tmp_path)
    assert after.chain != crashed.chain and not after.began_empty and after.seq == 1


def test_an_end_without_its_begin_breaks_the_chain(tmp_path, writer):
    log = writer(tmp_path)
    _transaction(log, 0)
    log.flush()
    first = read_cut(tmp_path)
    log.append([_event(2), _boundary("END")])
    log.close()
    assert read_cut(tmp_path).chain != first.chain


def test_an_unreadable_or_newer_cut_reads_as_none_and_the_writer_begins_again(tmp_path, caplog):
    (tmp_path / FILE_NAME).write_text('{"version": 2, "chain": "x"}')
    assert read_cut(tmp_path) is None
    assert "version 2" in caplog.text
    (tmp_path / FILE_NAME).write_text('{"version": 1, "cha')
    assert read_cut(tmp_path) is None
    tracker = CutTracker(tmp_path, {T: 3})
    tracker.observe("BEGIN")
    tracker.observe("END")
    cut = tracker.cut({T: 5, TXN: 2})
    assert cut is not None and not cut.began_empty


def test_a_frozen_v1_cut_file_is_read(tmp_path):
    shutil.copy(DATA / "log_cut_v1.json", tmp_path / FILE_NAME)
    cut = read_cut(tmp_path)
    assert cut.chain == "5f0c4e1a9b7d4c2e8a6f3b1d0e9c7a5b" and cut.seq == 7 and cut.began_empty
    assert cut.offsets == {"demo.inventory.orders": 120, "demo.transaction": 40}


def _cut_file(root: Path, chain: str, seq: int, offsets: dict[str, int], began_empty: bool = False) -> None:
    body = {"version": 1, "chain": chain, "seq": seq, "began_empty": began_empty, "offsets": offsets}
    (root / FILE_NAME).write_text(json.dumps(body))


def test_a_merge_reads_whole_transactions_only_between_cuts_of_one_chain(tmp_path):
    topics = [T, TXN]
    _cut_file(tmp_path, "a", 5, {T: 10, TXN: 4}, began_empty=True)
    fresh = plan_range(tmp_path, topics, {}, None, holding=False)
    assert fresh.whole and fresh.until == {T: 10, TXN: 4} and fresh.at == {"chain": "a", "seq": 5}
    assert fresh.reached({}) == {T: 9, TXN: 3}
    on_chain = plan_range(tmp_path, topics, {T: 5, TXN: 1}, {"chain": "a", "seq": 3}, holding=False)
    assert on_chain.whole and on_chain.reached({T: 5, TXN: 1}) == {T: 9, TXN: 3}
    # Records held back by the batch before, a broken chain, no cut to start from: align.
    assert not plan_range(tmp_path, topics, {T: 5, TXN: 1}, {"chain": "a", "seq": 3}, holding=True).whole
    crossed = plan_range(tmp_path, topics, {T: 5, TXN: 1}, None, holding=False)
    assert not crossed.whole and crossed.until == {T: 10, TXN: 4}  # still ends at the cut
    _cut_file(tmp_path, "a", 5, {T: 10, TXN: 4}, began_empty=False)
    assert not plan_range(tmp_path, topics, {}, None, holding=False).whole
    assert not plan_range(tmp_path, topics, {T: 5, TXN: 1}, {"chain": "b", "seq": 3}, holding=False).whole


def test_a_log_begun_again_on_empty_after_the_merge_stops_it_instead_of_skipping_its_start(tmp_path):
    """The log was reset (its folder emptied) but the merge kept its checkpoint: offsets
    start again under what it merged, and reading on would skip them without a word."""
    _cut_file(tmp_path, "new", 2, {T: 100, TXN: 20}, began_empty=True)
    with pytest.raises(TidemarkError, match="began again on an empty log .* new checkpoint folder"):
        plan_range(tmp_path, [T, TXN], {T: 499, TXN: 80}, {"chain": "old", "seq": 40}, holding=False)
    # the same log's first merge, and a merge that ended on this very chain, go on
    assert plan_range(tmp_path, [T, TXN], {}, {"chain": "old", "seq": 40}, holding=False).whole
    assert plan_range(tmp_path, [T, TXN], {T: 50, TXN: 9}, {"chain": "new", "seq": 1}, holding=False).whole


def test_a_merge_past_the_cut_or_without_one_reads_to_the_end_and_aligns(tmp_path):
    topics = [T, TXN]
    assert plan_range(tmp_path, topics, {}, None, holding=False).until is None
    _cut_file(tmp_path, "a", 5, {T: 10, TXN: 4}, began_empty=True)
    past = plan_range(tmp_path, topics, {T: 12, TXN: 3}, None, holding=False)
    assert past.until is None and not past.whole and past.at is None


def test_a_frozen_v1_merge_state_reads_as_ended_at_no_cut(tmp_path):
    shutil.copy(DATA / "merge_local_offsets_v1.json", tmp_path / "local-offsets.json")
    state = MergeState.load(tmp_path)
    assert state.batch == 3 and state.offsets == {"demo.inventory.orders": 41, "demo.transaction": 17}
    assert state.cut is None
    MergeState(4, {**state.offsets, "demo.transaction": 19}, {"chain": "a", "seq": 2}).save(tmp_path)
    again = MergeState.load(tmp_path)
    assert again.batch == 4 and again.cut == {"chain": "a", "seq": 2}
    assert json.loads((tmp_path / "local-offsets.json").read_text())["version"] == 2
