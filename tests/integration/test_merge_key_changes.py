"""A table's primary key changed mid-stream lands as the source holds it: each event is
MERGEd by the key it was written with, in order, and the stored rows a new key would
match more than once (a live row and other rows' tombstones) are cut to one first. The
synthetic batches run in each form the merge reads; the last test drives MariaDB's
ALTER TABLE through the real streamer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.events import event, row
from tests.support.merge_forms import FORMS, in_form

pytestmark = pytest.mark.integration

ID, NAME, BOTH = ("id",), ("name",), ("id", "name")


@pytest.fixture(params=FORMS)
def form(request) -> str:
    return request.param


def merge(spark, root: Path, form: str, records: list[dict]) -> None:
    from spark_jobs.delta_merge import apply_batch

    given = in_form(spark, records, form, root.parent / f"{root.name}.forms")
    apply_batch(spark, root=str(root), prefix="tm", reached={}, **given)


def stored(spark, root: Path) -> list[tuple]:
    """Every stored row, tombstones too: (id, name, balance in cents, deleted)."""
    rows = spark.read.format("delta").load(f"{root}/shop.accounts").collect()
    return sorted((r.id, r.name, int(r.balance * 100), r._cdc_deleted) for r in rows)


def live(spark, root: Path) -> list[tuple]:
    return [r[:3] for r in stored(spark, root) if not r[3]]


def table_key(spark, root: Path) -> tuple[str, ...]:
    from spark_jobs.merge import rekeying
    from spark_jobs.merge.delta_apply import stored_properties

    key = rekeying.stored_key(stored_properties(spark, f"{root}/shop.accounts"))
    assert key is not None
    return key.columns


def test_events_under_an_old_and_a_new_key_in_one_batch_each_land_by_their_own(spark, tmp_path, form):
    """`(id)` became `(id, name)`: a second row with id 1 is inserted and the first
    deleted, all in one batch. Keyed by either key alone, two of the three events would
    be taken for one row."""
    root = tmp_path / "delta"
    merge(
        spark,
        root,
        form,
        [
            event("c", (0, 1, 1), after=row(1, "a"), key=ID),
            event("c", (0, 2, 1), after=row(2, "b"), key=ID),
            event("c", (0, 3, 1), after=row(1, "second", 5), key=BOTH),
            event("d", (0, 4, 1), before=row(1, "a"), key=BOTH),
            event("u", (0, 5, 1), before=row(2, "b"), after=row(2, "b", 7), key=BOTH),
        ],
    )
    assert live(spark, root) == [(1, "second", 5), (2, "b", 7)]
    assert set(table_key(spark, root)) == set(BOTH)


def test_a_narrower_key_does_not_bring_a_deleted_row_back(spark, tmp_path, form):
    """Under `(id)`, rows 1 and 3 shared name `x` until 3 was deleted; the key then became
    `(name)`. An update of `x` must reach the live row alone: the tombstone of 3 shares
    its new key and goes (one row per key), so it cannot come back as a second live `x`."""
    root = tmp_path / "delta"
    merge(
        spark,
        root,
        form,
        [
            event("c", (0, 1, 1), after=row(1, "x"), key=ID),
            event("c", (0, 2, 1), after=row(2, "y"), key=ID),
            event("c", (0, 3, 1), after=row(3, "x"), key=ID),
            event("d", (0, 4, 1), before=row(3, "x"), key=ID),
        ],
    )
    merge(spark, root, form, [event("u", (0, 6, 1), before=row(1, "x"), after=row(1, "x", 9), key=NAME)])
    assert stored(spark, root) == [(1, "x", 9, False), (2, "y", 0, False)]
    assert table_key(spark, root) == NAME
    # Merged again (a replay after a crash): the old-key delete is older than the key's
    # change, and does not bring the tombstone back to meet the next update of `x`.
    merge(
        spark,
        root,
        form,
        [event("d", (0, 4, 1), before=row(3, "x"), key=ID)],
    )
    assert stored(spark, root) == [(1, "x", 9, False), (2, "y", 0, False)]
    merge(spark, root, form, [event("u", (0, 8, 1), before=row(1, "x", 9), after=row(1, "x", 10), key=NAME)])
    assert live(spark, root) == [(1, "x", 10), (2, "y", 0)]


def test_a_key_changed_and_changed_back_within_a_batch_lands_each_part_in_order(spark, tmp_path, form):
    """`(id)`, then `(name)`, then `(id)` again, shuffled within one batch: the parts are
    told apart by order key, not by key alone."""
    root = tmp_path / "delta"
    records = [
        event("c", (0, 1, 1), after=row(1, "a"), key=ID),
        event("c", (0, 2, 1), after=row(2, "a"), key=ID),
        event("d", (0, 3, 1), before=row(2, "a"), key=ID),
        event("c", (0, 4, 1), after=row(3, "b"), key=NAME),
        event("u", (0, 5, 1), before=row(1, "a"), after=row(1, "a", 7), key=NAME),
        event("c", (0, 6, 1), after=row(4, "b"), key=ID),
        event("d", (0, 7, 1), before=row(3, "b"), key=ID),
    ]
    merge(spark, root, form, records[::-1])
    assert live(spark, root) == [(1, "a", 7), (4, "b", 0)]
    assert table_key(spark, root) == ID
    merge(spark, root, form, records)  # replayed whole: nothing changes
    assert live(spark, root) == [(1, "a", 7), (4, "b", 0)]


def test_a_new_key_on_a_column_the_stored_rows_lack_removes_none_of_them(spark, tmp_path):
    """The stored rows hold null in a key column added since: no MERGE by it can match
    them, and none is taken for another's duplicate."""
    from spark_jobs.merge.rekeying import single_under

    root = tmp_path / "delta"
    merge(spark, root, "json", [event("c", (0, n, 1), after=row(n, "a"), key=ID) for n in (1, 2, 3)])
    assert single_under(spark, f"{root}/shop.accounts", ID, ("code",)) == 0
    assert single_under(spark, f"{root}/shop.accounts", ID, ("name", "code")) == 0
    assert [r[0] for r in live(spark, root)] == [1, 2, 3]


def test_a_table_key_is_read_back_from_its_first_version_and_an_unknown_one_refused():
    """The key property as first written (version 1), frozen here."""
    from cdc_core.errors import TidemarkError
    from spark_jobs.merge.rekeying import PROPERTY, TableKey, stored_key

    frozen = '{"version": 1, "columns": ["id", "name"], "since": [0, 12, 3]}'
    assert stored_key({PROPERTY: frozen}) == TableKey(("id", "name"), (0, 12, 3))
    assert stored_key({PROPERTY: '{"version": 1, "columns": ["id"], "since": null}'}) == TableKey(("id",))
    assert TableKey.from_json(TableKey(BOTH, (1, 2, 3)).to_json()) == TableKey(BOTH, (1, 2, 3))
    assert stored_key({}) is None
    with pytest.raises(TidemarkError, match="version 2"):
        stored_key({PROPERTY: json.dumps({"version": 2, "columns": ["id"]})})


@pytest.mark.parametrize("batches", ["one batch", "a batch per step"])
def test_primary_key_changes_at_the_source_land_equal(
    tmp_path, mariadb_admin_params, scratch_db, spark, batches
):
    """MariaDB: a key widened, a key narrowed past a tombstone, rows written under each,
    merged in one batch or one per step, then all of it merged again from the start (a
    lost checkpoint): Delta equals the source every time."""
    from spark_jobs.delta_merge import run_local
    from tests.support.lakehouse import assert_delta_equals_source
    from tests.support.streamer import admin, payloads, running_in_process, topic, wait_for, write_connector

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, v VARCHAR(10))")
        cur.execute("CREATE TABLE k (id INT NOT NULL, a INT NOT NULL, v VARCHAR(10), PRIMARY KEY (id, a))")
    connector = write_connector(tmp_path, scratch_db, {"database.server.id": 6403})
    root, checkpoint = str(tmp_path / "delta"), str(tmp_path / "checkpoint")
    steps = [
        [
            "INSERT INTO t VALUES (1,1,'a'),(2,2,'b'),(3,3,'c')",
            "DELETE FROM t WHERE id=3",
            "INSERT INTO k VALUES (1,1,'a'),(1,2,'b'),(2,1,'c')",
            "DELETE FROM k WHERE id=2",
        ],
        [
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)",
            "INSERT INTO t VALUES (1,5,'dup-id'),(3,3,'again')",
            "UPDATE t SET v='u' WHERE id=2",
            "ALTER TABLE k DROP PRIMARY KEY, ADD PRIMARY KEY (a)",
        ],
        [
            "UPDATE k SET v='z' WHERE a=1",
            "DELETE FROM t WHERE id=1 AND a=1",
            "INSERT INTO t VALUES (7,7,'end')",
        ],
    ]
    with running_in_process(connector):
        for n, step in enumerate(steps):
            with db.cursor() as cur:
                for sql in step:
                    cur.execute(sql)
                cur.execute(f"INSERT INTO t VALUES ({1000 + n}, 0, 'm{n}')")
            marker = f"m{n}"
            events_of_t = topic(connector, scratch_db, "t")

            def marked(marker: str = marker, events_of_t: str = events_of_t) -> bool:
                return any(
                    (p.get("after") or {}).get("v") == marker for p in payloads(connector, events_of_t)
                )

            wait_for(marked, 60)
            if batches == "a batch per step":
                run_local(spark, connector.config(), root, checkpoint)
    if batches == "one batch":
        run_local(spark, connector.config(), root, checkpoint)
    assert_delta_equals_source(spark, root, mariadb_admin_params, scratch_db, ["t", "k"])
    run_local(spark, connector.config(), root, str(tmp_path / "lost-checkpoint"))
    assert_delta_equals_source(spark, root, mariadb_admin_params, scratch_db, ["t", "k"])


def test_released_snapshot_rows_land_by_their_key_beside_events_under_a_new_one(
    tmp_path, mariadb_admin_params, scratch_db, spark
):
    """MariaDB: a lakehouse release of the Spark chunk job read under key (id, a), where
    two rows share each `a`; then one of each pair deleted, the key narrowed to (a) and
    rows written under it, all merged in one batch: the staged rows land by the key they
    were read by (by `a` alone, each pair would be one row), the events by theirs."""
    from spark_jobs.delta_merge import run_local
    from spark_jobs.incremental_snapshot import main as chunk_job
    from tests.support.lakehouse import assert_delta_equals_source
    from tests.support.snapshots import SIGNALS, ids, send_signal, wait_finished
    from tests.support.streamer import admin, payloads, running_in_process, topic, wait_for, write_connector

    db = admin(mariadb_admin_params, scratch_db)
    with db.cursor() as cur:
        cur.execute("CREATE TABLE k (id INT NOT NULL, a INT NOT NULL, v VARCHAR(10), PRIMARY KEY (id, a))")
        cur.executemany("INSERT INTO k VALUES (%s, %s, 'x')", [(i, i % 100) for i in range(1, 201)])
    c = write_connector(tmp_path, scratch_db, {"database.server.id": 6406, "signal.data.collection": SIGNALS})
    signal_id = ids["lake-rekey"]
    with running_in_process(c):
        wait_for(lambda: (c.state / "status.json").exists(), 30)
        data = {
            "data-collections": [f"{scratch_db}.k"],
            "tidemark.reader": "spark",
            "tidemark.release": "lakehouse",
            "tidemark.chunk-size": 50,
        }
        send_signal(db, signal_id, "execute-snapshot", data)
        job = ["--config", str(c.path), "--signal", signal_id, "--staging", str(tmp_path / "staging")]
        assert chunk_job([*job, "--parallelism", "2"]) == 0
        wait_finished(c, signal_id, 120, "the lakehouse snapshot")
        with db.cursor() as cur:
            cur.execute("DELETE FROM k WHERE id > 100")
            cur.execute("ALTER TABLE k DROP PRIMARY KEY, ADD PRIMARY KEY (a)")
            cur.execute("INSERT INTO k VALUES (300, 3000, 'new')")
            cur.execute("UPDATE k SET v = 'y' WHERE a % 7 = 0")
            cur.execute("DELETE FROM k WHERE a = 2")
            cur.execute("INSERT INTO k VALUES (9999, 9999, 'end')")
        wait_for(
            lambda: any(
                (p.get("after") or {}).get("v") == "end" for p in payloads(c, topic(c, scratch_db, "k"))
            ),
            60,
        )
    run_local(spark, c.config(), str(tmp_path / "delta"), str(tmp_path / "checkpoint"))
    assert_delta_equals_source(spark, str(tmp_path / "delta"), mariadb_admin_params, scratch_db, ["k"])
