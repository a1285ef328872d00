"""The merge of the embedded log (each format) between two cuts of one chain
(`cdc_core.sinks.log_cuts`): no transaction is counted there, none is ever merged in
part, and a range that crosses a writer's crash is aligned as before."""

from __future__ import annotations

import json

import pytest

from tests.support.events import event, row, transaction
from tests.support.log_writers import WRITERS, killed
from tests.support.merge_forms import log_record

pytestmark = pytest.mark.integration

TABLE = {"shop.accounts": 1}


@pytest.fixture(params=sorted(WRITERS))
def log_format(request):
    return request.param


@pytest.fixture
def connector(tmp_path, log_format):
    from cdc_core.config.connector_config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "name: cuts\nconnector.class: mysql\ntopic.prefix: tm\ndatabase.hostname: 127.0.0.1\n"
        "database.user: u\ndatabase.server.id: 9\nprovide.transaction.metadata: true\n"
        f"sink.type: local\nsink.local.format: {log_format}\nsink.local.directory: {tmp_path / 'log'}\n"
    )
    return load_config(path)


def _txn(rank: int, name: str, begin: bool = True, end: bool = True) -> list:
    records = [transaction("BEGIN", rank)] if begin else []
    records.append(event("u" if rank > 1 else "c", (0, rank, 1), before=row(1, "x"), after=row(1, name)))
    return records + ([transaction("END", rank, TABLE)] if end else [])


def test_between_cuts_nothing_is_counted_and_an_open_transaction_waits_whole(
    spark, tmp_path, connector, log_format, monkeypatch
):
    from spark_jobs import delta_merge
    from spark_jobs.merge import transactions
    from spark_jobs.merge.delta_apply import live_rows

    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    counted = []

    def counting(parsed, prefix, orders=None):
        counted.append(True)
        return transactions.split_complete(parsed, prefix, orders)

    monkeypatch.setattr(delta_merge, "split_complete", counting)

    def merged() -> tuple[list, dict]:
        delta_merge.run_local(spark, connector, root, checkpoint)
        rows = [(r.id, r.name) for r in live_rows(spark, f"{root}/shop.accounts").collect()]
        state = json.loads((tmp_path / "checkpoint" / "local-offsets.json").read_text())
        return rows, state

    log = WRITERS[log_format](tmp_path / "log")
    log.append(log_record(r, log_format) for r in _txn(1, "a"))
    log.flush()
    log.append(log_record(r, log_format) for r in _txn(2, "b", end=False))  # open at the landing
    log.flush()
    rows, state = merged()
    assert rows == [(1, "a")] and not counted  # the batch ended at the cut before transaction 2
    assert state["offsets"] == {"tm.shop.accounts": 0, "tm.transaction": 1}
    log.append(log_record(r, log_format) for r in [transaction("END", 2, TABLE)])
    log.flush()
    rows, state = merged()
    assert rows == [(1, "b")] and not counted
    assert state["offsets"] == {"tm.shop.accounts": 1, "tm.transaction": 3}

    # The writer is killed inside transaction 3; its successor resumes inside it (no BEGIN).
    log.append(log_record(r, log_format) for r in _txn(3, "c", end=False))
    log.flush()
    killed(log)
    log = WRITERS[log_format](tmp_path / "log")
    log.append(log_record(r, log_format) for r in [*_txn(3, "c", begin=False), *_txn(4, "d")])
    log.close()
    rows, state = merged()
    assert rows == [(1, "d")] and counted == [True]  # across the crash: aligned
    log = WRITERS[log_format](tmp_path / "log")
    log.append(log_record(r, log_format) for r in _txn(5, "e"))
    log.close()
    rows, _ = merged()
    assert rows == [(1, "e")] and counted == [True]  # back on a chain: not counted
    from delta.tables import DeltaTable

    last = json.loads(DeltaTable.forPath(spark, f"{root}/shop.accounts").history(1).collect()[0].userMetadata)
    assert (last["tidemark"]["upto"], last["tidemark"]["first"], last["tidemark"]["last"]) == (
        [0, 5],
        [0, 5],
        [0, 5],
    )
